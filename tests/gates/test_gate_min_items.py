from __future__ import annotations

import pytest

from gates import GateConfigError, MinItems

RESULTS = [{"id": "d1", "score": 0.9}, {"id": "d2", "score": 0.75}, {"id": "d3", "score": 0.2},
           {"id": "d4", "score": 0.71}, {"id": "d5"}]


def test_min_items_passes_when_enough_items_clear_the_threshold(build, ctx):
    gate = build({"gate": "min_items", "count": 3, "score_field": "score", "threshold": 0.7})
    result = gate.check(RESULTS, ctx)
    assert result.passed
    assert result.score == 1.0
    assert result.reason == "3 of 5 items score >= 0.7 (need 3; 1 without a numeric 'score')"


def test_min_items_fails_when_too_few_items_clear_threshold(build, ctx):
    gate = build({"gate": "min_items", "count": 3, "score_field": "score", "threshold": 0.8})
    result = gate.check(RESULTS, ctx)
    assert not result.passed
    assert result.score == pytest.approx(1 / 3)
    assert result.reason.startswith("1 of 5 items score >= 0.8 (need 3")
    assert result.details["qualifying"] == 1


def test_min_items_counts_a_list_inside_the_output_by_field(build, ctx):
    gate = build({"gate": "min_items", "count": 2, "field": "hits"})
    assert gate.check({"hits": ["a", "b"]}, ctx).passed
    result = gate.check({"hits": ["a"]}, ctx)
    assert not result.passed
    assert result.reason == "1 item (need 2)"
    assert result.score == 0.5


def test_min_items_fails_with_reason_when_the_value_is_not_a_list(build, ctx):
    gate = build({"gate": "min_items", "count": 1, "field": "hits"})
    assert gate.check({"hits": {"a": 1}}, ctx).reason == "field 'hits' is a dict, not a list of items"
    assert "field 'hits' not found" in gate.check({}, ctx).reason


def test_min_items_reads_nested_scores_of_pydantic_items(ctx):
    from pydantic import BaseModel

    class Hit(BaseModel):
        meta: dict[str, float]

    gate = MinItems(count=1, score_field="meta.relevance", threshold=0.5)
    assert gate.check([Hit(meta={"relevance": 0.6})], ctx).passed


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"cout": 3}, "step 'retrieve' gate 'min_items': unknown parameter 'cout'; "
                      "valid: count, field, score_field, threshold"),
        ({}, "step 'retrieve' gate 'min_items': missing required parameter 'count'"),
        ({"count": "three"}, "parameter 'count' should be a valid integer (got 'three')"),
        ({"count": 0}, "parameter 'count' must be an integer >= 1, got 0"),
        ({"count": 3, "score_field": "score"}, "'score_field' and 'threshold' go together"),
    ],
)
def test_min_items_rejects_bad_configuration_naming_step_and_gate(build, params, message):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "min_items", **params})
    assert message in str(err.value)
