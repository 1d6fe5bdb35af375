"""CLI commands over outcomes and attribution: label, trace, attribute, replay, stats, report.

Each command is a thin face over a function of :mod:`orchestrator.service.labels` or :mod:`orchestrator.attribution`,
the same functions the TUI calls.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from orchestrator.cli.common import (
    MAX_COUNT,
    MAX_SEED,
    DbOption,
    JsonOption,
    OtelOption,
    ReviewerOption,
    RunArgument,
    guarded,
    open_store,
    out,
    print_json,
    read_json_file,
    resolve_run_id,
)

if TYPE_CHECKING:
    from orchestrator.spec.records import AttributionView

WorkflowOption = Annotated[str | None, typer.Option("--workflow", help="Only runs of this workflow.")]


def _evidence_note(method: str, candidate: dict[str, Any]) -> str:
    ev = candidate.get("evidence") or {}
    if ev.get("blocked_by"):
        return f"blocked by {ev['blocked_by']}: {ev.get('blocked_reason')}"
    if method == "trace":
        signals = ev.get("signals") or []
        if signals:
            more = f" (+{len(signals) - 1} more)" if len(signals) > 1 else ""
            return f"{signals[0]['kind']}: {signals[0]['detail']}{more}"
        return "checked, no failing signal" if ev.get("checked") else "unchecked: no gate or critic"
    if method == "counterfactual":
        return (f"{ev.get('reference')}: {ev.get('value_actual', 0):.3f} -> {ev.get('value_with_reference', 0):.3f}"
                f" (replay {ev.get('replay_run_id')})")
    note = f"references: {', '.join(sorted(set((ev.get('references') or {}).values())))}"
    if ev.get("ci95"):
        lo, hi = ev["ci95"]
        note += f"; 95% CI [{lo:+.3f}, {hi:+.3f}]"
    if ev.get("steps"):
        note += f"; steps: {', '.join(ev['steps'])}"
    return note


def print_attribution(view: "AttributionView") -> None:
    """The attribution record as a ranked table, with the sentence that explains it."""
    from rich.table import Table

    doc = view.to_json()
    blamed = doc["blamed_step"]
    agent = next((c["agent"] for c in doc["candidates"] if c["step_id"] == blamed), None)
    head = f"run [bold]{doc['run_id']}[/] {doc['method']}"
    if doc["params"].get("by") == "agent":
        head += " by agent"
    if blamed:
        out.print(f"{head}: blamed step [bold red]{escape(blamed)}[/] (agent {escape(str(agent))}), "
                  f"confidence {doc['confidence']:.2f}", highlight=False)
    else:
        out.print(f"{head}: no step blamed (confidence {doc['confidence'] or 0:.2f})", highlight=False)
    explanation = (doc.get("evidence") or {}).get("explanation")
    if explanation:
        out.print(f"  why: {escape(explanation)}", highlight=False, soft_wrap=True)
    table = Table(expand=True)
    for col, kw in (("#", {"justify": "right"}), ("step", {}), ("agent", {}), ("credit", {"justify": "right"}),
                    ("evidence", {"ratio": 1})):
        table.add_column(col, **kw)
    for i, c in enumerate(doc["candidates"], 1):
        style = "red" if c["credit"] < 0 else ("green" if c["credit"] > 0 else "")
        credit = f"[{style}]{c['credit']:+.3f}[/]" if style else f"{c['credit']:+.3f}"
        table.add_row(str(i), escape(c["step_id"]), escape(c["agent"]), credit,
                      escape(_evidence_note(doc["method"], c)))
    out.print(table)
    stored = (doc.get("evidence") or {}).get("stored") or {}
    if doc.get("cost") or stored.get("replay_runs"):
        out.print(f"  cost: {doc.get('cost') or 0} step executions; {stored.get('replay_runs', 0)} replay runs "
                  f"stored ({stored.get('step_records', 0)} step records)", highlight=False)


@guarded
def label(run_id: RunArgument,
          correct: Annotated[bool, typer.Option("--correct", help="The final output was right.")] = False,
          incorrect: Annotated[bool, typer.Option("--incorrect", help="The final output was wrong.")] = False,
          reward: Annotated[float | None, typer.Option("--reward", help="A reward in [0, 1] instead of (or "
                                                                         "besides) correct/incorrect.")] = None,
          reason: Annotated[str | None, typer.Option("--reason", help="Why; stored with the label.")] = None,
          reference: Annotated[Path | None, typer.Option("--reference", help="JSON file with the run's reference "
                                                         "answer: stored, and the run scored again by its "
                                                         "evaluator.")] = None,
          reviewer: ReviewerOption = None, as_json: JsonOption = False, db: DbOption = None) -> None:
    """Record a human outcome for a finished run; an incorrect one is traced back to a step at once.

    With ``--reference F`` (alone or besides a verdict) the run's reference answer is stored and the
    workflow's evaluator scores the run again: a new evaluator outcome, its reason included.
    """
    from orchestrator.core.errors import InputError
    from orchestrator.service.labels import label_run, set_reference

    if correct and incorrect:
        raise InputError("--correct and --incorrect contradict each other; give one of them")
    verdict_given = True if correct else (False if incorrect else None)
    answer = read_json_file(reference, "--reference") if reference is not None else None
    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    rescored = set_reference(store, run_id, answer) if reference is not None else None
    if rescored is not None and verdict_given is None and reward is None:
        if as_json:
            print_json({"run_id": run_id, "outcome_id": rescored.outcome_id, "value": rescored.value,
                        "correct": rescored.correct, "evaluator_reason": rescored.evaluator_reason,
                        "rescored": rescored.outcome_id is not None})
            return
        _print_rescore(rescored)
        return
    result = label_run(store, run_id, correct=verdict_given, reward=reward, reason=reason, reviewer=reviewer)
    if as_json:
        doc = {"run_id": result.run_id, "outcome_id": result.outcome_id, "value": result.value,
               "correct": result.correct, "blamed_step": result.blamed_step,
               "confidence": result.confidence, "attribution_id": result.attribution_id,
               "explanation": result.explanation}
        if rescored is not None:
            doc["evaluator"] = {"outcome_id": rescored.outcome_id, "value": rescored.value,
                                "correct": rescored.correct, "evaluator_reason": rescored.evaluator_reason}
        print_json(doc)
        return
    if rescored is not None:
        _print_rescore(rescored)
    verdict = "correct" if result.correct else "incorrect"
    out.print(f"labelled run [bold]{result.run_id}[/] {verdict} (reward {result.value:.2f})", highlight=False)
    if result.correct:
        return
    if result.blamed_step:
        out.print(f"blamed step: [bold red]{escape(result.blamed_step)}[/] (confidence {result.confidence:.2f})",
                  highlight=False)
    else:
        out.print("blamed step: none found by the backward trace", highlight=False)
    if result.explanation:
        out.print(f"  why: {escape(result.explanation)}", highlight=False, soft_wrap=True)
    out.print(f"  details: `orchestrator trace {result.run_id}`; replay-based: "
              f"`orchestrator attribute {result.run_id} --method counterfactual`", highlight=False)



def _print_rescore(rescored: Any) -> None:
    """One line on what storing a reference did to the run's evaluator score."""
    if rescored.outcome_id is None:
        out.print(f"stored the reference of run [bold]{rescored.run_id}[/]; not scored: {escape(rescored.why_not)}",
                  highlight=False, soft_wrap=True)
        return
    verdict = "correct" if rescored.correct else "incorrect"
    why = f": {rescored.evaluator_reason}" if rescored.evaluator_reason else ""
    out.print(f"stored the reference of run [bold]{rescored.run_id}[/]; evaluator score {rescored.value:.3f} "
              f"{verdict}{escape(why)}", highlight=False, soft_wrap=True)


