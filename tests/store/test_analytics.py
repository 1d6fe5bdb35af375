"""The analytics contract: aggregated rows for stats, report and the dashboard, the same on every store."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from orchestrator.core import jsonio
from orchestrator.store import NewAttribution, NewOutcome, Store, open_store
from orchestrator.store.analytics import period_start
from tests.store.rows import add_run, add_workflow, gate, step

DAY = 86400.0
WEEK45 = datetime(2026, 11, 2, tzinfo=UTC).timestamp()  # a Monday
MONDAY = WEEK45 + 12 * 3600
WEEK46 = WEEK45 + 7 * DAY


def forget_summary(store: Store) -> None:
    """Empty the store's analytics summary: its next read summarises every record again."""
    from orchestrator.store import sql_summary

    sql_summary.forget(store.sql() if hasattr(store, "sql") else store)  # type: ignore[attr-defined]


def llm(calls: int, tokens_in: int, tokens_out: int, cost: float | None) -> str:
    return json.dumps({"calls": calls, "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
                       "cost": cost})


def test_period_start_is_the_utc_day_or_the_monday_of_the_iso_week():
    assert period_start(MONDAY + 3 * DAY, "week") == WEEK45
    assert period_start(MONDAY + 6.4 * DAY, "week") == WEEK45  # Sunday evening
    assert period_start(MONDAY + 3 * DAY, "day") == WEEK45 + 3 * DAY


def seed_steps(store: Store) -> int:
    """Week 45: two runs of a gated step a (one retried after a failed gate) and an LLM step b.
    Week 46: one run. Plus a replay and another workflow's run, which never count."""
    wf = add_workflow(store)
    one = add_run(store, wf)
    store.insert_step_record(step(one, wf, "a", status="gate_failed", started_at=MONDAY, gates=[gate(passed=False)]))
    store.insert_step_record(step(one, wf, "a", attempt=2, started_at=MONDAY + 5, gates=[gate(), gate("other")]))
    store.insert_step_record(step(one, wf, "b", started_at=MONDAY + 9, llm=llm(2, 100, 20, 0.5)))
    two = add_run(store, wf)
    store.insert_step_record(step(two, wf, "a", status="failed", started_at=MONDAY + DAY))
    store.insert_step_record(step(two, wf, "a", attempt=2, started_at=MONDAY + DAY + 1, gates=[gate()]))
    store.insert_step_record(step(two, wf, "b", started_at=MONDAY + DAY + 2, llm=llm(1, 10, 5, None)))
    later = add_run(store, wf)
    store.insert_step_record(step(later, wf, "a", started_at=MONDAY + 7 * DAY, gates=[gate(passed=False)]))
    replay = add_run(store, wf, kind="replay")
    store.insert_step_record(step(replay, wf, "a", started_at=MONDAY, gates=[gate()]))
    other = add_workflow(store, "other", "h2")
    store.insert_step_record(step(add_run(store, other, "other"), other, "a", started_at=MONDAY))
    return wf


def test_step_period_counts_sum_runs_gates_attempts_and_model_usage_per_step_and_week(store: Store):
    seed_steps(store)
    rows = {(r.step_id, r.period_start): r for r in store.step_period_counts("wf", period="week")}
    assert sorted(rows) == [("a", WEEK45), ("a", WEEK46), ("b", WEEK45)]
    a45 = rows[("a", WEEK45)]
    # run one's first gated attempt failed, run two's (after a failed attempt without gates) passed
    assert (a45.runs, a45.gated_runs, a45.gate_passes) == (2, 2, 1)
    assert (a45.attempts, a45.failures, a45.gate_failures, a45.retries) == (4, 1, 1, 2)
    assert a45.agent == "agent-a" and a45.model_records == 0
    a46 = rows[("a", WEEK46)]
    assert (a46.runs, a46.gated_runs, a46.gate_passes, a46.attempts) == (1, 1, 0, 1)
    b45 = rows[("b", WEEK45)]
    assert (b45.runs, b45.gated_runs, b45.gate_passes) == (2, 0, 0)
    assert (b45.model_records, b45.model_calls, b45.input_tokens, b45.output_tokens) == (2, 3, 110, 25)
    assert (b45.priced_records, b45.cost) == (1, 0.5)
    assert [r.step_id for r in store.step_period_counts("wf", period="week")][:2] == ["a", "b"]


