"""The typed Python API: the whole review loop, sync and async, with the CLI's JSON shapes."""

from __future__ import annotations

import asyncio
import typing
from pathlib import Path

import pytest

from orchestrator import Orchestrator, RunDetail, Workflow
from orchestrator.api import AttributionDetail, LabelDetail, RunList
from orchestrator.attribution.stats import StatsReport
from orchestrator.core.errors import InputError, ReviewError
from orchestrator.service.runner import InsideEventLoopError
from tests.conftest import FIXTURES

GATED = FIXTURES / "gated.yaml"
"""x defaults to 1, which pauses at `scored` (score 0.1 < 0.5); x=9 succeeds."""

hello = Workflow("api-hello", inputs={"name": "string"}, output="shout")


@hello.step(type="retrieval")
def greet(name: str) -> dict:
    return {"text": f"hello {name}"}


@hello.step(inputs={"greeting": "greet.text"}, gates=[{"gate": "max_words", "limit": 1}])
def shout(greeting: str) -> str:
    return greeting.upper()


@pytest.fixture
def orch(db_url: str):
    with Orchestrator(db_url, reviewer="ann") as o:
        yield o


def test_a_paused_run_is_edited_continued_labelled_and_attributed(orch: Orchestrator, cli):
    run = orch.run(GATED)
    assert (run.status, run.paused_steps, run.inputs) == ("paused", ["scored"], {"x": 1})
    assert run.step("scored").gates[0].passed is False
    assert run == RunDetail.model_validate(cli("show", run.run_id, "--json").json())  # the show --json shape
    done = orch.edit(run.run_id, {"score": 0.9}, comment="checked by hand")
    assert (done.status, done.output) == ("succeeded", 1.8 + 1)  # after_scored doubles 0.9; final adds src (1)
    assert [(r.decision, r.reviewer, r.comment) for r in done.reviews] == [("edit", "ann", "checked by hand")]
    label = orch.label(run.run_id, correct=False)
    assert isinstance(label, LabelDetail) and (label.correct, label.blamed_step) == (False, "scored")
    trace = orch.trace(run.run_id)
    assert isinstance(trace, AttributionDetail) and trace.blamed_step == "scored"
    again = orch.attribute(run.run_id, method="trace")
    assert again.candidates[0].step_id == "scored"
    assert orch.list_runs(blamed="scored", outcome="incorrect").runs[0].run_id == run.run_id


def test_approve_retry_and_reject_each_answer_the_pause(orch: Orchestrator):
    approved = orch.approve(orch.run(GATED).run_id, comment="fine")
    assert approved.status == "succeeded" and approved.step("scored").origin == "approved"
    retried = orch.retry(orch.run(GATED).run_id)
    assert retried.status == "paused" and retried.step("scored").attempt == 2  # the same input fails again
    rejected = orch.reject(retried.run_id, step="scored", comment="wrong data")
    assert rejected.status == "rejected" and rejected.reviews[-1].decision == "reject"
    with pytest.raises(ReviewError, match="not paused"):
        orch.approve(rejected.run_id)


def test_a_python_workflow_object_runs_pauses_and_continues(orch: Orchestrator):
    run = orch.run(hello, {"name": "ada"})
    assert (run.status, run.paused_steps) == ("paused", ["shout"])
    done = orch.approve(run.run_id)
    assert (done.status, done.output) == ("succeeded", "HELLO ADA")


def test_list_runs_pages_and_filters_like_the_cli(orch: Orchestrator):
    paused = orch.run(GATED).run_id
    ok = [orch.run(GATED, {"x": 9}).run_id for _ in range(2)]
    page = orch.list_runs(limit=2)
    assert isinstance(page, RunList) and [r.run_id for r in page.runs] == ok[::-1]
    assert (page.total, page.more) == (3, True)
    rest = orch.list_runs(limit=2, offset=2)
    assert [r.run_id for r in rest.runs] == [paused] and not rest.more
    assert (rest.runs[0].waiting_step, rest.runs[0].gate_reason is not None) == ("scored", True)
    assert [r.run_id for r in orch.list_runs(status="paused").runs] == [paused]
    assert orch.list_runs(since="2999-01-01").total == 0
    with pytest.raises(InputError, match="--kind 'fork'"):
        orch.list_runs(kind="fork")  # type: ignore[arg-type]


