"""The review app over many runs and many waiting units: counts from the whole store, a filter and paging that
reach every run, a key that jumps between waiting units, the cursor moving on after a decision, waiting units
named as the first ones and a count, a decision whose follow-up reads do not grow with the run, and a refresh
that never throws away a read slower than its interval."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from textual.widgets import Static

from orchestrator.store import NewRun, Store
from orchestrator.store.delegating import DelegatingStore, concrete
from tests.flow.conftest import FLOW
from tests.flow.test_tree_decision_store_calls import CountingStore
from tests.tui.run_screen import rows
from tests.tui.seed import start
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp, make_app
from tui.queries import PAGE_SIZE
from tui.screens.run_detail import RunDetailScreen
from tui.widgets.run_table import RunTable
from tui.widgets.step_list import StepList

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
FINISHED, PAUSED = 2000, 303


def quiet_app(store: Store) -> ReviewApp:
    """An app whose refresh timer does not tick during the test: what it reads, it reads because of the test."""
    return make_app(store, reviewer="tester", refresh_interval=3600, cursor_blink=False)


def listed(app: ReviewApp) -> list[str]:
    return [str(key.value) for key in app.screen.query_one(RunTable).rows]


def summary(app: ReviewApp) -> str:
    return str(app.screen.query_one("#runs-summary", Static).render())


@pytest.fixture
def many_runs(store: Store) -> dict[str, Any]:
    """2 303 runs written straight into the store: the oldest of workflow ``rare_flow``, then 2 302 of ``bulk``
    of which 303 are paused, spread among the finished ones (one in seven)."""
    rare_wf = store.register_workflow("rare_flow", "1", {"name": "rare_flow", "steps": []}, None, "rare")
    bulk_wf = store.register_workflow("bulk", "1", {"name": "bulk", "steps": []}, None, "bulk")
    rare = store.create_run(NewRun(rare_wf, "rare_flow", {}, status="succeeded"))
    paused: list[str] = []
    for i in range(FINISHED + PAUSED - 1):
        pause = i % 7 == 0 and len(paused) < PAUSED
        run_id = store.create_run(NewRun(bulk_wf, "bulk", {"i": i}, status="paused" if pause else "succeeded"))
        if pause:
            paused.append(run_id)
    return {"rare": rare, "paused": paused[::-1]}


class TestManyRuns:
    async def test_the_header_counts_every_run_and_every_paused_run_in_the_store(
            self, store: Store, many_runs: dict[str, Any]) -> None:
        """2 303 runs, 303 paused: the header says so, though the list reads the first 200 (paused first)."""
        app = quiet_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(listed(app)) == PAGE_SIZE)
            assert summary(app).startswith("303 paused · 2,303 runs · 200 listed, more below")
            assert listed(app) == many_runs["paused"][:PAGE_SIZE]
            await settle(pilot)

    async def test_the_end_of_the_list_reads_the_next_runs(self, store: Store, many_runs: dict[str, Any]) -> None:
        """Reaching the last row reads 200 more: the rest of the paused runs, then the newest finished ones."""
        app = quiet_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(listed(app)) == PAGE_SIZE)
            await pilot.press("ctrl+end")
            await wait_for(pilot, lambda: len(listed(app)) == 2 * PAGE_SIZE)
            assert listed(app)[:PAUSED] == many_runs["paused"]
            assert summary(app).startswith("303 paused · 2,303 runs · 400 listed, more below")
            await settle(pilot)

    async def test_the_filter_finds_a_run_older_than_every_page_read(
            self, store: Store, many_runs: dict[str, Any]) -> None:
        """The oldest run, 2 302 runs below the first page, is found by typing a part of its workflow's name."""
        app = quiet_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(listed(app)) == PAGE_SIZE)
            await pilot.press("slash", *"RARE")
            await wait_for(pilot, lambda: listed(app) == [many_runs["rare"]])
            assert summary(app).startswith("303 paused · 2,303 runs · 1 match the filter")
            await settle(pilot)


@pytest.fixture
def five_waiting(store: Store) -> str:
    """map_two_pauses.yaml over 5 documents: every instance waits for a decision."""
    return start(store, FLOW / "map_two_pauses.yaml", {"count": 5})


async def open_run(pilot, run_id: str) -> RunDetailScreen:
    screen = RunDetailScreen(run_id)
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.detail is not None and screen.query_one(StepList).row_count)
    await pilot.pause()
    return screen


def selected(screen: RunDetailScreen) -> str | None:
    return screen.query_one(StepList).selected_step


class TestManyWaitingUnits:
    async def test_n_jumps_to_the_next_waiting_unit_and_p_back(self, store: Store, five_waiting: str) -> None:
        """From `retrieve`, n goes to summarize[0], then [1]; p comes back; n past the last wraps to the first."""
        async with quiet_app(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, five_waiting)
            screen.query_one(StepList).move_cursor(row=0)
            await pilot.pause()
            assert selected(screen) == "retrieve"
            await pilot.press("n")
            assert selected(screen) == "summarize[0]"
            await pilot.press("n")
            assert selected(screen) == "summarize[1]"
            await pilot.press("p")
            assert selected(screen) == "summarize[0]"
            await pilot.press("p")  # before the first: the last
            assert selected(screen) == "summarize[4]"
            await pilot.press("n")  # after the last: the first
            assert selected(screen) == "summarize[0]"
            await settle(pilot)

    async def test_the_header_names_the_next_few_and_counts_them(self, store: Store, five_waiting: str) -> None:
        async with quiet_app(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, five_waiting)
            header = str(screen.query_one("#run-summary", Static).render())
            assert "paused at summarize[0], summarize[1], summarize[2] +2 more (5 waiting; n: next)" in header
            await settle(pilot)

    async def test_after_a_decision_the_cursor_is_on_the_next_waiting_unit(self, store: Store,
                                                                           five_waiting: str) -> None:
        """`a` on summarize[3]: once the run has paused again, the cursor is on summarize[4], and `a` there goes on
        to summarize[0] (wrapping round)."""
        async with quiet_app(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, five_waiting)
            screen.query_one(StepList).select("summarize[3]")
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.detail is not None and len(screen.detail.waiting) == 4)
            await settle(pilot)
            assert selected(screen) == "summarize[4]"
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.detail is not None and len(screen.detail.waiting) == 3)
            await settle(pilot)
            assert selected(screen) == "summarize[0]"
        assert [r.step_id for r in store.reviews(five_waiting)] == ["summarize[3]", "summarize[4]"]


