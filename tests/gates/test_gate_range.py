from __future__ import annotations

import pytest

from gates import GateConfigError


def test_range_passes_values_within_bounds(build, ctx):
    gate = build({"gate": "range", "field": "price", "min": 0, "max": 10})
    result = gate.check({"price": 10}, ctx)
    assert result.passed
    assert result.reason == "field 'price' = 10 is within [0, 10]"


def test_range_fails_values_above_max_with_the_value_in_the_reason(build, ctx):
    gate = build({"gate": "range", "field": "price", "max": 10})
    result = gate.check({"price": 12.5}, ctx)
    assert not result.passed
    assert result.reason == "field 'price' = 12.5 is above max 10"


def test_range_fails_values_below_min_on_the_output_itself(build, ctx):
    assert build({"gate": "range", "min": 0.5}).check(0.25, ctx).reason == "output = 0.25 is below min 0.5"


@pytest.mark.parametrize(("value", "kind"), [("12", "str"), (True, "bool"), (None, "None")])
def test_range_fails_non_numeric_values_with_a_clear_reason(build, ctx, value, kind):
    result = build({"gate": "range", "field": "price", "min": 0}).check({"price": value}, ctx)
    assert not result.passed
    assert result.reason == f"field 'price' = {value!r} is a {kind}, not a number"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "step 'retrieve' gate 'range': give at least one of 'min' and 'max'"),
        ({"min": 5, "max": 1}, "'min' (5) is greater than 'max' (1)"),
        ({"max": "ten"}, "parameter 'max' should be a valid number (got 'ten')"),
        ({"maximum": 1}, "unknown parameter 'maximum'; valid: field, max, min"),
    ],
)
def test_range_rejects_bad_configuration(build, params, message):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "range", **params})
    assert message in str(err.value)
