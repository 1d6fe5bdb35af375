"""A pause inside a child run is decided once, from the parent (``--step 'research > retrieve'``, or no
``--step`` when it is the tree's only pause) or from the child (``approve CHILD``): the decision is stored on
the child, and the one command continues the child from the paused step and then its parent. Paths reach
through map instances (``per_ticket[3] > classify``), iterations (``improve#2 > draft``) and grandchildren.
Fix-the-cause on a child step whose output the parent took supersedes the parent's records downstream too.

Executions are counted from the step log the steps write; on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.api import Orchestrator
from orchestrator.cli import app
from orchestrator.store import Store, open_store
from tests.conftest import Result
from tests.flow.conftest import FLOW, executions


@pytest.fixture
def tree_cli(durable_url: str):
    """The CLI in-process on this test's database (a SQLite file, and a PostgreSQL schema)."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        res = runner.invoke(app, [*args, "--db", durable_url], env={**os.environ, "COLUMNS": "200"})
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        return Result(res.exit_code, res.stdout, res.stderr)

    return invoke


def _paused(cli, workflow: str, *inputs: str) -> dict:
    res = cli("run", str(FLOW / workflow), *[a for i in inputs for a in ("--input", i)], "--json")
    assert res.exit_code == 3, res.stderr
    return res.json()


def _reviews(store: Store, run_id: str) -> list[tuple[str, str]]:
    return [(r.step_id, r.decision) for r in store.reviews(run_id)]


def _live(store: Store, run_id: str) -> dict[str, str]:
    return {r.unit: r.status for r in store.step_records(run_id) if not r.superseded}


REPORT = "report: solar panels fact 0"


