"""``output_schema`` on a Python step (``run:``): what the function returns must fit it.

An output that fits goes on as any other; one that does not fails the step, saying where it does not fit,
and the steps after it never run. (An invalid schema is a ``validate`` error: tests/orchestrator/test_validate.py.)
"""

from __future__ import annotations

from tests.conftest import FIXTURES, calls

FLOW = FIXTURES / "python_schema.yaml"
"""src returns {"value": x, ...}; its output_schema allows a value of at most 5."""


def test_an_output_that_fits_the_schema_goes_on(cli, step_log):
    res = cli("run", str(FLOW), "--input", "x=4", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == 8


def test_an_output_outside_the_schema_fails_the_step_naming_where_and_nothing_after_it_runs(cli, step_log):
    res = cli("run", str(FLOW), "--input", "x=9", "--json")
    assert res.exit_code == 1
    doc = cli("show", res.json()["run_id"], "--json").json()
    [src] = [s for s in doc["steps"] if s["step_id"] == "src"]
    assert src["status"] == "failed"
    assert src["error"] == ("OutputSchemaError: step 'src' returned an output that does not fit its output_schema: "
                            "$.value: 9 is greater than the maximum of 5")
    assert "left" not in {s["step_id"] for s in doc["steps"] if s["status"] == "succeeded"}
    assert calls(step_log) == ["source"]