def test_step_period_counts_by_day_and_since_follow_each_runs_first_step(store: Store):
    seed_steps(store)
    days = {(r.step_id, r.period_start): r.runs for r in store.step_period_counts("wf", period="day")}
    assert days == {("a", WEEK45): 1, ("b", WEEK45): 1, ("a", WEEK45 + DAY): 1, ("b", WEEK45 + DAY): 1,
                    ("a", WEEK46): 1}
    late = store.step_period_counts("wf", period="week", since=MONDAY + 1)  # run one started before it
    assert {(r.step_id, r.period_start): r.runs for r in late} == {("a", WEEK45): 1, ("b", WEEK45): 1,
                                                                   ("a", WEEK46): 1}
    assert store.step_period_counts("unknown") == []


def test_outcome_counts_follow_the_latest_outcome_and_the_explaining_attribution(store: Store):
    wf = add_workflow(store)
    runs = [add_run(store, wf) for _ in range(5)]
    for run_id in runs:
        store.insert_step_record(step(run_id, wf, "a", started_at=MONDAY))
    bad = NewOutcome(runs[0], value=0.0, correct=False, source="human", termination="goal_achieved")

    def blame(run_id: str, who: str | None, outcome_id: int | None, method: str = "trace", by: str = "step") -> None:
        store.add_attribution(NewAttribution(run_id, method=method, params={"by": by}, step_credits=[],
                                             agent_credits={},
                                             blamed_step=who, confidence=0.5, evidence={}, outcome_id=outcome_id))

    first = store.add_outcome(bad)  # run 0: a trace, then a Shapley record: Shapley explains better
    blame(runs[0], "a", first)
    blame(runs[0], "b", None, "shapley")
    second = store.add_outcome(NewOutcome(runs[1], 0.0, False, "human", "goal_achieved"))
    blame(runs[1], "c", second, "counterfactual")  # a counterfactual outranks a later trace
    blame(runs[1], "a", second)
    blame(runs[1], "z", second, "shapley", by="agent")  # credits agents: never above a counterfactual
    blame(runs[2], "a", None)  # run 2: two traces, the newest wins
    blame(runs[2], "b", None)
    store.add_outcome(NewOutcome(runs[2], 0.0, False, "human", "goal_achieved"))
    store.add_outcome(NewOutcome(runs[3], 0.0, False, "human", "goal_achieved"))  # run 3: unattributed
    store.add_outcome(NewOutcome(runs[4], 0.0, False, "human", "goal_achieved"))  # run 4: corrected later
    store.add_outcome(NewOutcome(runs[4], 1.0, True, "human", "goal_achieved"))
    add_run(store, wf)  # no records: its creation time puts it in the current week
    rows = store.outcome_counts("wf", period="week")
    in45 = {(r.incorrect, r.blamed_step, r.method): r.runs for r in rows if r.period_start == WEEK45}
    assert in45 == {(True, "b", "shapley"): 1, (True, "c", "counterfactual"): 1, (True, "b", "trace"): 1,
                    (True, None, None): 1, (False, None, None): 1}
    assert sum(r.runs for r in rows) == 6 and len({r.period_start for r in rows}) == 2
    assert store.outcome_counts("wf", since=MONDAY + 1) != [] and \
        all(r.period_start != WEEK45 for r in store.outcome_counts("wf", since=MONDAY + 1))


def test_nondeterminism_counts_compare_digests_of_inputs_with_links_resolved(store: Store):
    wf = add_workflow(store)
    for i in range(3):
        run_id = add_run(store, wf)
        # a: same inputs, outputs equal up to key order -> not varied
        upstream = store.insert_step_record(step(run_id, wf, "a", inputs=json.dumps({"q": 1}),
                                                 output={"x": 1, "y": 2} if i else {"y": 2, "x": 1}))
        # b consumes a's (equal) output through a link, and answers differently each time -> varied
        store.insert_step_record(step(run_id, wf, "b", inputs=json.dumps({"d": {"$record": upstream}}), output=i))
        # c: different inputs in every run -> never repeated; its failed first attempt has no output
        store.insert_step_record(step(run_id, wf, "c", status="failed", output=None, inputs=json.dumps({"n": i})))
        store.insert_step_record(step(run_id, wf, "c", attempt=2, inputs=json.dumps({"n": i}), output="same"))
    rows = [(r.step_id, r.repeated_inputs, r.varied, r.not_covered) for r in store.nondeterminism_counts("wf")]
    assert rows == [("a", 1, 0, 0), ("b", 1, 1, 0), ("c", 0, 0, 0)]


