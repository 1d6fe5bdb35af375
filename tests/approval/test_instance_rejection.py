"""Rejecting one instance of a map ends that instance, not the map: a rejected pause of a mapped instance (or
one inside an instance's child run) ends the instance ``rejected``, its consumers read null from it, and the
other instances go on. ``reject RUN`` without ``--step`` rejects the run as a whole and closes every open pause
of its tree: no pause is ever left open under a run that ended.

The refund map runs one child run per ticket (decide, an approval step ``confirm``, then ``pay``, which
appends to $PAY_LOG); executions and payments are counted from outside the process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.api import Orchestrator
from orchestrator.store import Store, open_store
from tests.conftest import side_effect_file
from tests.flow.conftest import FLOW, executions

APPROVAL = Path(__file__).parent.parent / "fixtures" / "approval"
PATHS = [f"per_ticket[{i}] > confirm" for i in range(5)]


@pytest.fixture
def pay_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where ``pay`` appends a line per refund it paid."""
    return side_effect_file(tmp_path, monkeypatch, "payments.log", "PAY_LOG")


def _payments(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines() if line.strip()]


def _children(store: Store, run_id: str) -> dict[str, str]:
    return {c.parent_step or "": c.status for c in store.child_runs(run_id)}


def _paused_map(cli) -> str:
    res = cli("run", str(APPROVAL / "refund_map.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    assert res.json()["paused_steps"] == PATHS
    return res.json()["run_id"]


def test_rejecting_one_instances_child_ends_that_instance_and_the_map_goes_on(durable_cli, durable_url, pay_log):
    cli, db_url = durable_cli, durable_url
    run_id = _paused_map(cli)
    assert cli("approve", run_id, "--step", PATHS[0]).exit_code == 3  # the others still wait
    res = cli("reject", run_id, "--step", PATHS[2], "--reason", "not our order", "--json")
    assert res.exit_code == 3, res.stderr  # the run goes on, and waits at the three pauses still open
    assert res.json()["status"] == "paused"
    assert res.json()["paused_steps"] == [PATHS[1], PATHS[3], PATHS[4]]
    assert "instance per_ticket[2] of run " + run_id + " ended rejected" in res.stderr
    store = open_store(db_url)
    assert _children(store, run_id)["per_ticket[2]"] == "rejected"
    for path in (PATHS[1], PATHS[3]):
        assert cli("approve", run_id, "--step", path).exit_code == 3
    done = cli("approve", run_id, "--step", PATHS[4], "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json()["output"] == ("refunded 20 on order o0 | refunded 20 on order o1 | - | "
                                     "refunded 20 on order o3 | refunded 20 on order o4")
    assert store.get_run(run_id).status == "succeeded"
    assert _children(store, run_id) == {"per_ticket[0]": "succeeded", "per_ticket[1]": "succeeded",
                                        "per_ticket[2]": "rejected", "per_ticket[3]": "succeeded",
                                        "per_ticket[4]": "succeeded"}
    assert sorted(_payments(pay_log)) == ["o0", "o1", "o3", "o4"]  # the rejected ticket was never paid
    instance = next(s for s in cli("show", run_id, "--json").json()["attempts"] if s["unit"] == "per_ticket[2]")
    assert instance["status"] == "skipped"
    assert "rejected at step 'per_ticket[2] > confirm': not our order" in instance["error"]
    assert cli("runs", "--kind", "child", "--status", "paused", "--json").json() == []


def test_rejecting_the_run_as_a_whole_closes_every_open_pause_of_its_tree(durable_cli, durable_url, pay_log):
    cli, db_url = durable_cli, durable_url
    run_id = _paused_map(cli)
    assert cli("approve", run_id, "--step", PATHS[0]).exit_code == 3
    res = cli("reject", run_id, "--reason", "the whole batch is fraudulent")
    assert res.exit_code == 1, res.stderr
    assert f"run {run_id} rejected as a whole" in res.stdout
    assert "pauses closed with it: " + ", ".join(PATHS[1:]) in res.stdout.replace("\n", "")
    store = open_store(db_url)
    assert store.get_run(run_id).status == "rejected"
    assert _children(store, run_id) == {"per_ticket[0]": "succeeded", **{f"per_ticket[{i}]": "rejected"
                                                                        for i in range(1, 5)}}
    assert cli("runs", "--kind", "child", "--status", "paused", "--json").json() == []
    for child in store.child_runs(run_id)[1:]:  # each closed pause carries the decision that closed it
        assert [(r.step_id, r.decision) for r in store.reviews(child.run_id)] == [("confirm", "reject")]
    refused = cli("approve", run_id, "--step", PATHS[3])
    assert refused.exit_code == 2
    assert _payments(pay_log) == ["o0"]


def test_a_rejected_pause_outside_any_instance_still_rejects_the_tree(cli, db_url, step_log):
    res = cli("run", str(FLOW / "tree_deep.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    run_id = res.json()["run_id"]
    rejected = cli("reject", run_id, "--step", "outer > research > retrieve", "--reason", "off topic")
    assert rejected.exit_code == 1, rejected.stderr
    store = open_store(db_url)
    assert store.get_run(run_id).status == "rejected"
    assert cli("runs", "--kind", "child", "--status", "paused", "--json").json() == []


def test_rejecting_a_plain_instances_gate_pause_ends_the_instance_and_its_consumer_reads_null(cli, db_url, step_log):
    res = cli("run", str(FLOW / "map_two_pauses.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    run_id = res.json()["run_id"]
    assert res.json()["paused_steps"] == ["summarize[0]", "summarize[1]", "summarize[2]", "summarize[3]"]
    rejected = cli("reject", run_id, "--step", "summarize[1]", "--reason", "unreadable", "--json")
    assert rejected.exit_code == 3, rejected.stderr
    assert rejected.json()["paused_steps"] == ["summarize[0]", "summarize[2]", "summarize[3]"]
    for unit in ("summarize[0]", "summarize[2]"):
        assert cli("approve", run_id, "--step", unit).exit_code == 3
    done = cli("approve", run_id, "--step", "summarize[3]", "--json")
    assert done.exit_code == 0, done.stderr
    units = {s["unit"]: s for s in done.json()["steps"]}
    assert units["summarize[1]"]["status"] == "skipped"
    assert units["summarize"]["output"][1] is None
    assert "document 1" not in done.json()["output"]
    assert executions(step_log).count("combine") == 1
    assert open_store(db_url).get_run(run_id).status == "succeeded"


def test_the_python_api_rejects_one_instance_and_then_the_run_as_a_whole(db_url, pay_log):
    with Orchestrator(db_url) as orch:
        run = orch.run(APPROVAL / "refund_map.yaml")
        assert run.status == "paused"
        after = orch.reject(run.run_id, step=PATHS[4], comment="duplicate")
        assert after.status == "paused"
        store = open_store(db_url)
        assert _children(store, run.run_id)["per_ticket[4]"] == "rejected"
        ended = orch.reject(run.run_id, comment="stop everything")
        assert ended.status == "rejected"
        assert set(_children(store, run.run_id).values()) == {"rejected"}
    assert _payments(pay_log) == []


def test_rejecting_a_mapped_approval_instance_pays_the_others_and_not_it(cli, db_url, pay_log):
    res = cli("run", str(APPROVAL / "refund_items.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    run_id = res.json()["run_id"]
    assert res.json()["paused_steps"] == ["confirm[0]", "confirm[1]", "confirm[2]"]
    rejected = cli("reject", run_id, "--step", "confirm[1]", "--reason", "order o1 was never delivered", "--json")
    assert rejected.exit_code == 3, rejected.stderr
    assert rejected.json()["paused_steps"] == ["confirm[0]", "confirm[2]"]
    assert cli("approve", run_id, "--step", "confirm[0]").exit_code == 3
    done = cli("approve", run_id, "--step", "confirm[2]", "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json()["output"] == "refunded 20 on order o0 | - | refunded 20 on order o2"
    assert sorted(_payments(pay_log)) == ["o0", "o2"]
    store = open_store(db_url)
    assert [(r.step_id, r.decision) for r in store.reviews(run_id)] == [
        ("confirm[1]", "reject"), ("confirm[0]", "approve"), ("confirm[2]", "approve")]


def test_rejecting_an_instances_child_run_as_a_whole_ends_only_that_instance(cli, db_url, pay_log):
    run_id = _paused_map(cli)
    store = open_store(db_url)
    child = next(c for c in store.child_runs(run_id) if c.parent_step == "per_ticket[3]")
    res = cli("reject", child.run_id, "--reason", "wrong customer", "--json")
    assert res.exit_code == 3, res.stderr  # the parent goes on, and waits at the other four
    assert f"run {child.run_id} rejected as a whole" in res.stderr
    assert store.get_run(child.run_id).status == "rejected"
    assert store.get_run(run_id).status == "paused"
    assert res.json()["run_id"] == run_id
    assert res.json()["paused_steps"] == PATHS[:3] + PATHS[4:]


def test_rejecting_an_iteration_of_an_instance_that_loops_ends_the_instance(cli, db_url, step_log):
    res = cli("run", str(FLOW / "loop_mapped_gated.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    run_id = res.json()["run_id"]
    assert res.json()["paused_steps"] == ["draft[0]#2"]
    before = len(executions(step_log))
    rejected = cli("reject", run_id, "--step", "draft[0]#2", "--reason", "off brief", "--json")
    assert rejected.exit_code == 0, rejected.stderr
    assert rejected.json()["output"] == "- | b v1"
    assert executions(step_log)[before:] == ["publish"]  # the rejected loop ran no further iteration
    units = {s["unit"]: s for s in rejected.json()["steps"]}
    assert units["draft[0]"]["status"] == "skipped"
    assert open_store(db_url).get_run(run_id).status == "succeeded"


def test_a_pause_left_open_under_a_rejected_run_by_an_older_version_can_be_closed_from_its_child(cli, db_url,
                                                                                                 pay_log):
    """Stored before this rule, a root could end rejected over paused children; rejecting such a child closes it
    and changes nothing above it."""
    run_id = _paused_map(cli)
    store = open_store(db_url)
    assert store.set_run_status(run_id, "rejected", expect=("paused",))  # as the older rejection left it
    child = next(c for c in store.child_runs(run_id) if c.parent_step == "per_ticket[1]")
    assert cli("approve", child.run_id).exit_code == 2  # its root ended: nothing continues it
    res = cli("reject", child.run_id, "--reason", "closing what was left open")
    assert res.exit_code == 1, res.stderr
    assert store.get_run(child.run_id).status == "rejected"
    assert store.get_run(run_id).status == "rejected"
    assert len(cli("runs", "--kind", "child", "--status", "paused", "--json").json()) == 4
    assert _payments(pay_log) == []