@pytest.fixture
def twelve_inside(store: Store, step_log: Path) -> str:
    """tree_map.yaml over 12 tickets, every one unclear: 12 child runs, each paused at its classify."""
    return start(store, FLOW / "tree_map.yaml", {"count": 12, "unclear": list(range(12))})


class TestPausesInsideChildren:
    async def test_the_parent_row_names_the_first_path_and_how_many_more_wait(self, store: Store,
                                                                               twelve_inside: str) -> None:
        """A map of 12 child runs, each paused inside: the parent's "paused at" cell is its first path and +11."""
        parent = twelve_inside
        app = quiet_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: listed(app) == [parent])
            cell = str(app.screen.query_one(RunTable).get_cell(parent, "paused"))
            assert cell.endswith("+11 more") and cell.startswith("per_ticket[0]")
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, RunDetailScreen) and app.screen.detail is not None)
            await pilot.pause()
            header = str(app.screen.query_one("#run-summary", Static).render())
            assert "at per_ticket[0] > classify, per_ticket[1] > classify, per_ticket[2] > classify +9 more " \
                   "(12 waiting; n: next)" in header
            await settle(pilot)


async def decision_calls(store: Store, count: int) -> Counter[str]:
    """The store calls from `a` on summarize[1] of a map of ``count`` waiting instances until the screen shows
    the run paused again at the rest, the cursor on summarize[2]."""
    run_id = await anyio.to_thread.run_sync(start, store, FLOW / "map_two_pauses.yaml", {"count": count})
    counting = concrete(CountingStore)(store)
    async with quiet_app(counting).run_test(size=SIZE) as pilot:
        screen = await open_run(pilot, run_id)
        await settle(pilot)
        screen.query_one(StepList).select("summarize[1]")
        counting.calls.clear()
        await pilot.press("a")
        await wait_for(pilot, lambda: screen.detail is not None and len(screen.detail.waiting) == count - 1)
        await settle(pilot)
        assert selected(screen) == "summarize[2]"
        calls = Counter(counting.calls)
    return calls


@pytest.mark.slow
async def test_a_decision_costs_the_same_store_calls_beside_4_or_16_waiting_instances(store: Store) -> None:
    """Storing the decision, continuing the run and showing it paused again read the run a fixed number of
    times: the step events of the continuation move rows without a read, and the reads do not repeat per
    instance."""
    few = await decision_calls(store, 4)
    many = await decision_calls(store, 16)

    assert many == few
    assert few["attributions"] == 1  # the run is read once, when its continuation ends: not once per event


class BlockingStore(DelegatingStore):
    """Holds every read of a run's records until released, counting how many began: a read slower than any
    refresh interval."""

    def __init__(self, store: Store) -> None:
        self.url = store.url
        self.store = store
        self.release = threading.Event()
        self.began = 0

    def target(self) -> Store:
        return self.store

    def step_records(self, run_id: str, *, latest_only: bool = False) -> Any:
        self.began += 1
        self.release.wait(timeout=30)
        return self.store.step_records(run_id, latest_only=latest_only)


async def test_a_read_slower_than_the_refresh_interval_is_finished_not_restarted(store: Store,
                                                                                 five_waiting: str) -> None:
    """With a refresh every 50 ms and the run's read held, ticks ask again but no second read starts: when it is
    released the screen shows the run."""
    blocking = concrete(BlockingStore)(store)
    app = make_app(blocking, reviewer="tester", refresh_interval=0.05, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = RunDetailScreen(five_waiting)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: blocking.began >= 1)
        for _ in range(10):  # ten refresh intervals
            await pilot.pause(0.05)
        assert blocking.began == 1
        blocking.release.set()
        await wait_for(pilot, lambda: screen.detail is not None and rows(screen)[:2] == ["retrieve", "summarize"])
        await settle(pilot)


class TestOnlyWaiting:
    async def test_w_narrows_the_steps_to_the_waiting_units_and_back(self, store: Store, five_waiting: str) -> None:
        """`w`: the step of the waiting instances and the five instances, nothing else; `n` moves among them;
        `w` again: every unit."""
        async with quiet_app(store).run_test(size=SIZE) as pilot:
            screen = await open_run(pilot, five_waiting)
            every = rows(screen)
            await pilot.press("w")
            assert rows(screen) == ["summarize"] + [f"summarize[{i}]" for i in range(5)]
            assert len(every) > len(rows(screen))
            screen.query_one(StepList).move_cursor(row=0)
            await pilot.press("n", "n")
            assert selected(screen) == "summarize[1]"
            await pilot.press("w")
            assert rows(screen) == every and selected(screen) == "summarize[1]"
            await settle(pilot)