def test_stats_and_replay_return_the_json_contract_models(orch: Orchestrator):
    run = orch.run(GATED, {"x": 9})
    fork = orch.replay(run.run_id, from_step="final", output=100)
    assert fork.status == "succeeded" and fork.output == 100 and fork.run_id != run.run_id
    assert [r.run_id for r in orch.list_runs(kind="replay").runs] == [fork.run_id]
    stats = orch.stats("gated")
    assert isinstance(stats, StatsReport) and {s.step_id for s in stats.steps} >= {"src", "scored", "final"}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_async_twins_run_the_review_loop_on_the_callers_loop(orch: Orchestrator, anyio_backend):
    ticks = 0

    async def ticker() -> None:  # proves the loop is not blocked while runs execute
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    run = await orch.arun(GATED)  # the sleepy branch takes 0.3 s
    assert (run.status, run.inputs) == ("paused", {"x": 1})  # defaults applied on the async path too
    done = await orch.aedit(run.run_id, {"score": 0.9})
    assert done.status == "succeeded"
    approved = await orch.aapprove((await orch.arun(GATED)).run_id)
    assert approved.status == "succeeded"
    retried = await orch.aretry((await orch.arun(GATED)).run_id)
    assert retried.status == "paused"
    rejected = await orch.areject(retried.run_id)
    assert rejected.status == "rejected"
    task.cancel()
    assert ticks > 20


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_blocking_methods_inside_a_running_loop_name_their_async_twin(orch: Orchestrator, anyio_backend,
                                                                            store):
    with pytest.raises(InsideEventLoopError, match=r"use await Orchestrator.arun\(\.\.\.\) instead"):
        orch.run(GATED)
    with pytest.raises(InsideEventLoopError, match=r"Orchestrator.approve\(\) .* use await Orchestrator.aapprove"):
        orch.approve("r-none")
    from orchestrator.bind.loader import load_workflow
    from orchestrator.service.runner import start_run

    with pytest.raises(InsideEventLoopError, match=r"start_run\(\) cannot run inside a running event loop"):
        start_run(store, load_workflow(GATED), {})
    assert orch.list_runs().total == 0  # refused before anything was stored


def test_a_workflow_of_the_wrong_type_is_an_input_error(orch: Orchestrator):
    with pytest.raises(InputError, match="got int"):
        orch.run(42)  # type: ignore[arg-type]


def test_the_store_is_closed_with_the_context(db_url: str):
    with Orchestrator(db_url) as orch:
        orch.run(GATED, {"x": 9})
    assert Orchestrator(db_url).list_runs().total == 1


def test_public_methods_have_real_types_not_any():
    """Every public method's parameters and return type are annotated, and no return type is Any."""
    for name in dir(Orchestrator):
        if name.startswith("_") or not callable(getattr(Orchestrator, name)):
            continue
        method = getattr(Orchestrator, name)
        hints = typing.get_type_hints(method)
        assert "return" in hints, name
        assert hints["return"] is not typing.Any, name
        params = [p for p in method.__code__.co_varnames[1:method.__code__.co_argcount
                                                         + method.__code__.co_kwonlyargcount]]
        assert set(params) <= set(hints), (name, set(params) - set(hints))
        assert method.__doc__, f"{name} has no docstring"


@pytest.mark.slow
def test_mypy_strict_sees_no_any_in_a_script_using_the_api(tmp_path: Path):
    import subprocess
    import sys

    script = tmp_path / "use_api.py"
    script.write_text(
        "from orchestrator import Orchestrator\n"
        "with Orchestrator('memory://') as orch:\n"
        "    run = orch.run('w.yaml', {'x': 1})\n"
        "    status: str = run.status\n"
        "    reveal_type(run)\n"
        "    reveal_type(orch.list_runs().runs[0].waiting_step)\n"
        "    reveal_type(orch.label(run.run_id, correct=False).blamed_step)\n"
        "    reveal_type(orch.attribute(run.run_id, method='shapley').candidates[0].credit)\n")
    found = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--disallow-any-expr", "--follow-imports=silent",
                            "--cache-dir", str(tmp_path / ".mypy"), str(script)],
                           capture_output=True, text=True, cwd=Path(__file__).parents[2])
    notes = [line.split(": ", 1)[1] for line in found.stdout.splitlines() if line.startswith(str(script))]
    assert notes == ['note: Revealed type is "orchestrator.api.RunDetail"',
                     'note: Revealed type is "str | None"',
                     'note: Revealed type is "str | None"',
                     'note: Revealed type is "float"'], found.stdout
