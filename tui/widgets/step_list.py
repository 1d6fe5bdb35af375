"""The run's steps in topological order: status icon, step, agent, attempt and duration.

A mapped step's instances, and a loop's iterations (``└ improve#2``), follow it as child rows
(``└ summarize[3]``), each with its own icon; beyond
``INSTANCES_SHOWN`` a summary row stands for them, followed by the ones that wait or failed. A step that
passed only on a reviewer's word or with a failed warning gets its own icon (``step_marks``)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from tui.format import format_duration, truncate
from tui.queries import StepItem
from tui.widgets.step_marks import step_mark

SHARE = 0.55
"""The most of the terminal's width the list may take (the detail pane gets the rest; see app.tcss)."""
STEP_WIDTH, AGENT_WIDTH = 22, 12


CHILD = "└ "
"""What an instance row's name starts with, under its step's row."""


def row_label(item: StepItem) -> str:
    """``summarize`` for a step, ``└ summarize[3]`` for an instance, ``└ improve#2`` for an iteration,
    ``└ summarize[0..49]`` for a summary row."""
    return CHILD + item.unit if item.instance else item.step_id


class StepList(DataTable[str | Text]):
    """Rows keyed by unit (a step id, or ``summarize[3]`` for an instance). The screen decides which one is
    selected.

    When the columns would not fit in their share of the terminal (long step ids at 80 columns),
    the agent column is left out: the detail pane names the agent, and attempt and duration stay.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", show_header=True, cell_padding=1, **kwargs)
        self._shown: tuple[tuple[str, str, str, bool, str, int, str, bool, str], ...] = ()
        self._with_agent: bool | None = None
        self._steps: list[StepItem] = []
        self._blamed: str | None = None
        self.only_waiting = False
        """Show only the units waiting for a decision and the rows of their steps (``w`` on the run screen):
        50 waiting instances among 2 000 are then the list, not a needle in it."""

    @property
    def selected_step(self) -> str | None:
        if self.row_count == 0:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return row_key.value

    def select(self, unit: str) -> None:
        """Put the cursor on ``unit``'s row (scrolled into view), if the list shows it."""
        keys = [str(key.value) for key in self.rows]
        if unit in keys:
            self.move_cursor(row=keys.index(unit))

    def _fits_agent(self, steps: list[StepItem]) -> bool:
        step = min(STEP_WIDTH, max((len(row_label(s)) for s in steps), default=4))
        agent = min(AGENT_WIDTH, max((len(s.agent) for s in steps), default=5))
        needed = 1 + step + agent + 3 + 6 + 2 * 5 + 2  # cells, their padding, the scrollbar
        return needed <= int(self.app.size.width * SHARE)

    def _set_columns(self, with_agent: bool) -> None:
        if with_agent == self._with_agent:
            return
        self._with_agent = with_agent
        self._shown = ()
        self.clear(columns=True)
        columns = [(" ", "icon"), ("step", "step")] + ([("agent", "agent")] if with_agent else []) + \
            [("try", "try"), ("time", "time")]
        for label, key in columns:
            self.add_column(label, key=key)

    def narrowed(self, steps: list[StepItem]) -> list[StepItem]:
        """``steps`` as the list shows them: all, or with :attr:`only_waiting` the waiting units and, above
        the instances or iterations that wait, their step's row."""
        if not self.only_waiting:
            return steps
        waiting_steps = {s.step_id for s in steps if s.waiting}
        return [s for s in steps if s.waiting or (s.step_id in waiting_steps and not s.instance)]

    def refit(self) -> None:
        """Lay the columns out again for a new terminal width (the screen calls this on resize)."""
        self.show(self._steps, blamed=self._blamed)

    def show(self, steps: list[StepItem], *, select: str | None = None, blamed: str | None = None) -> None:
        """Replace the rows when they changed; put the cursor on ``select`` (else keep it where it was)."""
        self._steps, self._blamed = steps, blamed
        keep = select or self.selected_step
        steps = self.narrowed(steps)
        self._set_columns(self._fits_agent(steps))
        marks = [step_mark(s) for s in steps]
        cells = tuple((s.unit, m.icon, m.style, s.waiting, s.agent, s.attempt, format_duration(s.duration),
                       s.unit == blamed, row_label(s)) for s, m in zip(steps, marks, strict=True))
        if cells != self._shown:
            self._shown = cells
            self.clear()
            for unit, icon, style, waiting, agent, attempt, duration, is_blamed, label in cells:
                name = Text(truncate(label, STEP_WIDTH), style="bold" if waiting else "")
                if is_blamed:
                    name.append(" ◀", style="bold red")
                row: list[str | Text] = [Text(icon, style=style), name]
                if self._with_agent:
                    row.append(Text(truncate(agent, AGENT_WIDTH)))
                row += [Text(str(attempt) if attempt else "", justify="right"), Text(duration, justify="right")]
                self.add_row(*row, key=unit)
        ids = [c[0] for c in cells]
        if keep in ids and keep != self.selected_step:
            self.move_cursor(row=ids.index(keep))
