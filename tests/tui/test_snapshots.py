"""What the reviewer sees, as SVG snapshots of tests/tui/snapshot_app.py (a seeded, frozen store).

Update after reading the report: ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

SNAPSHOT_APP = Path(__file__).parent / "snapshot_app.py"


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


class TestRunsScreen:
    def test_paused_runs_first(self, snap_compare) -> None:
        """Three paused runs (r0004, r0003, r0001, newest first) above the succeeded r0002; the footer lists
        enter, a, e, r, x, l, / and q."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30), run_before=loaded)

    def test_fits_80_by_24(self, snap_compare) -> None:
        """At 80x24 every column and the whole footer still fit."""
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


class TestEdit:
    def test_editor_holds_the_paused_output(self, snap_compare) -> None:
        """`e` on r0004: the score output as JSON with line numbers, the gates it must pass and the failing one."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30), run_before=pressing("e"))

    def test_invalid_json_error_inline(self, snap_compare) -> None:
        """A stray character and ctrl+s: the error names line and column and says nothing was saved."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(100, 30), run_before=pressing("e", "x", "ctrl+s"))


class TestDialogs:
    def test_reject_asks_for_confirmation_and_a_comment(self, snap_compare) -> None:
        """`x` on r0004: the reject dialog names the step, warns it cannot be undone, and asks for a comment."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(80, 24), run_before=pressing("x"))

    def test_label_dialog(self, snap_compare) -> None:
        """`l` on the succeeded r0002: correct / incorrect and a reason."""
        assert snap_compare(SNAPSHOT_APP, terminal_size=(80, 24), run_before=pressing("down", "down", "down", "l"))
