"""A pause inside a child run is as visible from its parent as the parent's own.

``run`` and ``resume`` print ``paused at PATH: reason`` for it; ``show PARENT`` lists the parent's unit that
waits on it (``waiting``, naming the child run and the pause) and a ``paused at`` line; ``show --json``
describes every open pause of the tree in ``pauses`` (path, kind, reason, the run holding it); the review
app's runs list names it in its "paused at" column.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.store import Store
from tests.flow.conftest import FLOW
from tests.tui.seed import start
from tests.tui.waiting import settle, wait_for
from tui.app import make_app
from tui.screens.runs import RunsScreen
from tui.widgets.run_table import RunTable

REASON = "1 item (need 2)"
"""Why tree_research's retrieve pauses with count=1 (its gate wants 2 items)."""


def test_run_and_resume_print_the_path_and_reason_of_a_pause_inside_a_child(cli, step_log):
    res = cli("run", str(FLOW / "tree_review.yaml"))
    assert res.exit_code == 3, res.stderr
    assert f"paused at research > retrieve: {REASON}" in res.stdout
    run_id = res.stdout.split()[1]
    resumed = cli("resume", run_id)
    assert resumed.exit_code == 3, resumed.stderr
    assert f"paused at research > retrieve: {REASON}" in resumed.stdout


def test_show_of_a_parent_whose_first_step_waits_in_its_child_lists_that_step_and_the_pause(cli, store, step_log):
    res = cli("run", str(FLOW / "tree_deep.yaml"), "--json")
    assert res.exit_code == 3, res.stderr
    run_id = res.json()["run_id"]
    [child] = store.child_runs(run_id)
    shown = cli("show", run_id).stdout
    assert f"in child run {child.run_id}: paused at research > retrieve" in shown
    rows = [line.replace("│", " ").split() for line in shown.splitlines() if not line.startswith("  ")]
    assert any(words[:1] == ["outer"] and "waiting" in words for words in rows)  # the table row, or the block
    assert f"paused at outer > research > retrieve: {REASON}" in shown


def test_show_json_describes_every_open_pause_of_the_tree(cli, store, step_log):
    res = cli("run", str(FLOW / "tree_deep.yaml"), "--json")
    run_id = res.json()["run_id"]
    [child] = store.child_runs(run_id)
    [grandchild] = store.child_runs(child.run_id)
    doc = cli("show", run_id, "--json").json()
    assert doc["paused_steps"] == ["outer > research > retrieve"]
    assert [{k: p[k] for k in ("path", "step", "run_id", "unit", "pause", "reason")} for p in doc["pauses"]] == [
        {"path": "outer > research > retrieve", "step": "outer", "run_id": grandchild.run_id, "unit": "retrieve",
         "pause": "gate", "reason": REASON}]


def test_a_parents_own_pause_is_in_pauses_too(cli, step_log):
    res = cli("run", str(FLOW.parent / "workflows" / "gated.yaml"), "--json")
    [pause] = res.json()["pauses"]
    assert (pause["path"], pause["step"], pause["run_id"], pause["pause"]) == (
        "scored", "scored", res.json()["run_id"], "gate")


@pytest.fixture
def tree_paused(store: Store, step_log: Path) -> str:
    return start(store, FLOW / "tree_review.yaml")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_review_apps_runs_list_names_the_pause_inside_the_child(store: Store, tree_paused: str,
                                                                          anyio_backend) -> None:
    app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
    async with app.run_test(size=(140, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.query_one(RunTable).row_count)
        table = app.screen.query_one(RunTable)
        row = [str(cell) for cell in table.get_row_at(0)]
        assert row[0] == tree_paused and "research > retrieve" in row
        await settle(pilot)


def test_the_python_api_types_the_pauses_of_the_tree(db_url, step_log):
    from orchestrator import Orchestrator

    with Orchestrator(db_url, reviewer="ann") as orch:
        run = orch.run(FLOW / "tree_review.yaml")
        [pause] = run.pauses
        assert (pause.path, pause.step, pause.pause, pause.reason) == ("research > retrieve", "research", "gate",
                                                                       REASON)
