from __future__ import annotations

import pytest

from gates import GateConfigError


def test_required_fields_passes_when_every_path_is_present(build, ctx):
    gate = build({"gate": "required_fields", "fields": ["vendor", "price.amount"]})
    result = gate.check({"vendor": "acme", "price": {"amount": 0}}, ctx)
    assert result.passed
    assert result.reason == "all 2 required fields present"


def test_required_fields_fails_naming_missing_and_none_fields(build, ctx):
    gate = build({"gate": "required_fields", "fields": ["vendor", "price.amount", "days"]})
    result = gate.check({"vendor": None, "price": {}, "days": 3}, ctx)
    assert not result.passed
    assert result.reason == "1 of 3 required fields present; missing 'price.amount'; None: 'vendor'"
    assert result.score == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "step 'retrieve' gate 'required_fields': missing required parameter 'fields'"),
        ({"fields": []}, "parameter 'fields' must be a non-empty list"),
        ({"fields": "vendor"}, "parameter 'fields' should be a valid list (got 'vendor')"),
    ],
)
def test_required_fields_rejects_bad_configuration(build, params, message):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "required_fields", **params})
    assert message in str(err.value)