@guarded
def trace(run_id: RunArgument,
          recompute: Annotated[bool, typer.Option("--recompute", help="Trace again even if a trace is "
                                                                      "stored.")] = False,
          as_json: JsonOption = False, db: DbOption = None) -> None:
    """The backward trace of a run's outcome: the latest stored one, or a new one."""
    from orchestrator.attribution.methods import trace_view

    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    view = trace_view(store, run_id, recompute=recompute)
    if as_json:
        print_json(view.to_json())
        return
    print_attribution(view)


@guarded
def attribute(run_id: RunArgument,
              method: Annotated[str, typer.Option("--method", "-m", help="trace | counterfactual | shapley | "
                                                                        "difference")],
              by: Annotated[str, typer.Option("--by", help="step | agent (shapley and difference)")] = "step",
              samples: Annotated[int | None, typer.Option("--samples", min=1, max=MAX_COUNT,
                                                          help="Shapley permutations to sample "
                                                               "(default: exact up to 12 players, "
                                                                             "32 above)")] = None,
              seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED,
                                                help="Seed of the permutation sampler.")] = 0,
              otel: OtelOption = None, as_json: JsonOption = False, db: DbOption = None) -> None:
    """Compute and store an attribution record of a run's outcome with one method.

    With telemetry on (``--otel URL`` or OTEL_EXPORTER_OTLP_ENDPOINT), each replay run is exported as a
    trace of its own whose run span names the original run and its trace.
    """
    from orchestrator.attribution.methods import attribute as compute
    from orchestrator.attribution.methods import stored_view

    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    result = compute(store, run_id, method, by=by, samples=samples, seed=seed, otel=otel)
    view = stored_view(store, result)
    if as_json:
        print_json(view.to_json())
        return
    print_attribution(view)


