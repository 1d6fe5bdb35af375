from __future__ import annotations

import pytest

from gates import GateConfigError


def test_regex_passes_when_the_pattern_is_found(build, ctx):
    result = build({"gate": "regex", "pattern": r"PO-\d+", "field": "ref"}).check({"ref": "see PO-42"}, ctx)
    assert result.passed
    assert result.reason == "field 'ref' matches pattern 'PO-\\\\d+': 'PO-42'"


def test_regex_fullmatch_fails_when_only_part_of_the_text_matches(build, ctx):
    gate = build({"gate": "regex", "pattern": r"\d{4}-\d{2}-\d{2}", "mode": "fullmatch"})
    assert gate.check("2024-05-01", ctx).passed
    result = gate.check("on 2024-05-01", ctx)
    assert not result.passed
    assert result.reason == "output 'on 2024-05-01' does not fully match pattern '\\\\d{4}-\\\\d{2}-\\\\d{2}'"


def test_regex_search_failure_and_non_text_values_are_verdicts(build, ctx):
    gate = build({"gate": "regex", "pattern": "approved", "ignore_case": True})
    assert gate.check("APPROVED by finance", ctx).passed
    assert gate.check("rejected", ctx).reason == \
        "output 'rejected' does not contain a match for pattern 'approved'"
    assert gate.check({"a": 1}, ctx).reason == "output is a dict, not text; set 'field' to the text inside it"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"pattern": "("},
         "step 'retrieve' gate 'regex': parameter 'pattern' '(' is not a valid regular expression"),
        ({"pattern": "a", "mode": "match"},
         "parameter 'mode' should be 'search' or 'fullmatch' (got 'match')"),
        ({}, "missing required parameter 'pattern'"),
    ],
)
def test_regex_rejects_bad_configuration(build, params, message):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "regex", **params})
    assert message in str(err.value)


def test_regex_refuses_what_a_linear_time_engine_cannot_match(build):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "regex", "pattern": "a(?=b)"})
    assert ("parameter 'pattern' 'a(?=b)' is not a valid regular expression for RE2 (linear-time; no lookarounds or "
            "backreferences): invalid perl operator: (?=") in str(err.value)


def test_a_backtracking_pattern_gives_its_verdict(build, ctx):
    """``^(a+)+$`` on 41 characters: minutes under a backtracking engine, a plain verdict here."""
    gate = build({"gate": "regex", "pattern": "^(a+)+$", "mode": "fullmatch"})
    assert not gate.check("a" * 40 + "!", ctx).passed
    assert gate.check("a" * 41, ctx).passed