EQUAL_UP_TO_KEY_ORDER = [  # (the value an executor kept, the same content as another writer's text)
    (7, "7"), (0.1, "0.1"), (1e16, "1e+16"), (-0.0, "-0.0"), (2**80, str(2**80)), (True, "true"), (None, "null"),
    ("é\u2028\u001f\"", json.dumps("é\u2028\u001f\"")), ([1, "a", None], "[1, \"a\", null]"), ({}, "{}"),
    ({"b": [{"y": 1, "x": 2}], "a": {"d": 1, "c": 0.5}}, '{"a": {"c": 0.5, "d": 1}, "b": [{"x": 2, "y": 1}]}'),
    ({"a": 1, "b": [1, {"c": 2}]}, '{"b": [1, {"c": 2}], "a": 1}'),
]


def test_a_record_written_with_its_values_kept_digests_as_one_written_from_text_alone(store: Store):
    """An executor gives the store the values it dumped (no text parsed back); a review or a replay gives
    text alone, spelt its own way. Equal content in both is the same inputs and no variation; a different
    output for the same inputs is variation."""
    wf = add_workflow(store)

    def kept(step_id: str, inputs: dict[str, Any], value: Any) -> None:
        record = step(add_run(store, wf), wf, step_id, inputs=jsonio.dumps(inputs))
        store.insert_step_record(replace(record, output=jsonio.dumps(value), output_value=value, inputs_value=inputs))

    for n, (value, text) in enumerate(EQUAL_UP_TO_KEY_ORDER):
        kept(f"same{n}", {"n": n, "v": value}, value)
        store.insert_step_record(replace(step(add_run(store, wf), wf, f"same{n}", inputs=f'{{"v": {text}, "n": {n}}}'),
                                         output=text))
        kept(f"other{n}", {"n": n, "v": value}, value)
        store.insert_step_record(step(add_run(store, wf), wf, f"other{n}", inputs=f'{{"v": {text}, "n": {n}}}',
                                      output=[value]))
    rows = {r.step_id: (r.repeated_inputs, r.varied, r.not_covered) for r in store.nondeterminism_counts("wf")}
    assert rows == {**{f"same{n}": (1, 0, 0) for n in range(len(EQUAL_UP_TO_KEY_ORDER))},
                    **{f"other{n}": (1, 1, 0) for n in range(len(EQUAL_UP_TO_KEY_ORDER))}}


def test_report_aggregates_trajectories_outcomes_composition_and_attributions(store: Store):
    wf = add_workflow(store)
    runs = [add_run(store, wf) for _ in range(3)]
    store.insert_step_record(step(runs[0], wf, "a"))
    store.insert_step_record(step(runs[0], wf, "a", attempt=2))
    store.insert_step_record(step(runs[0], wf, "b"))
    store.insert_step_record(step(runs[1], wf, "a"))
    store.insert_step_record(step(runs[1], wf, "b", status="skipped"))
    store.add_outcome(NewOutcome(runs[0], 0.0, False, "human", "goal_achieved"))
    store.add_outcome(NewOutcome(runs[0], 0.5, True, "evaluator", "goal_achieved"))
    store.add_outcome(NewOutcome(runs[1], 1.0, True, "evaluator", "max_steps"))
    for by, cost in (("step", 2), ("step", 3), ("agent", 4)):
        store.add_attribution(NewAttribution(runs[0], "shapley", {"by": by}, [], {}, None, None, {}, cost=cost))
    add_run(store, wf, kind="counterfactual", parent_run_id=runs[0])
    assert [(t.steps, t.attempts, t.runs) for t in store.trajectory_counts("wf")] == [(0, 0, 1), (1, 1, 1),
                                                                                     (2, 3, 1)]
    summary = store.outcome_summary("wf", window=1)
    assert (summary.scored, summary.correct, summary.nonzero) == (2, 2, 2)
    assert summary.values == {0.5: 1, 1.0: 1} and summary.by_source == {"evaluator": 2}
    assert summary.by_termination == {"goal_achieved": 1, "max_steps": 1}
    assert (summary.early_mean, summary.recent_mean) == (0.5, 1.0)
    assert store.outcome_summary(None, window=5).early_mean == 0.75
    kinds = {(c.kind, c.status): c.runs for c in store.run_counts("wf")}
    assert kinds == {("run", "running"): 3, ("counterfactual", "running"): 1}
    counts = {(a.method, json.loads(a.params)["by"]): (a.records, a.cost) for a in store.attribution_counts("wf")}
    assert counts == {("shapley", "step"): (2, 5), ("shapley", "agent"): (1, 4)}