@guarded
def replay(run_id: RunArgument,
           from_step: Annotated[str, typer.Option("--from", help="The step to fork from (a path into a child run: "
                                                             "research > retrieve).")],
           output: Annotated[Path | None, typer.Option("--output", help="JSON file with the output STEP takes "
                                                                        "(default: STEP runs again).")] = None,
           otel: OtelOption = None, as_json: JsonOption = False, db: DbOption = None) -> None:
    """Fork a new run: earlier steps reuse their records, STEP takes the output or re-runs, later steps re-run.

    The original run is not modified; the fork records its parent run and step. Gates run in
    warn mode in a fork (verdicts stored, never a pause). Side-effecting steps never act: they call
    their `simulate:` dry run, else reuse their recorded output while their inputs are unchanged, else
    the fork stops there and says which step blocked it. With telemetry on (``--otel URL`` or
    OTEL_EXPORTER_OTLP_ENDPOINT) the fork is exported as a trace of its own naming the original run.
    """
    from orchestrator.attribution.methods import fork_run
    from orchestrator.attribution.replay import MISSING
    from orchestrator.cli.running import report_result
    from orchestrator.engine.run_state import RunResult
    from orchestrator.spec.model import RunStatus

    value: Any = MISSING
    if output is not None:
        value = read_json_file(output, "--output")
    store = open_store(db, create=False)
    run_id = resolve_run_id(store, run_id)
    evaluation = fork_run(store, run_id, from_step, value, otel=otel)
    if not as_json:
        how = "the given output" if output is not None else "a re-execution"
        out.print(f"forked run {run_id} at step {escape(from_step)} with {how}", highlight=False)
    status: RunStatus = "succeeded" if evaluation.status == "succeeded" else "failed"
    report_result(store, RunResult(evaluation.run_id or "", status, output=evaluation.output,
                                   failed_steps=evaluation.failed_steps, error=evaluation.error), as_json)


@guarded
def stats(workflow: WorkflowOption = None,
          since: Annotated[str | None, typer.Option("--since", help="2026-11-01, an ISO datetime, or 14d / 2w")] = None,
          period: Annotated[str, typer.Option("--period", help="day | week")] = "week",
          min_runs: Annotated[int, typer.Option("--min-runs", min=1, max=MAX_COUNT,
                                                help="Gated runs a period needs before it "
                                                     "can raise an alert.")] = 1,
          expand: Annotated[bool, typer.Option("--expand", help="Under each workflow: step, its child workflow's "
                                                                "steps (research > retrieve), over the child runs "
                                                                "it started.")] = False,
          as_json: JsonOption = False, db: DbOption = None) -> None:
    """Per step: gate pass rate over time, its trend, and the share of failures attributed to it."""
    from rich.table import Table

    from orchestrator.attribution.stats import blame_source, compute_stats, parse_since
    from orchestrator.engine.documents import usage_text

    start = parse_since(since) if since else None
    store = open_store(db, create=False)
    report_ = compute_stats(store, workflow, since=start, period=period, min_runs=min_runs, expand=expand)
    if as_json:
        print_json(report_.to_json())
        return
    out.print(f"workflow [bold]{escape(report_.workflow)}[/]: {report_.runs} runs, "
              f"{report_.incorrect_outcomes} incorrect outcomes", highlight=False)
    table = Table(expand=True)
    models = any(s.model_calls for s in report_.steps)
    columns: list[tuple[str, dict[str, Any]]] = [
        ("step", {}), ("agent", {}), ("runs", {"justify": "right"}), ("gate pass", {"justify": "right"}),
        (f"trend by {period}", {"ratio": 1}), ("blamed", {"justify": "right"})]
    if models:
        columns += [("tokens in/out", {"justify": "right"}), ("cost", {"justify": "right"})]
    for col, kw in columns:
        table.add_column(col, **kw)
    for s in [row for step in report_.steps for row in (step, *(step.steps or []))]:  # a child's steps beneath
        rates = [f"{p.gate_pass_rate:.0%}" for p in s.trend if p.gate_pass_rate is not None][-6:]
        ran = str(s.runs) if not s.skipped_runs else f"{s.runs - s.skipped_runs} ran, {s.skipped_runs} skipped"
        cells = [escape(s.step_id), escape(s.agent or ""), ran,
                 f"{s.gate_pass_rate:.0%}" if s.gate_pass_rate is not None else "-",
                 " -> ".join(rates) or "-", f"{s.blamed_share:.0%}" if s.blamed else ""]
        if models:
            cost = "" if not s.model_calls else ("unknown" if s.cost is None else f"${s.cost:.4f}")
            cells += [f"{s.input_tokens}/{s.output_tokens}" if s.model_calls else "", cost]
        table.add_row(*cells)
    out.print(table)
    if report_.blamed_distribution:
        parts = sorted(report_.blamed_distribution.items(), key=lambda kv: -kv[1])
        out.print("failure attribution: " + ", ".join(f"{escape(k)} {v:.0%}" for k, v in parts), highlight=False)
        out.print(escape(blame_source(report_)), highlight=False)
    if report_.model_usage:
        purposes = [f"{p} {usage_text(u.calls, u.input_tokens, u.output_tokens, u.cost)}"
                 for p, u in report_.model_usage.items()]
        out.print("model calls by purpose: " + "; ".join(purposes), highlight=False)
    for spend in report_.judge_spend:
        out.print(f"judge spend: {escape(spend.step_id)} / {escape(spend.gate)} ({spend.purpose}): "
                  f"{usage_text(spend.calls, spend.input_tokens, spend.output_tokens, spend.cost)}", highlight=False)
    for alert in report_.alerts:
        out.print(f"[bold yellow]alert[/] {escape(alert.message)}", highlight=False, soft_wrap=True)


