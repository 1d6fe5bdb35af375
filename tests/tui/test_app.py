"""The app as a whole: quitting, background continuation, start-up cost, and the CLI entry."""

from __future__ import annotations

import subprocess
import sys
import time

import anyio
import pytest

from orchestrator.service.runner import continue_run
from orchestrator.store import Store
from tests.tui.seed import DEMO, Seeded, start
from tests.tui.waiting import settle, wait_for
from tui.app import ReviewApp, make_app
from tui.screens.confirm import ConfirmScreen
from tui.widgets.live_status import LiveStatus
from tui.widgets.run_table import RunTable

SIZE = (100, 32)


@pytest.mark.anyio
class TestQuitting:
    async def test_q_quits_at_once_when_nothing_runs(self, app: ReviewApp, seeded: Seeded) -> None:
        """With no run continuing here, `q` on the runs screen leaves without asking."""
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running)

    async def test_ctrl_c_quits_as_in_every_terminal_program(self, app: ReviewApp, seeded: Seeded) -> None:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+c")
            await wait_for(pilot, lambda: not app.is_running)

    async def test_quit_during_a_continuation_stops_it_after_the_step_in_flight(self, store: Store) -> None:
        """Quitting while a run continues stops it after the step in flight. Here that step (`report`) is
        the run's last: its record carries the run's end, so the run is complete and `resume` has
        nothing left to do (a stop before a later step leaves the run interrupted and resumable)."""
        run_id = await anyio.to_thread.run_sync(start, store, DEMO, {"quality": 0.3, "delay": 3.0})
        app = make_app(store, reviewer="tester", refresh_interval=0.2, cursor_blink=False)
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(RunTable)
            await wait_for(pilot, lambda: table.highlighted_run == run_id)
            await pilot.press("a")
            await wait_for(pilot, lambda: "report" in app.running_steps.get(run_id, ()))
            await wait_for(pilot, lambda: any(run_id in str(line.render()) for line in app.screen.query(LiveStatus)))
            await pilot.press("q")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("enter")
            await wait_for(pilot, lambda: not app.is_running)
        deadline = time.monotonic() + 30  # report's record carries the run's end: both land together
        while store.get_run(run_id).status == "running" and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        run = store.get_run(run_id)
        assert "report" in store.latest_records(run_id)
        assert (run.status, run.lease_expires_at) == ("succeeded", None)  # ended with its last record
        result = await anyio.to_thread.run_sync(lambda: continue_run(store, run_id))
        assert result.status == "succeeded"
        assert [r.decision for r in store.reviews(run_id)] == ["approve"]


class TestStartUp:
    def test_cli_and_engine_modules_do_not_import_textual(self) -> None:
        """Only `orchestrator review` pays for Textual: no other module imports it at import time."""
        code = ("import importlib, pkgutil, sys, orchestrator, gates\n"
                "for pkg in (orchestrator, gates):\n"
                "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
                "        if not m.name.endswith('__main__'):\n"
                "            importlib.import_module(m.name)\n"
                "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
                "assert not bad, bad[:5]\n")
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)

    def test_the_app_module_defers_the_engine(self) -> None:
        """Importing tui.app loads Textual but not the executor, spec loader or networkx: workers load those."""
        code = ("import sys, tui.app\n"
                "heavy = [m for m in ('networkx', 'orchestrator.engine.executor', 'orchestrator.service.runner',"
                " 'orchestrator.bind.loader', 'tenacity') if m in sys.modules]\n"
                "assert not heavy, heavy\n")
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)

    def test_review_command_opens_the_app_on_the_given_database(self, db_url: str, monkeypatch) -> None:
        """`orchestrator review --db URL` builds the app with make_app over that store and runs it."""
        from typer.testing import CliRunner

        import tui.app
        from orchestrator.cli import app as cli

        opened: list[str] = []

        def fake_run(self: ReviewApp) -> None:
            opened.append(self.store.url)

        monkeypatch.setattr(tui.app.ReviewApp, "run", fake_run)
        from orchestrator.store import open_store

        open_store(db_url).close()  # review reads an existing database; it creates none
        result = CliRunner().invoke(cli, ["review", "--db", db_url])
        assert result.exit_code == 0, result.output
        assert opened == [db_url]
