"""The experiments list and a comparison, shaped for the review app's tables. No Textual here.

Reads go through :meth:`orchestrator.store.Store.experiments` and
:func:`orchestrator.service.comparison.compare` (the ``experiment compare --json`` document), so the screen
shows what ``experiment list`` and ``experiment compare`` print. The screens call these from thread workers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tui.format import truncate

if TYPE_CHECKING:
    from orchestrator.store import Store

BASELINE = "baseline"
"""The dataset's source runs, as ``experiment compare`` names them."""


@dataclass(frozen=True)
class ExperimentRow:
    """One line of the experiments table."""

    name: str
    dataset: str
    dataset_version: int
    workflow: str
    status: str
    runs: int | None
    outcome_rate: float | None

    @property
    def dataset_at_version(self) -> str:
        return f"{self.dataset}@{self.dataset_version}"


def load_experiments(store: Store) -> list[ExperimentRow]:
    """Every experiment, newest first, with what it counted when it finished (as ``experiment list``)."""
    rows = [ExperimentRow(v.name, v.dataset, v.dataset_version, v.workflow, v.status, v.summary.get("runs"),
                          v.summary.get("outcome_rate")) for v in store.experiments()]
    return rows[::-1]


def load_comparison(store: Store, a: str, b: str) -> dict[str, Any]:
    """The ``experiment compare A B --json`` document."""
    from orchestrator.service.comparison import compare

    return compare(store, a, b)


def rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def rate_with_interval(value: float | None, interval: list[float] | None) -> str:
    if value is None:
        return "-"
    return rate(value) + ("" if not interval else f" [{interval[0]:.0%}, {interval[1]:.0%}]")


def verdict(side: dict[str, Any]) -> str:
    """``correct 1.00 (succeeded)``: a side's outcome of one example."""
    word = "-" if side["correct"] is None else ("correct" if side["correct"] else "incorrect")
    score = "" if side["score"] is None else f" {side['score']:.2f}"
    return f"{word}{score} ({side['status']})"


def blamed_step(row: dict[str, Any]) -> str:
    """The changed step a flip is put down to, or the candidates when it is ambiguous; empty for no flip."""
    if not row["flip"]:
        return ""
    return row.get("changed_step") or "ambiguous: " + ", ".join(row.get("candidates", []))


def example_text(inputs: dict[str, Any], width: int = 28) -> str:
    return truncate(json.dumps(inputs, ensure_ascii=False, separators=(", ", ": ")), width)


def headline(doc: dict[str, Any]) -> str:
    """What the comparison found, before its tables: the flips and the changed steps behind them."""
    flips = doc["flips"]
    lines = [f"{doc['a']} → {doc['b']} on dataset {doc['dataset']}@{doc['dataset_version']}: {doc['examples']} "
             f"examples; changed steps: {', '.join(doc['changed_steps']) or 'none'}",
             f"flips: {flips['fixed']} fixed, {flips['broken']} broken"
             + (f" ({flips['ambiguous']} not put down to one step)" if flips["ambiguous"] else "")]
    lines += [f"  {s['step_id']}: {s['fixed']} fixed, {s['broken']} broken ({s['share']:.0%} of flips)"
              for s in doc["flips_by_step"]]
    if not doc["examples"]:
        lines.append("no example has a run on both sides" + (
            " (the dataset has no source runs: pick two experiments with space, then c)"
            if BASELINE in (doc["a"], doc["b"]) else ""))
    return "\n".join(lines)


def aggregate_rows(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(measure, side A, side B): the outcome rate with its 95% interval, then each step's gate pass rate side
    by side, then score, tokens, cost, latency and trajectory length."""
    a, b = doc["aggregates"]["a"], doc["aggregates"]["b"]

    def num(value: float | None, fmt: str = "{:.2f}") -> str:
        return "-" if value is None else fmt.format(value)

    rows = [("outcome rate (95% CI)", rate_with_interval(a["outcome_rate"], a["outcome_rate_ci95"]),
             rate_with_interval(b["outcome_rate"], b["outcome_rate_ci95"]))]
    rows += [(f"gate pass rate: {g['step_id']}", rate(g["a"]), rate(g["b"])) for g in doc["gates"]]
    rows += [
        ("mean score", num(a["mean_score"]), num(b["mean_score"])),
        ("tokens", str(a["tokens"]["total"]), str(b["tokens"]["total"])),
        ("cost", num(a["cost"], "{:.4f}"), num(b["cost"], "{:.4f}")),
        ("latency p50 / p95 (s)", f"{num(a['latency_s']['p50'])} / {num(a['latency_s']['p95'])}",
         f"{num(b['latency_s']['p50'])} / {num(b['latency_s']['p95'])}"),
        ("trajectory length (mean)", num(a["trajectory_length"]["mean"], "{:.1f}"),
         num(b["trajectory_length"]["mean"], "{:.1f}")),
    ]
    return rows