def _dist(d: dict[str, Any]) -> str:
    if not d.get("count"):
        return "no data"
    return f"n={d['count']} min={d['min']:g} p50={d['p50']:g} p90={d['p90']:g} max={d['max']:g} mean={d['mean']:g}"


@guarded
def report(workflow: WorkflowOption = None, as_json: JsonOption = False, db: DbOption = None) -> None:
    """The reporting checklist over stored runs: lengths, outcomes, non-determinism, composition, granularity."""
    from orchestrator.attribution.report import build_report

    store = open_store(db, create=False)
    doc = build_report(store, workflow).to_json()
    if as_json:
        print_json(doc)
        return
    o = doc["outcomes"]
    header = f"[bold]reporting checklist[/] ({escape(workflow or 'all workflows')}, {doc['runs']} runs)"
    lines = [
        f"1. trajectory length (steps run): {_dist(doc['trajectory_steps'])}",
        f"   attempts per run: {_dist(doc['trajectory_attempts'])}",
        f"2. outcomes: {o['scored_runs']} scored, {o['unscored_runs']} unscored; value {_dist(o['value'])}",
        f"   non-zero reward: {o['share_nonzero_reward'] if o['share_nonzero_reward'] is not None else '-'}; "
        f"correct: {o['share_correct'] if o['share_correct'] is not None else '-'}; by source {o['by_source']}",
        "3. non-determinism (same inputs, different outputs):",
    ]
    for s in doc["nondeterminism"]:
        rate = f"{s['rate']:.0%}" if s["rate"] is not None else "no repeated inputs"
        uncovered = f"; {s['not_covered']} runs stored without digests, not covered" if s.get("not_covered") else ""
        lines.append(f"   {s['step_id']}: {rate} ({s['varied']} of {s['repeated_inputs']} repeated inputs"
                     f"{uncovered})")
    c, g, b = doc["composition"], doc["granularity"], doc["baseline"]
    lines += [
        f"4. composition: by kind {c['by_kind']}; by status {c['by_status']}; versions {c['by_version']}",
        f"5. credit assignment: {g['records']} records; methods {g['by_method']}; granularity {g['by_granularity']}",
        f"6. baseline: steps with a baseline {b['steps_with_baseline'] or 'none'}; mean outcome first "
        f"{b['window_runs']} runs {b['early_mean_outcome']}, last {b['window_runs']} runs {b['recent_mean_outcome']}",
    ]
    out.print(header, highlight=False, soft_wrap=True)
    for line in lines:
        out.print(escape(line), highlight=False, soft_wrap=True)
