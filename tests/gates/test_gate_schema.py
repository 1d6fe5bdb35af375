from __future__ import annotations

import sys

import pytest
from pydantic import BaseModel

from gates import GateConfigError, Schema


class Quote(BaseModel):
    vendor: str
    price: float


JSON_SCHEMA = {
    "type": "object",
    "required": ["vendor", "price"],
    "properties": {"vendor": {"type": "string"}, "price": {"type": "number", "minimum": 0}},
}


def test_schema_passes_output_that_validates_against_a_pydantic_model(ctx):
    result = Schema(model=Quote).check({"vendor": "acme", "price": 3}, ctx)
    assert result.passed
    assert result.reason == "output matches model Quote"


def test_schema_fails_with_the_paths_of_the_first_errors(ctx):
    result = Schema(model=Quote).check({"price": "cheap"}, ctx)
    assert not result.passed
    assert result.reason.startswith(
        "output does not match model Quote: 2 errors: vendor: Field required; price:")
    assert result.details["error_count"] == 2


def test_schema_resolves_a_model_reference_next_to_the_workflow(build, ctx, tmp_path):
    (tmp_path / "quote_models_for_schema_gate.py").write_text(
        "from pydantic import BaseModel\nclass Quote(BaseModel):\n    vendor: str\n")
    gate = build({"gate": "schema", "model": "quote_models_for_schema_gate:Quote"}, base_dir=str(tmp_path))
    assert gate.check({"vendor": "acme"}, ctx).passed
    assert not gate.check({}, ctx).passed
    sys.modules.pop("quote_models_for_schema_gate", None)


def test_schema_validates_an_inline_json_schema(build, ctx):
    gate = build({"gate": "schema", "schema": JSON_SCHEMA})
    assert gate.check({"vendor": "acme", "price": 2.5}, ctx).passed


def test_schema_fails_json_schema_violations_listing_paths_and_counting_the_rest(build, ctx):
    gate = build({"gate": "schema", "field": "quotes",
                  "schema": {"type": "array", "items": JSON_SCHEMA}})
    bad = {"quotes": [{"vendor": 1, "price": -1}, {}, {"vendor": "x", "price": "y"}]}
    result = gate.check(bad, ctx)
    assert not result.passed
    assert result.reason.startswith(
        "field 'quotes' does not match the JSON Schema: 5 errors: 0.price: -1 is less")
    assert result.reason.endswith("; and 2 more")


def test_schema_validates_pydantic_outputs_against_a_json_schema(build, ctx):
    gate = build({"gate": "schema", "schema": JSON_SCHEMA})
    assert gate.check(Quote(vendor="acme", price=1.0), ctx).passed


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "step 'retrieve' gate 'schema': give exactly one of 'model'"),
        ({"model": "x:Y", "schema": {}}, "give exactly one of 'model'"),
        ({"schema": {"type": "nonsense"}}, "parameter 'schema' is not a valid JSON Schema at type"),
        ({"model": "no_such_module_for_gates:Model"}, "parameter 'model': cannot import module"),
        ({"model": "json:dumps"}, "parameter 'model' must name a pydantic model class"),
    ],
)
def test_schema_rejects_bad_configuration(build, params, message):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "schema", **params})
    assert message in str(err.value)


def test_schema_import_does_not_load_jsonschema_until_a_json_schema_gate_is_built():
    import subprocess

    code = "import sys, gates; print('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
