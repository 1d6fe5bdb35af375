"""A step's output is JSON data, a pydantic model or a dataclass, and nothing is converted
silently: a set, a generator, a datetime, bytes, a tuple as a key, an integer too long to read
back or a value nested too deeply fails the step with one readable line naming the field. Every
failure leaves a record with its type, whatever the exception or the output does."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES

NOT_JSON = [
    ("set", "NotJsonError: step 's' output field 'value' is a set; JSON has no sets (return a list, e.g. sorted(...))"),
    ("generator", "NotJsonError: step 's' output field 'value' is a generator; it would be consumed once "
                  "(return a list)"),
    ("datetime", "NotJsonError: step 's' output field 'value' is a datetime; return an ISO 8601 string with its "
                 "time zone (value.isoformat())"),
    ("tuple_key", "NotJsonError: step 's' output field 'value' has a key of type tuple ((1, 2)); JSON object keys "
                  "are strings"),
    ("bytes", "NotJsonError: step 's' output field 'value' is bytes; JSON has no bytes (decode it to text, or "
              "base64-encode it)"),
    ("huge_int", "NotJsonError: step 's' output field 'value' is an integer of more than 4300 digits, which JSON "
                 "readers refuse (return it as a string)"),
    ("deep", "NotJsonError: step 's' output field 'value' is nested deeper than 200 levels; flatten it"),
]


@pytest.mark.parametrize(("kind", "error"), NOT_JSON, ids=[k for k, _ in NOT_JSON])
def test_an_output_that_is_not_json_fails_the_step_naming_the_field(cli, store, kind, error):
    result = cli("run", str(FIXTURES / "not_json_output.yaml"), "--input", f"kind={kind}", "--json")
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    doc = result.json()
    assert doc["status"] == "failed"
    [step] = doc["steps"]
    assert (step["status"], step["error"], step["output"]) == ("failed", error, None)
    assert store.count_rows()["step_records"] == 1
    shown = cli("show", doc["run_id"], "--json").json()
    assert [a["error"] for a in shown["attempts"]] == [error]


def test_json_data_pydantic_models_and_dataclasses_still_pass(cli):
    doc = cli("run", str(FIXTURES / "models.yaml"), "--json").json()
    assert doc["status"] == "succeeded"


def test_an_exception_whose_message_raises_is_still_recorded_with_its_type(cli, store):
    result = cli("run", str(FIXTURES / "unprintable_error.yaml"), "--json")
    assert result.exit_code == 1
    doc = result.json()
    shown = cli("show", doc["run_id"], "--json").json()
    assert len(shown["attempts"]) == 1
    [step] = shown["steps"]
    assert step["status"] == "failed"
    assert step["error"] == "UnprintableError: (its message could not be read: __str__ raised RuntimeError)"
    assert step["traceback"].startswith("Traceback") and "UnprintableError" in step["traceback"]
    assert store.count_rows()["step_records"] == 1
    trace = cli("trace", doc["run_id"], "--json")
    assert trace.exit_code == 0, trace.stderr