# -- the counts stay right as the data changes after a read --------------------------------------------------
#
# The stores keep the counts in a summary that each read brings up to date with what was written since the
# last one. A reference store given the same writes empties its summary before every read, so each of its
# answers is summarised from every record at once. After every change below, both must answer every
# analytics question alike: a run gaining records (one that started earlier, moving the run to another
# day), retries, a review's fix superseding records, a run's outcome turning incorrect, then being
# attributed, better attributed and corrected, runs of other workflows and replays.


class Twin:
    """Every write applied to the store under test and to a reference store (``memory://``) whose every read
    summarises from scratch; reads compared between the two."""

    def __init__(self, store: Store) -> None:
        self.store, self.reference = store, open_store("memory://")
        self.runs: dict[str, str] = {}
        self.records: dict[int, int] = {}
        self.workflows = {"wf": self.both(lambda s: add_workflow(s)), "other": self.both(
            lambda s: add_workflow(s, "other", "h2"))}

    def both(self, write: Any) -> Any:
        mine, theirs = write(self.store), write(self.reference)
        return mine, theirs

    def run(self, workflow: str = "wf", **kwargs: Any) -> str:
        mine, theirs = self.both(lambda s: add_run(s, self.workflows[workflow][s is self.reference], workflow,
                                                   **kwargs))
        self.runs[mine] = theirs
        return mine

    def record(self, run_id: str, step_id: str, workflow: str = "wf", **kwargs: Any) -> int:
        mine = self.store.insert_step_record(step(run_id, self.workflows[workflow][0], step_id, **kwargs))
        self.records[mine] = self.reference.insert_step_record(
            step(self.runs[run_id], self.workflows[workflow][1], step_id, **kwargs))
        return mine

    def outcome(self, run_id: str, correct: bool) -> None:
        self.store.add_outcome(NewOutcome(run_id, float(correct), correct, "human", "goal_achieved"))
        self.reference.add_outcome(NewOutcome(self.runs[run_id], float(correct), correct, "human", "goal_achieved"))

    def blame(self, run_id: str, who: str | None, method: str = "trace") -> None:
        for store, rid in ((self.store, run_id), (self.reference, self.runs[run_id])):
            store.add_attribution(NewAttribution(rid, method=method, params={"by": "step"}, step_credits=[],
                                                 agent_credits={}, blamed_step=who, confidence=0.5, evidence={}))

    def fix(self, run_id: str, paused: int, superseded: list[int], step_id: str = "b") -> None:
        """A reviewer's fix: ``step_id`` gets a new record and ``superseded`` records are marked superseded."""
        from orchestrator.store import NewReview

        for store, rid, ids in ((self.store, run_id, [paused, *superseded]),
                                (self.reference, self.runs[run_id], [self.records[paused],
                                                                    *(self.records[i] for i in superseded)])):
            assert store.set_run_status(rid, "paused")
            store.decide(NewReview(rid, ids[0], step_id, "edit", "ann", None, "out", output_after="fixed"),
                         new_records=[step(rid, self.workflows["wf"][store is self.reference], step_id,
                                           attempt=2, started_at=MONDAY + 50, origin="edited", output="fixed")],
                         supersede=ids[1:])

    def answers(self, store: Store, since: float | None) -> dict[str, Any]:
        def read(ask: Any) -> Any:
            if store is self.reference:
                forget_summary(store)
            return ask()

        return {"weeks": read(lambda: store.step_period_counts("wf", period="week", since=since)),
                "days": read(lambda: store.step_period_counts("wf", period="day", since=since)),
                "outcomes": sorted(read(lambda: store.outcome_counts("wf", period="day", since=since)), key=repr),
                "trajectories": read(lambda: store.trajectory_counts("wf")),
                "all trajectories": read(lambda: store.trajectory_counts(None)),
                "nondeterminism": [(n.step_id, n.repeated_inputs, n.varied, n.not_covered,
                                    n.first_record if store is self.reference else self.records[n.first_record])
                                   for n in read(lambda: store.nondeterminism_counts("wf"))]}

    def check(self) -> None:
        for since in (None, MONDAY + 2 * 3600, WEEK45 + DAY):
            mine, theirs = self.answers(self.store, since), self.answers(self.reference, since)
            for key in ("weeks", "days"):  # record ids differ between the stores: name the reference's
                mine[key] = [replace(r, first_record=self.records[r.first_record]) for r in mine[key]]
            assert mine == theirs, f"since {since}"


