from __future__ import annotations

import pytest

from gates import GateConfigError


def test_one_of_passes_an_allowed_value(build, ctx):
    gate = build({"gate": "one_of", "field": "decision", "values": ["buy", "wait"]})
    result = gate.check({"decision": "buy"}, ctx)
    assert result.passed
    assert result.reason == "field 'decision' = 'buy' is one of 'buy', 'wait'"


def test_one_of_fails_an_invented_value(build, ctx):
    result = build({"gate": "one_of", "field": "decision", "values": ["buy", "wait"]}).check(
        {"decision": "maybe"}, ctx)
    assert not result.passed
    assert result.reason == "field 'decision' = 'maybe' is not one of 'buy', 'wait'"


def test_one_of_does_not_confuse_true_with_one(build, ctx):
    gate = build({"gate": "one_of", "values": [1, 2]})
    assert gate.check(1, ctx).passed
    assert not gate.check(True, ctx).passed


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "step 'retrieve' gate 'one_of': missing required parameter 'values'"),
        ({"values": []}, "parameter 'values' must be a non-empty list"),
        ({"values": "buy"}, "parameter 'values' should be a valid list (got 'buy')"),
    ],
)
def test_one_of_rejects_bad_configuration(build, params, message):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "one_of", **params})
    assert message in str(err.value)
