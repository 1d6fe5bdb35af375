"""What the reviewer sees, as SVG snapshots of tests/tui/snapshot_app.py (a seeded, frozen store).

Update after reading the report: ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.pilot import Pilot

SNAPSHOT_APP = Path(__file__).parent / "snapshot_app.py"


def with_history() -> App:
    """The snapshot app with three weeks of labelled dashboard-demo runs as well (r0005..r0015)."""
    from tests.tui.snapshot_app import build

    return build(history=True)


async def loaded(pilot: Pilot) -> None:
    """Let the store-reading workers finish, so the screen shows data rather than "loading"."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def pressing(*keys: str):
    async def run_before(pilot: Pilot) -> None:
        await loaded(pilot)
        for key in keys:
            await pilot.press(key)
            await loaded(pilot)

    return run_before


def with_maps() -> App:
    """The snapshot app with two map runs paused at summarize[3] as well (r0005: 6 documents, r0006: 25)."""
    from tests.tui.snapshot_app import build

    return build(maps=True)


def opening(run_id: str):
    """Open ``run_id`` on the run screen."""
    async def run_before(pilot: Pilot) -> None:
        from tui.screens.run_detail import RunDetailScreen

        await loaded(pilot)
        await pilot.app.push_screen(RunDetailScreen(run_id))
        await loaded(pilot)

    return run_before


def tracing(run_id: str):
    """Open ``run_id`` on the run screen and press `t`."""
    async def run_before(pilot: Pilot) -> None:
        from tui.screens.run_detail import RunDetailScreen

        await loaded(pilot)
        await pilot.app.push_screen(RunDetailScreen(run_id))
        await loaded(pilot)
        await pilot.press("t")
        await loaded(pilot)

    return run_before


class TestRunsScreen:
    def test_paused_runs_first(self, snap_compare) -> None:
        """Three paused runs (r0004, r0003, r0001, newest first) above the succeeded r0002; the footer lists
        enter, a, e, r, x, l, /, d and q."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30), run_before=loaded)

    def test_fits_80_by_24(self, snap_compare) -> None:
        """At 80x24 every column and the whole footer (compact there) still fit."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(80, 24), run_before=loaded)

    def test_filtered_by_workflow(self, snap_compare) -> None:
        """`/` then "triage": the filter bar is open and only r0003 (triage-demo) is listed."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30),
                            run_before=pressing("slash", *"triage", "enter"))


class TestRunDetail:
    def test_opens_on_the_paused_step(self, snap_compare) -> None:
        """r0001: fetch, score, report in order; score (waiting, attempt 2) is selected and shows its failing
        range gate, its output and inputs."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30), run_before=pressing("down", "down", "enter"))

    def test_at_80_by_24(self, snap_compare) -> None:
        """The same run at 80x24: the step list and the detail side by side, JSON folded to the pane."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(80, 24), run_before=pressing("down", "down", "enter"))

    def test_attempts_and_reviews_at_the_bottom(self, snap_compare) -> None:
        """Scrolled to the end of score's detail: the injected context, the upstream link to fetch, two attempts
        and alice's retry with her comment."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30),
                            run_before=pressing("down", "down", "enter", "tab", "end"))


def with_tree() -> App:
    """The snapshot app with a parent run paused inside its child run as well (r0005, its child r0006)."""
    from tests.tui.snapshot_app import build

    return build(tree=True)


class TestChildRuns:
    def test_a_pause_inside_the_child_is_a_row_of_the_parent(self, snap_compare) -> None:
        """r0005: `└ research > retrieve` under research, waiting and selected; its detail shows the child's
        failing min_items gate and names the child run that enter opens."""
        assert snap_compare(with_tree(), terminal_size=(110, 32), run_before=opening("r0005"))

    def test_enter_opens_the_child_run(self, snap_compare) -> None:
        """Enter on that row: the child run r0006, waiting at retrieve."""
        async def run_before(pilot: Pilot) -> None:
            await opening("r0005")(pilot)
            await pilot.press("enter")
            await loaded(pilot)

        assert snap_compare(with_tree(), terminal_size=(110, 32), run_before=run_before)


