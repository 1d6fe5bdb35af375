"""The ``runs`` table: one line per run, fitted to the terminal's width.

A page of runs is read at a glance, so every row is one line at any width: a run is named by the shortest
prefix of its id that names it alone (as git names a commit), a run paused in many places shows the first
place and a count, and when the columns do not all fit, the least important are left out instead of
wrapping every cell (``PRIORITY``). A column no listed run has a value for is not printed at all.
``runs --full`` prints whole ids and every value whole instead, wrapping as it must.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.text import Text

from orchestrator.cli.common import status_markup
from orchestrator.service.waiting_list import first_and_count

if TYPE_CHECKING:
    from rich.console import JustifyMethod
    from rich.table import Table

GAP = 2
"""Spaces between two columns (the table has no borders: at 80 columns they would take a third of a row)."""

PRIORITY = ("run", "status", "workflow", "paused at", "reason", "age", "outcome", "blamed", "cost", "tokens")
"""The columns, most important first: at a narrow width the last ones give way first. A run and its state
always show; then where a paused run waits and why (what a reviewer triages), then age and verdicts."""

ORDER = ("run", "workflow", "status", "age", "outcome", "paused at", "reason", "blamed", "tokens", "cost")
"""The columns left to right."""

FLOORS = {"workflow": 10, "paused at": 20, "reason": 16, "blamed": 10}
"""The columns that may be cut (with an ellipsis) to fit, and the fewest characters each keeps; every other
column is short and shown whole or not at all."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the table: its header, a cell per run, and how far it may be cut."""

    header: str
    cells: tuple[Text, ...]
    floor: int | None = None
    """The fewest characters a cut cell keeps; None: the column is never cut."""
    tails: tuple[str, ...] = ()
    """Per cell, an ending kept whole when the cell is cut (``(+199 more)``): it is what the cell counts."""
    justify: JustifyMethod = "left"

    @property
    def natural(self) -> int:
        """The width that shows every cell whole."""
        return max([cell_len(self.header), *(cell.cell_len for cell in self.cells)])

    @property
    def narrowest(self) -> int:
        """The width the column may be cut to (never below its header)."""
        if self.floor is None:
            return self.natural
        return min(self.natural, max(cell_len(self.header), self.floor))

    @property
    def empty(self) -> bool:
        return not any(cell.plain for cell in self.cells)

    def fitted(self, width: int) -> list[Text]:
        """The cells cut to ``width``, each ending with ``…`` where it was cut, a kept tail after it."""
        cut = []
        for index, cell in enumerate(self.cells):
            tail = self.tails[index] if index < len(self.tails) else ""
            room = width - cell_len(tail)
            if cell.cell_len <= width:
                cut.append(cell)
            elif tail and room >= 2:
                head = cell[: len(cell.plain) - len(tail)]
                head.truncate(room, overflow="ellipsis")
                cut.append(head + tail)
            else:
                whole = cell.copy()
                whole.truncate(width, overflow="ellipsis")
                cut.append(whole)
        return cut


def layout(columns: Sequence[Column], width: int) -> list[tuple[Column, int]]:
    """The columns to print at ``width`` and the width of each, left to right.

    In ``PRIORITY`` order each non-empty column is taken if it fits at its narrowest beside those taken
    (the run and its status always are); the width left then widens the cut columns, most important first,
    up to what shows them whole."""
    by_header = {column.header: column for column in columns}
    taken: dict[str, int] = {}
    used = -GAP
    for header in PRIORITY:
        column = by_header.get(header)
        if column is None or column.empty and header not in ("run", "status"):
            continue
        if header in ("run", "status") or used + GAP + column.narrowest <= width:
            taken[header] = column.narrowest
            used += GAP + column.narrowest
    spare = max(0, width - used)
    for header in taken:
        grow = min(spare, by_header[header].natural - taken[header])
        taken[header] += grow
        spare -= grow
    return [(by_header[header], taken[header]) for header in ORDER if header in taken]


def one_line(text: str) -> str:
    """``text`` on one line: a line break shown as ``⏎`` (a gate's reason may hold several), any other
    control character as a space."""
    text = text.replace("\r\n", "\n").replace("\n", " ⏎ ")
    return "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text)


