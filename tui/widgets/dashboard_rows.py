"""The dashboard's rows: one step's gate pass-rate trend, and one bar of the failure attribution.

They show a :class:`~orchestrator.attribution.stats.StepStats` (or one share of the distribution)
as given; the screen reads the store and decides which rows exist.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult, RenderResult
from textual.containers import Horizontal
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.widgets import Label, Sparkline

from tui.format import truncate
from tui.widgets.share_bar import ShareBar

if TYPE_CHECKING:
    from orchestrator.attribution.stats import StepStats

STEP_WIDTH = 24
"""Longest step id shown in full (the procurement workflow's longest is 22)."""

UNATTRIBUTED = "(unattributed)"
"""The distribution's key for incorrect outcomes whose trace blamed no step (see stats.build_stats)."""


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def change_points(rates: list[float]) -> str:
    """The latest period against the one before, in percentage points: ``-60 pt``, ``+7 pt``, ``±0``."""
    if len(rates) < 2:
        return ""
    points = round((rates[-1] - rates[-2]) * 100)
    return "±0" if points == 0 else f"{points:+d} pt"


class RateSparkline(Sparkline):
    """A sparkline of rates on a fixed 0..1 scale: 100% is a full block, 40% about a third of one.

    Textual's sparkline scales from the data's own minimum to its maximum, which draws a steady
    100% as the lowest bar and a 96% -> 95% wobble as a collapse. This one hands the renderable
    every cell's value with a 0 and a 1 hidden in the first cell's bucket (its median is still
    the cell's value), so the scale is always 0..1; colours go from ``sparkline--min-color`` (0%)
    to ``sparkline--max-color`` (100%).
    """

    def render(self) -> RenderResult:
        rates = list(self.data or [])
        width = self.size.width
        if not rates or width <= 0:
            return ""
        _, base = self.background_colors
        low = base + self.get_component_styles("sparkline--min-color").color
        high = base + self.get_component_styles("sparkline--max-color").color
        cells = [rates[i * len(rates) // width] for i in range(width)]  # each period gets an equal share
        data = [cells[0], 0.0, 1.0, cells[0], cells[0]] + [v for c in cells[1:] for v in (c,) * 5]
        return SparklineRenderable(data, width=width, height=self.size.height, min_color=low.rich_color,
                                   max_color=high.rich_color, summary_function=statistics.median)


_ROW_CSS = """
    height: 1;
    padding: 0 1;
"""


def _columns(row: str) -> str:
    """The column widths, shared by the header and the step rows (DEFAULT_CSS is scoped to its widget)."""
    return f"""
    {row} > Label {{ height: 1; margin: 0 1 0 0; }}
    {row} > .col-step {{ width: {STEP_WIDTH}; }}
    {row} > .col-trend {{ width: 1fr; min-width: 6; max-width: 40; margin: 0 1 0 0; }}
    {row} > .col-rate {{ width: 6; text-align: right; }}
    {row} > .col-change {{ width: 7; text-align: right; }}
    {row} > .col-runs {{ width: 5; text-align: right; }}
    {row} > .col-blamed {{ width: 6; text-align: right; margin: 0; }}
    """


class TrendHeader(Horizontal):
    """Column titles above the step rows."""

    DEFAULT_CSS = f"""
    TrendHeader {{ {_ROW_CSS} color: $text-muted; text-style: bold; }}
    {_columns('TrendHeader')}
    """

    def __init__(self, period: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.period = period

    def compose(self) -> ComposeResult:
        yield Label("step", classes="col-step")
        yield Label(f"gate pass rate by {self.period}", classes="col-trend")
        yield Label("latest", classes="col-rate")
        yield Label("change", classes="col-change")
        yield Label("runs", classes="col-runs")
        yield Label("blamed", classes="col-blamed")


class StepTrend(Horizontal):
    """``retrieve  ▇▇▇▇▁▁▁▁  40%  -60 pt  5  25%``: the class ``-alert`` marks a step whose rate dropped."""

    DEFAULT_CSS = f"""
    StepTrend {{ {_ROW_CSS} }}
    StepTrend.-alert {{ background: $error-muted; }}
    StepTrend.-alert > .col-rate, StepTrend.-alert > .col-change {{ color: $text-error; text-style: bold; }}
    StepTrend > RateSparkline > .sparkline--max-color {{ color: $success; }}
    StepTrend > RateSparkline > .sparkline--min-color {{ color: $error; }}
    StepTrend > .col-trend.-none {{ color: $text-muted; }}
    StepTrend.-blamed > .col-blamed {{ color: $text-error; text-style: bold; }}
    {_columns('StepTrend')}
    """

    def __init__(self, step: StepStats, *, alert: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step = step
        self.rates = [p.gate_pass_rate for p in step.trend if p.gate_pass_rate is not None]
        """The pass rate of every period in which the step ran with gates, oldest first."""
        self.set_class(alert, "-alert")
        self.set_class(step.blamed > 0, "-blamed")

    @property
    def latest(self) -> float | None:
        return self.rates[-1] if self.rates else None

    def compose(self) -> ComposeResult:
        s = self.step
        name = Label(truncate(s.step_id, STEP_WIDTH), classes="col-step")
        if len(s.step_id) > STEP_WIDTH:
            name.tooltip = s.step_id
        yield name
        if self.rates:
            spark = RateSparkline(self.rates, classes="col-trend")
            spark.tooltip = "  ".join(f"{p.period} {percent(p.gate_pass_rate)} of {p.gated_runs}"
                                      for p in s.trend if p.gate_pass_rate is not None)
            yield spark
        else:
            yield Label("no gates", classes="col-trend -none")
        yield Label(percent(self.latest) if self.rates else "", classes="col-rate")
        yield Label(change_points(self.rates), classes="col-change")
        yield Label(str(s.runs), classes="col-runs")
        yield Label(percent(s.blamed_share) if s.blamed else "", classes="col-blamed")


class BlameRow(Horizontal):
    """``score  ██████████▌     50%  2 of 4``: one step's share of the incorrect outcomes."""

    DEFAULT_CSS = f"""
    BlameRow {{ {_ROW_CSS} }}
    BlameRow > .blame-step {{ width: {STEP_WIDTH}; margin: 0 1 0 0; }}
    BlameRow > ShareBar {{ color: $error; max-width: 60; }}
    BlameRow.-unattributed > ShareBar {{ color: $text-muted; }}
    BlameRow.-unattributed > .blame-step {{ color: $text-muted; text-style: italic; }}
    BlameRow > .blame-share {{ width: 5; text-align: right; text-style: bold; }}
    BlameRow > .blame-count {{ width: auto; margin: 0 0 0 1; color: $text-muted; }}
    """

    def __init__(self, name: str, share: float, count: int, total: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step_id, self.share, self.count, self.total = name, share, count, total
        self.set_class(name == UNATTRIBUTED, "-unattributed")

    def compose(self) -> ComposeResult:
        yield Label(truncate(self.step_id, STEP_WIDTH), classes="blame-step")
        yield ShareBar(self.share)
        yield Label(percent(self.share), classes="blame-share")
        yield Label(f"{self.count} of {self.total}", classes="blame-count")
