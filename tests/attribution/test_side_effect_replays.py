"""Replays through side-effecting steps: `simulate:` dry runs, blocked replays and their blockers."""

from __future__ import annotations

import json

from orchestrator.attribution.counterfactual import counterfactual
from orchestrator.attribution.credit import shapley_attribution
from orchestrator.attribution.methods import fork_run
from orchestrator.service.runner import start_run
from tests.attribution.conftest import FIX
from tests.conftest import calls

BLOCKED = "blocked by send: side-effecting step with changed inputs and no simulate"


def test_a_replay_calls_simulate_and_never_the_side_effecting_step(store, run_wf, step_log):
    run = run_wf("side_effects_simulated")
    assert calls(step_log).count("notify") == 1
    fork = fork_run(store, run.run_id, "analyze", {"value": 7, "quality": 1.0})
    assert fork.status == "succeeded" and fork.value == 1.0
    assert calls(step_log).count("notify") == 1  # the real side effect happened once, in the run
    assert calls(step_log).count("notify_dry_run") == 1
    send = next(r for r in store.step_records(fork.run_id) if r.step_id == "send")
    assert send.origin == "simulated" and send.output == {"sent": True, "value": 7}


def test_counterfactual_replays_through_simulate_and_blames_the_faulty_step(store, run_wf, step_log):
    run = run_wf("side_effects_simulated")
    result = counterfactual(store, run.run_id)
    assert result.blamed_step == "analyze"
    assert not result.evidence["blocked"]
    assert calls(step_log).count("notify") == 1
    assert calls(step_log).count("notify_dry_run") >= 2


def test_counterfactual_names_the_step_that_blocked_a_replay(store, run_wf):
    run = run_wf("side_effects")
    result = counterfactual(store, run.run_id)
    analyze = next(c for c in result.candidates if c.step_id == "analyze")
    assert analyze.evidence["blocked_by"] == "send"
    assert result.evidence["blocked"] == [{"step_id": "send", "reason": BLOCKED.split(": ", 1)[1],
                                           "candidates": ["analyze"]}]
    assert BLOCKED in result.evidence["explanation"]
    replay = store.get_run(analyze.evidence["replay_run_id"])
    assert replay.status == "failed" and replay.error == BLOCKED
    send = next(r for r in store.step_records(replay.run_id) if r.step_id == "send")
    assert send.error_type == "ReplayBlocked"


def test_shapley_reports_the_blocker_instead_of_zero_credit(store, run_wf):
    run = run_wf("side_effects")
    result = shapley_attribution(store, run.run_id)
    assert result.blamed_step is None and result.confidence == 0.0
    assert result.evidence["blocked"][0]["step_id"] == "send"
    assert BLOCKED in result.evidence["explanation"]
    assert all(c.evidence["blocked_by"] == "send" for c in result.candidates)


def test_cli_attribute_prints_the_blocker(cli, run_wf):
    run_id = run_wf("side_effects").run_id
    result = cli("attribute", run_id, "--method", "counterfactual")
    assert result.exit_code == 0, (result.stdout + result.stderr)
    assert BLOCKED in " ".join((result.stdout + result.stderr).split())


def test_replay_of_a_paused_run_reports_the_step_that_blocked_it(cli, tmp_path):
    """The side-effecting step never ran in a paused run: the fork says so instead of an empty error."""
    paused = _paused_run_with_side_effect(cli, tmp_path)
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps({"value": 7, "quality": 1.0}))
    result = cli("replay", paused, "--from", "analyze", "--output", str(fixed))
    assert result.exit_code == 1
    text = " ".join((result.stdout + result.stderr).split())
    assert "failed" in text
    assert "blocked by send: side-effecting step that never ran in the original run" in text


def test_a_failed_replay_prints_its_real_error(cli, tmp_path):
    wf = tmp_path / "wf.yaml"
    wf.write_text("""name: fork-fails
inputs: {x: {type: integer, default: 7}}
steps:
  - id: fetch
    run: attr_steps:fetch
    inputs: {x: $inputs.x}
  - id: lookup
    run: attr_steps:add_offset
    inputs: {data: fetch, offset: 0}
""")
    (tmp_path / "attr_steps.py").write_text((FIX / "attr_steps.py").read_text())
    first = cli("run", str(wf), "--json")
    run_id = first.json()["run_id"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"no_value": 1}))
    result = cli("replay", run_id, "--from", "fetch", "--output", str(bad))
    assert result.exit_code == 1
    assert "step 'lookup' failed: KeyError: 'value'" in " ".join((result.stdout + result.stderr).split())


def _paused_run_with_side_effect(cli, tmp_path):
    wf = tmp_path / "paused_send.yaml"
    wf.write_text("""name: paused-send
inputs: {x: {type: integer, default: 7}, offset: {type: integer, default: 50}}
steps:
  - id: fetch
    run: attr_steps:fetch
    inputs: {x: $inputs.x}
  - id: analyze
    run: attr_steps:add_offset
    inputs: {data: fetch, offset: $inputs.offset}
    gates: [{gate: range, field: value, max: 10}]
  - id: send
    type: action
    run: attr_steps:notify
    side_effects: true
    inputs: {data: analyze}
  - id: respond
    run: attr_steps:answer
    inputs: {data: analyze, x: $inputs.x}
    after: [send]
outcome: attr_steps:score
output: respond
""")
    (tmp_path / "attr_steps.py").write_text((FIX / "attr_steps.py").read_text())
    result = cli("run", str(wf), "--json")
    assert result.exit_code == 3, (result.stdout + result.stderr)
    return result.json()["run_id"]


def test_simulate_without_side_effects_is_a_validation_error(cli, tmp_path):
    wf = tmp_path / "wf.yaml"
    wf.write_text("""name: bad
steps:
  - id: send
    run: attr_steps:notify
    simulate: attr_steps:notify_dry_run
""")
    (tmp_path / "attr_steps.py").write_text((FIX / "attr_steps.py").read_text())
    result = cli("validate", str(wf), db=False)
    assert result.exit_code == 2
    assert "add side_effects: true" in (result.stdout + result.stderr)


def test_an_unresolvable_simulate_is_a_validation_error(cli, tmp_path):
    wf = tmp_path / "wf.yaml"
    wf.write_text("""name: bad
steps:
  - id: send
    run: attr_steps:notify
    side_effects: true
    simulate: attr_steps:no_such_dry_run
""")
    (tmp_path / "attr_steps.py").write_text((FIX / "attr_steps.py").read_text())
    result = cli("validate", str(wf), db=False)
    assert result.exit_code == 2
    assert "simulate" in (result.stdout + result.stderr) and "no_such_dry_run" in (result.stdout + result.stderr)


def test_python_api_takes_simulate_as_a_function(store, step_log):
    from orchestrator import Workflow
    from tests.attribution.fixtures import attr_steps  # type: ignore[attr-defined]

    wf = Workflow("py-simulate", inputs={"x": "integer"}, output="send")

    @wf.step()
    def fetch(x: int) -> dict:
        return {"value": x}

    wf.step(id="send", side_effects=True, simulate=attr_steps.notify_dry_run, inputs={"data": "fetch"})(
        attr_steps.notify)
    bound = wf.bind()
    assert bound.spec.steps[1].simulate == "tests.attribution.fixtures.attr_steps:notify_dry_run"
    run = start_run(store, bound, {"x": 3})
    fork = fork_run(store, run.run_id, "fetch", {"value": 4}, workflow=bound)
    assert fork.status == "succeeded" and fork.output == {"sent": True, "value": 4}
    assert calls(step_log).count("notify") == 1 and calls(step_log).count("notify_dry_run") == 1