def age_text(created_at: str, now: float) -> str:
    """``3d``, ``5h``, ``12m`` or ``40s`` since ``created_at`` (ISO 8601)."""
    delta = max(0.0, now - datetime.fromisoformat(created_at).timestamp())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            return f"{int(delta // size)}{unit}"
    return f"{int(delta)}s"


def outcome_text(doc: dict[str, Any]) -> str:
    """``0.25 incorrect`` / ``1.00 correct`` / empty when the run has no outcome."""
    if doc.get("outcome") is None:
        return ""
    verdict = {True: " correct", False: " incorrect"}.get(doc.get("correct"), "")  # type: ignore[arg-type]
    return f"{doc['outcome']:.2f}{verdict}"


def paused_at(paths: Sequence[str], *, full: bool = False) -> tuple[str, str]:
    """Where a run waits, and the ending kept when the text is cut: the first path and how many more, as the
    review app says it (``per_ticket[0] > confirm +199 more``, ending `` +199 more``); with ``full``, every path."""
    if not paths:
        return "", ""
    if full or len(paths) == 1:
        return ", ".join(paths), ""
    shown = first_and_count(paths)
    return shown, shown[len(paths[0]):]


def columns_of(docs: Sequence[dict[str, Any]], names: Callable[[str], str], *, full: bool = False,
               now: float | None = None) -> list[Column]:
    """The table's columns for ``runs_page_document`` rows; ``names`` gives the id a row is shown by.
    Tokens and cost only when a listed run called a model."""
    now = time.time() if now is None else now
    pauses = [paused_at(d.get("waiting_steps") or [], full=full) for d in docs]
    outcomes = []
    for d in docs:
        style = {True: "green", False: "red"}.get(d.get("correct"), "")  # type: ignore[arg-type]
        outcomes.append(Text(outcome_text(d), style=style))
    columns = [
        Column("run", tuple(Text(names(d["run_id"])) for d in docs)),
        Column("workflow", tuple(Text(one_line(d["workflow"])) for d in docs), floor=FLOORS["workflow"]),
        Column("status", tuple(Text.from_markup(status_markup(d["status"])) for d in docs)),
        Column("age", tuple(Text(age_text(d["created_at"], now)) for d in docs)),
        Column("outcome", tuple(outcomes)),
        Column("paused at", tuple(Text(one_line(text)) for text, _ in pauses), floor=FLOORS["paused at"],
               tails=tuple(tail for _, tail in pauses)),
        Column("reason", tuple(Text(one_line(d.get("gate_reason") or "")) for d in docs), floor=FLOORS["reason"]),
        Column("blamed", tuple(Text(one_line(d.get("blamed_step") or "")) for d in docs), floor=FLOORS["blamed"]),
    ]
    if any(d.get("llm") for d in docs):
        usage = [d.get("llm") for d in docs]
        columns.append(Column("tokens", tuple(Text(f"{u['input_tokens']}/{u['output_tokens']}" if u else "")
                                              for u in usage), justify="right"))
        columns.append(Column("cost", tuple(Text("" if not u else "unknown" if u["cost"] is None
                                                 else f"${u['cost']:.4f}") for u in usage), justify="right"))
    return columns


def runs_table(docs: Sequence[dict[str, Any]], names: Callable[[str], str], *, width: int,
               full: bool = False) -> Table:
    """The ``runs`` table: one line per run within ``width`` columns; with ``full``, whole ids and every
    value whole (``names`` should then give the whole id), cells wrapping where they must."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False, padding=(0, GAP // 2), header_style="bold")
    columns = columns_of(docs, names, full=full)
    if full:
        shown = [(c, None) for header in ORDER for c in columns
                 if c.header == header and (not c.empty or header in ("run", "status"))]
        for column, _ in shown:
            table.add_column(column.header, justify=column.justify, overflow="fold",
                             no_wrap=column.floor is None)
        cells = [list(column.cells) for column, _ in shown]
    else:
        fitted = layout(columns, width)
        for column, size in fitted:
            table.add_column(column.header, justify=column.justify, width=size, no_wrap=True, overflow="ellipsis")
        cells = [column.fitted(size) for column, size in fitted]
    for row in zip(*cells, strict=True):
        table.add_row(*row)
    return table

