from __future__ import annotations

import pytest

from gates import GateConfigError, NotEmpty


def test_not_empty_passes_text_with_content(build, ctx):
    result = build("not_empty").check("a summary", ctx)
    assert result.passed
    assert result.reason == "output is a non-empty str of 9 chars"


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        (None, "output is None"),
        ("", "output is an empty string"),
        ("  \n\t", "output is a whitespace-only string"),
        ([], "output is an empty list"),
        ({}, "output is an empty dict"),
    ],
)
def test_not_empty_fails_on_empty_values(ctx, output, reason):
    result = NotEmpty().check(output, ctx)
    assert not result.passed
    assert result.reason == reason


def test_not_empty_checks_a_field_and_reports_a_missing_one(build, ctx):
    gate = build({"gate": "not_empty", "field": "summary"})
    assert gate.check({"summary": "ok"}, ctx).passed
    assert gate.check({"summary": " "}, ctx).reason == "field 'summary' is a whitespace-only string"
    assert gate.check({}, ctx).reason.startswith("field 'summary' not found")


def test_not_empty_rejects_bad_configuration(build):
    with pytest.raises(GateConfigError, match="step 'retrieve' gate 'not_empty': unknown parameter 'feild'; "
                                              r"valid: field \(did you mean 'field'\?\)"):
        build({"gate": "not_empty", "feild": "x"})
