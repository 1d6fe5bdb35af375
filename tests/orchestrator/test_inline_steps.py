"""``inline: true``: a plain function called on the event loop's thread, with the same records and timeouts."""

from __future__ import annotations

import threading
import time

from orchestrator import Workflow, open_store, start_run


def where_am_i(x: int) -> str:
    return threading.current_thread().name


def overrun(x: int) -> int:
    time.sleep(0.6)
    return x


def inline_workflow() -> Workflow:
    wf = Workflow("inline-demo", inputs={"x": "integer"}, output="inline")
    wf.step(id="threaded", inputs={"x": "$inputs.x"})(where_am_i)
    wf.step(id="inline", inputs={"x": "$inputs.x"}, inline=True)(where_am_i)
    return wf


def test_an_inline_step_runs_on_the_calling_thread_and_a_plain_one_does_not(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    result = start_run(store, inline_workflow().bind(), {"x": 1})
    outputs = {r.step_id: r.output for r in store.step_records(result.run_id)}
    assert result.status == "succeeded"
    assert outputs["inline"] == threading.current_thread().name
    assert outputs["threaded"] != threading.current_thread().name


def test_an_inline_step_that_overruns_its_timeout_is_recorded_as_timed_out(tmp_path):
    wf = Workflow("inline-overrun", inputs={"x": "integer"}, output="slow")
    wf.step(id="slow", inputs={"x": "$inputs.x"}, inline=True, timeout=0.2)(overrun)
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    result = start_run(store, wf.bind(), {"x": 1})
    record = store.step_records(result.run_id)[-1]
    assert result.status == "failed"
    assert record.status == "failed"
    assert record.output is None
    assert "TimeoutError" in (record.error_type or "") + (record.error_message or "")


def test_inline_with_process_isolation_is_a_validation_error(tmp_path, cli):
    workflow = tmp_path / "bad.yaml"
    workflow.write_text("name: bad\nsteps:\n  - id: a\n    run: os.path:basename\n    inline: true\n"
                        "    isolation: process\n    inputs: {p: $inputs.p}\ninputs:\n  p: {type: string}\n")
    result = cli("validate", str(workflow), db=False)
    assert result.exit_code == 2
    assert "inline: true" in result.stderr and "isolation: process" in result.stderr
    assert "Traceback" not in result.stderr


def test_inline_on_an_async_function_is_a_validation_error(tmp_path, cli):
    (tmp_path / "steps_mod.py").write_text("async def go(p):\n    return p\n")
    workflow = tmp_path / "bad.yaml"
    workflow.write_text("name: bad\ninputs:\n  p: {type: string}\nsteps:\n  - id: a\n    run: steps_mod:go\n"
                        "    inline: true\n    inputs: {p: $inputs.p}\n")
    result = cli("validate", str(workflow), db=False)
    assert result.exit_code == 2
    assert "bad.yaml" in result.stderr and "inline: true is for plain functions" in result.stderr
