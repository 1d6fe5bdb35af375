"""One comparison of two experiments (or an experiment and ``baseline``): flips first, then the aggregates.

It renders the ``orchestrator experiment compare A B --json`` document
(:func:`orchestrator.service.comparison.compare`), computed in a thread worker: the headline counts the flips
and the changed step each is put down to; the examples table lists the fixed, then the broken examples, then
the rest, each with both sides' verdict and the changed step blamed; the aggregates table puts the outcome
rate (with its 95% interval) and each step's gate pass rate side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from tui.experiment_rows import aggregate_rows, blamed_step, example_text, headline, load_comparison, verdict
from tui.format import truncate
from tui.messages import LoadFailed
from tui.widgets.live_status import LiveStatus

if TYPE_CHECKING:
    from tui.app import ReviewApp

FLIP_STYLE = {"fixed": "bold green", "broken": "bold red"}


@dataclass
class ComparisonLoaded(Message):
    document: dict[str, Any]


class ComparisonScreen(Screen[None]):
    """Side A is ``a`` (``baseline`` or the first marked experiment), side B is ``b``."""

    app: ReviewApp

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "back", "Back", tooltip="Back to the experiments"),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, a: str, b: str) -> None:
        super().__init__()
        self.a, self.b = a, b
        self.document: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        with VerticalScroll(id="cmp-body"):
            yield Static(f"comparing {self.a} → {self.b}…", id="cmp-headline", markup=False)
            yield Static("Examples, flips first", classes="section-title cmp-section")
            yield DataTable(cursor_type="row", zebra_stripes=True, id="cmp-examples")
            yield Static("Aggregates", classes="section-title cmp-section")
            yield DataTable(cursor_type="row", zebra_stripes=True, id="cmp-aggregates")
        yield LiveStatus("fixed: A incorrect, B correct · broken: the reverse · tab: to the aggregates",
                         id="live-status")
        yield Footer()

    def on_mount(self) -> None:
        examples = self.query_one("#cmp-examples", DataTable)
        for column in ("#", "flip", "changed step", "example", self.a, self.b):  # the blamed step fits 80 columns
            examples.add_column(truncate(column, 24))
        aggregates = self.query_one("#cmp-aggregates", DataTable)
        for column in ("", self.a, self.b):
            aggregates.add_column(truncate(column, 24))
        examples.focus()
        self._load()

    @work(thread=True, exclusive=True, group="comparison-load", exit_on_error=False)
    def _load(self) -> None:
        try:
            document = load_comparison(self.app.store, self.a, self.b)
        except Exception as exc:  # an InputError says what is wrong (different datasets, …); shown as it is
            from orchestrator.core.errors import OrchestratorError

            words = str(exc) if isinstance(exc, OrchestratorError) else f"{type(exc).__name__}: {exc}"
            self.post_message(LoadFailed(f"cannot compare {self.a} with {self.b}: {words}"))
            return
        self.post_message(ComparisonLoaded(document))

    def on_load_failed(self, message: LoadFailed) -> None:
        self.query_one("#cmp-headline", Static).update(message.error)
        self.notify(message.error, severity="error", timeout=10, markup=False)

    def on_comparison_loaded(self, message: ComparisonLoaded) -> None:
        self.document = doc = message.document
        self.query_one("#cmp-headline", Static).update(headline(doc))
        examples = self.query_one("#cmp-examples", DataTable)
        examples.clear()
        for row in doc["per_example"]:  # the document lists flips first, fixed before broken
            flip = row["flip"] or ""
            examples.add_row(Text(str(row["position"]), justify="right"), Text(flip, style=FLIP_STYLE.get(flip, "")),
                             Text(blamed_step(row), style="bold" if flip else ""), Text(example_text(row["inputs"])),
                             Text(verdict(row["a"])), Text(verdict(row["b"])), key=str(row["example_id"]))
        aggregates = self.query_one("#cmp-aggregates", DataTable)
        aggregates.clear()
        for measure, a, b in aggregate_rows(doc):
            aggregates.add_row(Text(measure), Text(a), Text(b))

    def action_back(self) -> None:
        self.dismiss()