class TestInstances:
    def test_instances_under_their_step(self, snap_compare) -> None:
        """r0005: summarize's six instances are child rows under it, ✓ but the waiting `summarize[3]` (!),
        which is selected: its detail names it instance 3 of summarize and shows its failing max_words gate."""
        assert snap_compare(with_maps(), terminal_size=(110, 32), run_before=opening("r0005"))

    def test_many_instances_collapse(self, snap_compare) -> None:
        """r0006 (25 instances): a summary row `summarize[0..24]` stands for them, then the waiting
        `summarize[3]`, selected."""
        assert snap_compare(with_maps(), terminal_size=(110, 32), run_before=opening("r0006"))


class TestEdit:
    def test_editor_holds_the_paused_output(self, snap_compare) -> None:
        """`e` on r0004: the score output as JSON with line numbers, the gates it must pass and the failing one."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30), run_before=pressing("e"))

    def test_invalid_json_error_inline(self, snap_compare) -> None:
        """A stray character and ctrl+s: the error names line and column and says nothing was saved."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30), run_before=pressing("e", "x", "ctrl+s"))

    def test_an_output_the_gates_refuse_asks_before_storing_it_as_forced(self, snap_compare) -> None:
        """ctrl+s on r0004's unchanged output (0.3 < 0.5): the failing range verdict and "Store anyway, recorded
        as forced? [y/N]", Cancel focused."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30), run_before=pressing("e", "ctrl+s"))


class TestDialogs:
    def test_reject_asks_for_confirmation_and_a_comment(self, snap_compare) -> None:
        """`x` on r0004: the reject dialog names the step, warns it cannot be undone, and asks for a comment."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(80, 24), run_before=pressing("x"))

    def test_label_dialog(self, snap_compare) -> None:
        """`l` on the succeeded r0002: correct / incorrect and a reason."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(80, 24), run_before=pressing("down", "down", "down", "l"))


class TestDashboard:
    def test_steps_trends_blame_and_alert(self, snap_compare) -> None:
        """`d` on the paused dashboard-demo run r0015: an alert for fetch (100% -> 40%), bars for score 50%,
        fetch 25% and (unattributed) 25% of 4 incorrect outcomes, and per step its weekly pass-rate
        sparkline, latest rate and change; the fetch row is marked."""
        assert snap_compare(with_history(), terminal_size=(120, 36), run_before=pressing("d"))

    def test_at_80_by_24(self, snap_compare) -> None:
        """The same dashboard at 80x24: the summary and the alert wrap; everything else still fits."""
        assert snap_compare(with_history(), terminal_size=(80, 24), run_before=pressing("d"))

    def test_workflow_without_incorrect_outcomes(self, snap_compare) -> None:
        """`w`, down, enter: review-demo, whose runs nobody labelled: a note on how to get the attribution bars,
        score's pass rate (1 of 3 first attempts passed) and no alert."""
        assert snap_compare(with_history(), terminal_size=(80, 24), run_before=pressing("d", "w", "down", "enter"))


class TestTraceView:
    def test_trace_blames_score(self, snap_compare) -> None:
        """`t` on r0008: the trace replaces the step detail; score (approved despite failing) is blamed with
        confidence 0.90, its row in the step list is highlighted, candidates score, report, fetch follow."""
        assert snap_compare(with_history(), terminal_size=(120, 36), run_before=tracing("r0008"))

    def test_trace_at_80_by_24(self, snap_compare) -> None:
        """The same trace at 80x24: step list and trace side by side, evidence wrapped."""
        assert snap_compare(with_history(), terminal_size=(80, 24), run_before=tracing("r0008"))

    def test_paused_run_has_no_outcome_yet(self, snap_compare) -> None:
        """`t` on the paused r0015: the attribution code's message instead of a trace."""
        assert snap_compare(with_history(), terminal_size=(80, 24), run_before=tracing("r0015"))