def test_every_count_stays_right_as_runs_change_between_reads(store: Store):
    twin = Twin(store)
    twin.check()  # nothing stored yet
    one, two = twin.run(), twin.run()
    twin.record(one, "a", started_at=MONDAY + 3 * 3600, inputs='{"q": 1}', output=1,
                gates=[gate(passed=False)], status="gate_failed")
    twin.check()
    twin.record(one, "a", attempt=2, started_at=MONDAY + 3 * 3600 + 5, inputs='{"q": 1}', output=1, gates=[gate()])
    twin.record(two, "a", started_at=MONDAY + DAY, inputs='{"q": 1}', output=2, gates=[gate()],
                llm=llm(1, 10, 5, 0.25))
    same_day = twin.run()
    twin.record(same_day, "a", started_at=MONDAY + 4 * 3600, inputs='{"q": 1}', output=1, agent="agent-z")
    twin.check()
    # a record that started before every other of run one: the run moves to the previous day, and the day
    # it leaves keeps only the other run's agent
    twin.record(one, "b", started_at=MONDAY - DAY, inputs='{"q": 2}', output=3, agent="an-earlier-agent")
    twin.check()
    twin.record(two, "b", started_at=MONDAY + DAY + 1, status="skipped", output=None)
    quiet = twin.run()  # no records yet: counted from its creation time, until records arrive
    twin.check()
    twin.record(quiet, "a", started_at=MONDAY + 7 * DAY, inputs='{"q": 1}', output=2)
    twin.run("other")
    twin.run(kind="replay")
    twin.check()
    twin.outcome(one, correct=False)
    twin.check()
    twin.blame(one, "a")
    twin.check()
    twin.blame(one, "b", method="shapley")  # explains better than the trace
    twin.outcome(two, correct=False)
    twin.check()
    twin.outcome(one, correct=True)  # corrected: no longer an incorrect outcome
    twin.check()
    paused = twin.record(quiet, "b", started_at=MONDAY + 7 * DAY + 9, status="gate_failed", gates=[gate(passed=False)])
    later = twin.record(quiet, "c", started_at=MONDAY + 7 * DAY + 10)
    twin.check()
    twin.fix(quiet, paused, [later])
    twin.check()


def test_two_handles_on_one_database_read_what_the_other_wrote(backend):
    """Each handle's read brings the shared counts up to date with the other's writes, counted once."""
    first, second = backend.connect(), backend.connect()
    wf = add_workflow(first)
    for i in range(3):
        run_id = add_run(first, wf)
        first.insert_step_record(step(run_id, wf, "a", started_at=MONDAY + i))
        assert [r.runs for r in second.step_period_counts("wf")] == [i + 1]
        assert [r.runs for r in first.step_period_counts("wf")] == [i + 1]
    assert sum(r.runs for r in second.outcome_counts("wf")) == 3


def test_a_database_this_process_may_not_write_is_counted_from_its_records(tmp_path):
    """The summary is written by reads; a read-only database gets the same counts, aggregated on each call."""
    writer = open_store(f"sqlite:///{tmp_path / 't.db'}")
    seed_steps(writer)
    writable = ({(r.step_id, r.period_start): r for r in writer.step_period_counts("wf")},
                writer.outcome_counts("wf"), writer.trajectory_counts("wf"), writer.nondeterminism_counts("wf"))
    one = add_run(writer, writer.list_runs(workflow="wf", limit=1)[0].workflow_id)
    writer.insert_step_record(step(one, 1, "a", started_at=MONDAY + 2))  # written after the last summary
    writer.close()
    reader = open_store(f"sqlite:///file:{tmp_path / 't.db'}?mode=ro")
    try:
        rows = {(r.step_id, r.period_start): r for r in reader.step_period_counts("wf")}
        assert rows[("a", WEEK45)].runs == writable[0][("a", WEEK45)].runs + 1
        assert rows[("b", WEEK45)] == writable[0][("b", WEEK45)]
        assert sum(r.runs for r in reader.outcome_counts("wf")) == sum(r.runs for r in writable[1]) + 1
        assert [(n.step_id, n.not_covered) for n in reader.nondeterminism_counts("wf")] == \
            [(n.step_id, n.not_covered + (n.step_id == "a")) for n in writable[3]]
    finally:
        reader.close()


