"""The run's steps in topological order: status icon, step, agent, attempt and duration."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from tui.format import STATUS_STYLE, STEP_ICON, format_duration, truncate
from tui.queries import StepItem


class StepList(DataTable):
    """Steps keyed by step id. The screen decides which one is selected."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", show_header=True, cell_padding=1, **kwargs)
        self._shown: tuple = ()

    def on_mount(self) -> None:
        for label, key in ((" ", "icon"), ("step", "step"), ("agent", "agent"), ("try", "try"), ("time", "time")):
            self.add_column(label, key=key)

    @property
    def selected_step(self) -> str | None:
        if self.row_count == 0:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return row_key.value

    def show(self, steps: list[StepItem], *, select: str | None = None, blamed: str | None = None) -> None:
        """Replace the rows when they changed; put the cursor on ``select`` (else keep it where it was)."""
        cells = tuple((s.step_id, s.status, s.waiting, s.agent, s.attempt, format_duration(s.duration),
                       s.step_id == blamed) for s in steps)
        keep = select or self.selected_step
        if cells != self._shown:
            self._shown = cells
            self.clear()
            for step_id, status, waiting, agent, attempt, duration, is_blamed in cells:
                style = STATUS_STYLE.get(status, "")
                if status == "gate_failed" and not waiting:
                    style = "yellow"
                name = Text(truncate(step_id, 22), style="bold" if waiting else "")
                if is_blamed:
                    name.append(" ◀", style="bold red")
                self.add_row(Text(STEP_ICON.get(status, "?"), style=style), name, truncate(agent, 12),
                             Text(str(attempt) if attempt else "", justify="right"),
                             Text(duration, justify="right"), key=step_id)
        ids = [c[0] for c in cells]
        if keep in ids and keep != self.selected_step:
            self.move_cursor(row=ids.index(keep))