def test_approve_parent_with_a_path_continues_the_child_from_the_paused_step_then_the_parent(
        tree_cli, step_log, durable_url):
    doc = _paused(tree_cli, "tree_review.yaml")
    assert doc["paused_steps"] == ["research > retrieve"]
    child_id = doc["children"][0]["run_id"]
    res = tree_cli("approve", doc["run_id"], "--step", "research > retrieve", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["status"] == "succeeded" and res.json()["output"] == REPORT
    assert "approve recorded for step 'research > retrieve' of run " + doc["run_id"] in res.stderr
    store = open_store(durable_url)
    assert _reviews(store, child_id) == [("retrieve", "approve")]  # stored once, on the child that holds it
    assert _reviews(store, doc["run_id"]) == []
    assert store.get_run(child_id).status == "succeeded"
    assert [c["run_id"] for c in res.json()["children"]] == [child_id]  # the same child run, continued
    assert Counter(executions(step_log)) == Counter({"tree-review.plan": 1, "tree-research.retrieve": 1,
                                                     "tree-research.summarize": 1, "tree-review.write": 1})


def test_approve_child_continues_the_child_and_then_its_parent(tree_cli, step_log, durable_url):
    doc = _paused(tree_cli, "tree_review.yaml")
    child_id = doc["children"][0]["run_id"]
    res = tree_cli("approve", child_id, "--json")
    assert res.exit_code == 0, res.stderr
    store = open_store(durable_url)
    assert store.get_run(doc["run_id"]).status == "succeeded"
    assert store.get_run(doc["run_id"]).output == REPORT
    assert _reviews(store, child_id) == [("retrieve", "approve")]
    assert Counter(executions(step_log)) == Counter({"tree-review.plan": 1, "tree-research.retrieve": 1,
                                                     "tree-research.summarize": 1, "tree-review.write": 1})


def test_approve_parent_without_step_takes_the_trees_only_pause(cli, step_log, db_url):
    doc = _paused(cli, "tree_review.yaml")
    res = cli("approve", doc["run_id"])
    assert res.exit_code == 0, res.stderr
    assert "approve recorded for step 'research > retrieve'" in res.stdout
    assert open_store(db_url).get_run(doc["run_id"]).status == "succeeded"


def test_approve_child_with_its_own_step_name(cli, step_log, db_url):
    doc = _paused(cli, "tree_review.yaml")
    res = cli("approve", doc["children"][0]["run_id"], "--step", "retrieve")
    assert res.exit_code == 0, res.stderr
    assert open_store(db_url).get_run(doc["run_id"]).status == "succeeded"


def test_several_pauses_in_the_tree_are_listed_by_path_and_each_is_decided_by_its_path(cli, step_log, db_url):
    doc = _paused(cli, "tree_map.yaml", "unclear=[1, 3]")
    assert doc["paused_steps"] == ["per_ticket[1] > classify", "per_ticket[3] > classify"]
    res = cli("approve", doc["run_id"])
    assert res.exit_code == 2
    assert "2 steps waiting: ['per_ticket[1] > classify', 'per_ticket[3] > classify']; choose one with --step" \
        in res.stderr
    res = cli("approve", doc["run_id"], "--step", "per_ticket[3] > classify", "--json")
    assert res.exit_code == 3, res.stderr  # ticket 3 answered; the parent pauses again at ticket 1
    assert res.json()["paused_steps"] == ["per_ticket[1] > classify"]
    res = cli("approve", doc["run_id"], "--json")  # the one pause left
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == ("ticket 0: billing | ticket 1 ???: other | ticket 2: billing | "
                                    "ticket 3 ???: other | ticket 4: billing")
    counts = Counter(executions(step_log))
    assert counts == Counter({"tree-map.tickets": 1, "tree-triage.classify": 5, "tree-triage.answer": 5,
                              "tree-map.combine": 1})


def test_naming_the_parents_step_that_waits_inside_its_child_says_which_path_to_name(cli, step_log):
    doc = _paused(cli, "tree_review.yaml")
    res = cli("approve", doc["run_id"], "--step", "research")
    assert res.exit_code == 2
    assert "step 'research' of run " + doc["run_id"] + " waits inside its child run" in res.stderr
    assert "--step 'research > retrieve'" in res.stderr
    res = cli("approve", doc["run_id"], "--step", "plan > retrieve")
    assert res.exit_code == 2
    assert "step 'plan' of run " + doc["run_id"] + " started no child run" in res.stderr


def test_a_path_through_a_grandchild_is_decided_from_the_root_or_from_the_grandchild(cli, step_log, db_url):
    doc = _paused(cli, "tree_deep.yaml")
    assert doc["paused_steps"] == ["outer > research > retrieve"]
    store = open_store(db_url)
    middle = doc["children"][0]["run_id"]
    [grandchild] = store.child_runs(middle)
    res = cli("approve", doc["run_id"], "--step", "outer > research > retrieve", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == REPORT.upper()
    assert _reviews(store, grandchild.run_id) == [("retrieve", "approve")]
    assert _reviews(store, middle) == [] and _reviews(store, doc["run_id"]) == []
    assert Counter(executions(step_log))["tree-research.retrieve"] == 1

    second = _paused(cli, "tree_deep.yaml")
    [inner] = store.child_runs(second["children"][0]["run_id"])
    res = cli("approve", inner.run_id)
    assert res.exit_code == 0, res.stderr
    assert store.get_run(second["run_id"]).status == "succeeded"


def test_a_pause_inside_an_iterations_child_is_decided_by_its_path(cli, step_log, db_url):
    doc = _paused(cli, "loop_child_strict.yaml")
    assert doc["paused_steps"] == ["improve#2 > draft"]
    res = cli("approve", doc["run_id"], "--step", "improve#2 > draft", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "ESSAY V2"
    assert Counter(executions(step_log)) == Counter({"draft": 2, "critique": 2, "publish": 1})


def test_retry_by_path_runs_the_childs_step_again_and_edit_by_path_replaces_its_output(cli, step_log, db_url,
                                                                                       tmp_path):
    doc = _paused(cli, "tree_review.yaml")
    res = cli("retry", doc["run_id"], "--step", "research > retrieve", "--json")
    assert res.exit_code == 3, res.stderr  # one finding again: it waits again, at the same path
    assert res.json()["paused_steps"] == ["research > retrieve"]
    assert Counter(executions(step_log))["tree-research.retrieve"] == 2
    fixed = tmp_path / "findings.json"
    fixed.write_text(json.dumps({"findings": ["a", "b"]}))
    res = cli("edit", doc["run_id"], "--step", "research > retrieve", "--output", str(fixed), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "report: a; b"
    store = open_store(db_url)
    child_id = doc["children"][0]["run_id"]
    assert _reviews(store, child_id) == [("retrieve", "retry"), ("retrieve", "edit")]
    assert Counter(executions(step_log))["tree-research.retrieve"] == 2


def test_reject_by_path_rejects_the_child_and_the_runs_above_it(cli, step_log, db_url):
    doc = _paused(cli, "tree_deep.yaml")
    res = cli("reject", doc["run_id"], "--step", "outer > research > retrieve", "--comment", "off topic")
    assert res.exit_code == 1, res.stderr
    store = open_store(db_url)
    middle = doc["children"][0]["run_id"]
    [grandchild] = store.child_runs(middle)
    assert [store.get_run(r).status for r in (grandchild.run_id, middle, doc["run_id"])] == ["rejected"] * 3
    assert _reviews(store, grandchild.run_id) == [("retrieve", "reject")]
    assert _live(store, doc["run_id"]) == {"outer": "skipped", "publish": "skipped"}
    assert "tree-review.write" not in executions(step_log)


def test_editing_a_completed_child_step_supersedes_the_parents_records_downstream(tree_cli, step_log,
                                                                                 durable_url, tmp_path):
    doc = _paused(tree_cli, "tree_parent.yaml", "count=2")  # the parent's gate wants 3 findings
    assert doc["paused_steps"] == ["research"]
    child_id = doc["children"][0]["run_id"]
    fixed = tmp_path / "findings.json"
    fixed.write_text(json.dumps({"findings": ["a", "b", "c"]}))
    res = tree_cli("edit", doc["run_id"], "--step", "research > retrieve", "--output", str(fixed), "--json")
    assert res.exit_code == 0, res.stderr
    assert "superseded (kept, and run again now): research > summarize, research" in res.stderr
    assert res.json()["output"] == "report: a; b; c"
    assert [c["run_id"] for c in res.json()["children"]] == [child_id]  # the child continued, not replaced
    store = open_store(durable_url)
    assert _reviews(store, child_id) == [("retrieve", "edit")]
    assert _reviews(store, doc["run_id"]) == [("research > retrieve", "edit")]
    superseded = {(r.run_id, r.unit) for run in (doc["run_id"], child_id) for r in store.step_records(run)
                  if r.superseded}
    assert superseded == {(child_id, "summarize"), (doc["run_id"], "research")}
    assert Counter(executions(step_log)) == Counter({"tree-parent.plan": 1, "tree-research.retrieve": 1,
                                                     "tree-research.summarize": 2, "tree-parent.write": 1})


def test_retrying_a_completed_child_step_runs_it_and_everything_downstream_in_child_and_parent_again(
        cli, step_log, db_url):
    doc = _paused(cli, "tree_parent.yaml", "count=2")
    res = cli("retry", doc["run_id"], "--step", "research > retrieve", "--json")
    assert res.exit_code == 3, res.stderr  # the same two findings: the parent's gate pauses again
    assert res.json()["paused_steps"] == ["research"]
    assert Counter(executions(step_log)) == Counter({"tree-parent.plan": 1, "tree-research.retrieve": 2,
                                                     "tree-research.summarize": 2})
    store = open_store(db_url)
    child_id = doc["children"][0]["run_id"]
    assert [r.unit for r in store.step_records(child_id) if r.superseded] == ["retrieve", "summarize"]


def test_a_fix_of_a_child_step_not_upstream_of_the_pause_is_refused_and_nothing_changes(cli, step_log, db_url):
    doc = _paused(cli, "tree_map.yaml")  # ticket 3 waits; ticket 0's child is done and taken
    before = Counter(executions(step_log))
    res = cli("retry", doc["run_id"], "--step", "per_ticket[0] > classify")
    assert res.exit_code == 2
    assert "is not upstream of the pause of run " + doc["run_id"] in res.stderr
    store = open_store(db_url)
    assert store.get_run(doc["run_id"]).status == "paused"
    assert all(not r.superseded for c in store.child_runs(doc["run_id"]) for r in store.step_records(c.run_id))
    assert Counter(executions(step_log)) == before


def test_the_python_api_decides_a_pause_inside_a_child_by_its_path(step_log, db_url):
    with Orchestrator(db_url) as orch:
        run = orch.run(FLOW / "tree_review.yaml")
        assert run.status == "paused"
        done = orch.approve(run.run_id, step="research > retrieve")
        assert done.run_id == run.run_id and done.status == "succeeded" and done.output == REPORT
    assert Counter(executions(step_log))["tree-research.retrieve"] == 1


def test_the_async_python_api_decides_a_pause_from_the_child(step_log, db_url):
    import anyio

    async def main() -> None:
        with Orchestrator(db_url) as orch:
            run = await orch.arun(Path(FLOW / "tree_review.yaml"))
            child_id = open_store(db_url).child_runs(run.run_id)[0].run_id
            done = await orch.aapprove(child_id)
            assert done.run_id == child_id and done.status == "succeeded"
            assert orch.get_run(run.run_id).output == REPORT

    anyio.run(main)


def test_a_fix_two_runs_down_supersedes_each_run_above_up_to_the_pause(tree_cli, step_log, durable_url, tmp_path):
    """The grandchild's retrieve fed the child's report, which the root's publish found too long: editing
    'outer > research > retrieve' supersedes the grandchild's summarize, the child's research and write, and
    the root's outer and publish, then continues the same child runs."""
    doc = _paused(tree_cli, "tree_deep_gated.yaml")
    assert doc["paused_steps"] == ["publish"]
    store = open_store(durable_url)
    middle = doc["children"][0]["run_id"]
    [inner] = store.child_runs(middle)
    fixed = tmp_path / "findings.json"
    fixed.write_text(json.dumps({"findings": ["a", "b"]}))
    res = tree_cli("edit", doc["run_id"], "--step", "outer > research > retrieve", "--output", str(fixed), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "REPORT: A; B"
    assert ("superseded (kept, and run again now): outer > research > summarize, outer > research, outer > write, "
            "outer, publish") in res.stderr
    assert _reviews(store, inner.run_id) == [("retrieve", "edit")]
    assert _reviews(store, middle) == [("research > retrieve", "edit")]
    assert _reviews(store, doc["run_id"]) == [("outer > research > retrieve", "edit")]
    assert [c.run_id for c in store.child_runs(middle)] == [inner.run_id]
    assert Counter(executions(step_log)) == Counter({"tree-review.plan": 1, "tree-research.retrieve": 1,
                                                     "tree-research.summarize": 2, "tree-review.write": 2,
                                                     "tree-deep-gated.publish": 2})


def test_a_fix_inside_an_iterations_child_supersedes_the_loops_result_and_the_loop_goes_on(cli, step_log, db_url,
                                                                                         tmp_path):
    """One iteration and its critique failed: the loop gave up and waits at its repeat gate. Editing the
    draft inside that iteration's child ('improve#1 > draft') runs the child's critique again, then the loop
    judges the same iteration anew and goes on."""
    doc = _paused(cli, "loop_child_once.yaml")
    assert doc["paused_steps"] == ["improve"]
    fixed = tmp_path / "draft.json"
    fixed.write_text(json.dumps({"text": "essay v2", "version": 2}))
    res = cli("edit", doc["run_id"], "--step", "improve#1 > draft", "--output", str(fixed), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["output"] == "ESSAY V2"
    assert "superseded (kept, and run again now): improve#1 > critique, improve, improve#1" in res.stderr
    assert [c["step"] for c in res.json()["children"]] == ["improve#1"]  # the same child run, continued
    assert Counter(executions(step_log)) == Counter({"draft": 1, "critique": 2, "publish": 1})