def test_a_summary_rebuilt_from_scratch_in_small_steps_gives_the_same_counts(store: Store, monkeypatch):
    """The first read of a database never summarised (just upgraded) summarises it a chunk of records at a
    time; whatever the chunk, the counts are those of the summary built as the data arrived."""
    from orchestrator.store import sql_summary

    seed_steps(store)
    wf = store.list_runs(workflow="wf", limit=1)[0].workflow_id
    for i in range(3):  # runs read in between, then more records after the last read
        run_id = add_run(store, wf)
        store.insert_step_record(step(run_id, wf, "a", started_at=MONDAY + i * DAY, gates=[gate(passed=i != 1)]))
        store.step_period_counts("wf")
        store.insert_step_record(step(run_id, wf, "b", started_at=MONDAY + i * DAY - 9))
    store.add_outcome(NewOutcome(run_id, 0.0, False, "human", "goal_achieved"))

    def everything() -> list[Any]:
        steps = [store.step_period_counts("wf", period=p, since=s)
                 for p in ("day", "week") for s in (None, MONDAY + 3600)]
        return [*steps, store.outcome_counts("wf", period="day"), store.trajectory_counts(None),
                store.nondeterminism_counts("wf")]

    summarised = everything()
    monkeypatch.setattr(sql_summary, "CHUNK", 2)
    forget_summary(store)
    assert everything() == summarised


def seed_children(store: Store) -> None:
    """Workflow ``parent`` runs ``child`` from its step ``research`` (one run) and from each instance of its
    mapped step ``per_item`` (another run); ``child`` also runs alone once. A replay of a child run never counts."""
    parent, child = add_workflow(store, "parent", "hp"), add_workflow(store, "child", "hc")
    one = add_run(store, parent, "parent")
    store.insert_step_record(step(one, parent, "research", started_at=MONDAY + 5))
    inner = add_run(store, child, "child", kind="child", parent_run_id=one, parent_step="research")
    store.insert_step_record(step(inner, child, "retrieve", started_at=MONDAY + 1, gates=[gate(passed=False)]))
    store.insert_step_record(step(inner, child, "summarize", started_at=MONDAY + 2))
    two = add_run(store, parent, "parent")
    for i in range(2):
        item = add_run(store, child, "child", kind="child", parent_run_id=two, parent_step=f"per_item[{i}]")
        store.insert_step_record(step(item, child, "retrieve", started_at=MONDAY + DAY, gates=[gate()]))
    alone = add_run(store, child, "child")
    store.insert_step_record(step(alone, child, "retrieve", started_at=MONDAY + 2 * DAY, gates=[gate()]))
    replay = add_run(store, child, "child", kind="counterfactual", parent_run_id=inner)
    store.insert_step_record(step(replay, child, "retrieve", started_at=MONDAY, gates=[gate(passed=False)]))


def test_a_child_workflow_counts_its_runs_started_alone_and_as_child_runs(store: Store):
    seed_children(store)
    rows = {r.step_id: r for r in store.step_period_counts("child", period="week")}
    assert (rows["retrieve"].runs, rows["retrieve"].gated_runs, rows["retrieve"].gate_passes) == (4, 4, 3)
    assert rows["summarize"].runs == 1
    assert sum(o.runs for o in store.outcome_counts("child", period="week")) == 4
    assert sum(t.runs for t in store.trajectory_counts("child")) == 4
    forget_summary(store)  # summarised again from scratch: the same
    assert store.step_period_counts("child", period="week")[0].runs == 4


def test_child_step_period_counts_are_the_child_runs_one_workflow_step_started(store: Store):
    seed_children(store)
    research = {r.step_id: r for r in store.child_step_period_counts("parent", "research", period="week")}
    assert sorted(research) == ["retrieve", "summarize"]
    assert (research["retrieve"].runs, research["retrieve"].gate_passes) == (1, 0)
    mapped = store.child_step_period_counts("parent", "per_item", period="day")
    assert [(r.step_id, r.period_start, r.runs, r.gate_passes) for r in mapped] == [
        ("retrieve", WEEK45 + DAY, 2, 2)]
    assert store.child_step_period_counts("parent", "per", period="week") == []  # a prefix is no step
    assert store.child_step_period_counts("parent", "research", period="week", since=MONDAY + DAY) == []
