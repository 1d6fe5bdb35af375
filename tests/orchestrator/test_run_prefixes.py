"""Run ids carry 96 random bits, and every command that takes a run accepts a unique prefix of its id,
as git takes a commit's: an ambiguous prefix is exit 2 naming the runs it begins, an unknown one the
usual not-found message, and neither stores anything.
"""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from orchestrator import Orchestrator
from orchestrator.core.errors import InputError, NotFoundError
from orchestrator.store import open_store
from tests.conftest import FIXTURES

GATED = FIXTURES / "gated.yaml"

RUN_COMMANDS = [
    ("show",), ("resume",), ("approve",), ("retry",), ("reject",), ("edit", "--output", "{edit}"),
    ("label", "--correct"), ("trace",), ("attribute", "--method", "trace"), ("replay", "--from", "src"),
]
"""Every command that takes a RUN, with the options it needs besides."""


def paused_run(cli) -> str:
    result = cli("run", str(GATED), "--json")
    assert result.exit_code == 3, result.stderr
    return str(result.json()["run_id"])


def unique_prefix(run_id: str, others: list[str]) -> str:
    """The shortest prefix of ``run_id`` that begins no other id, at least 5 characters."""
    for size in range(5, len(run_id)):
        if not any(other.startswith(run_id[:size]) for other in others):
            return run_id[:size]
    raise AssertionError("ids differ")


def stored(db_url: str) -> dict[str, int]:
    store = open_store(db_url)
    try:
        return store.count_rows()
    finally:
        store.close()


def test_run_ids_carry_96_random_bits(cli) -> None:
    ids = [paused_run(cli) for _ in range(3)]
    assert all(re.fullmatch(r"r[0-9a-f]{24}", run_id) for run_id in ids), ids
    assert len(set(ids)) == 3


@pytest.mark.parametrize("command", RUN_COMMANDS, ids=lambda c: c[0])
def test_an_ambiguous_prefix_is_exit_2_naming_the_runs_and_stores_nothing(cli, db_url, tmp_path, command) -> None:
    first, second = paused_run(cli), paused_run(cli)
    shared = os.path.commonprefix([first, second])  # at least "r"
    edit = tmp_path / "edit.json"
    edit.write_text('{"score": 0.9}')
    before = stored(db_url)
    result = cli(command[0], shared, *(arg.format(edit=edit) for arg in command[1:]))
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"run id {shared!r} is ambiguous" in lines[0], result.stderr
    assert first in lines[0] and second in lines[0] and "gated, paused" in lines[0]
    assert stored(db_url) == before


@pytest.mark.parametrize("command", RUN_COMMANDS, ids=lambda c: c[0])
def test_an_unknown_prefix_is_the_usual_not_found_message(cli, db_url, tmp_path, command) -> None:
    paused_run(cli)
    edit = tmp_path / "edit.json"
    edit.write_text('{"score": 0.9}')
    before = stored(db_url)
    result = cli(command[0], "r0zz", *(arg.format(edit=edit) for arg in command[1:]))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: no run 'r0zz' in sqlite:///{db_url.split('///')[1]}; list runs with `orchestrator runs`"]
    assert stored(db_url) == before


def test_every_command_acts_on_the_run_a_unique_prefix_names(cli, db_url, tmp_path) -> None:
    approved, edited, retried, rejected, resumed = (paused_run(cli) for _ in range(5))
    ids = [approved, edited, retried, rejected, resumed]

    def short(run_id: str) -> str:
        return unique_prefix(run_id, [other for other in ids if other != run_id])

    shown = cli("show", short(approved), "--json")
    assert shown.exit_code == 0 and shown.json()["run_id"] == approved
    assert cli("approve", short(approved), "--json").json()["status"] == "succeeded"
    edit = tmp_path / "edit.json"
    edit.write_text('{"score": 0.9}')
    assert cli("edit", short(edited), "--output", str(edit), "--json").json()["status"] == "succeeded"
    assert cli("retry", short(retried), "--json").json()["status"] == "paused"  # the same score fails again
    assert cli("reject", short(rejected), "--json").json()["status"] == "rejected"
    resumed_doc = cli("resume", short(resumed), "--json").json()
    assert resumed_doc["run_id"] == resumed and resumed_doc["status"] == "paused"
    labelled = cli("label", short(approved), "--incorrect", "--json").json()
    assert labelled["run_id"] == approved
    assert cli("trace", short(approved), "--json").json()["run_id"] == approved
    assert cli("attribute", short(approved), "--method", "trace", "--json").json()["run_id"] == approved
    forked = cli("replay", short(approved), "--from", "src", "--json")
    assert forked.exit_code == 0, forked.stderr
    store = open_store(db_url)
    try:
        assert store.get_run(forked.json()["run_id"]).parent_run_id == approved
        assert [o.correct for o in store.outcomes(approved)] == [False]
    finally:
        store.close()


def test_the_python_api_takes_a_unique_prefix_too(db_url) -> None:
    with Orchestrator(db_url) as orch:
        first = orch.run(GATED).run_id
        second = orch.run(GATED).run_id
        prefix = unique_prefix(first, [second])
        assert orch.get_run(prefix).run_id == first
        assert orch.approve(prefix).status == "succeeded"
        assert orch.label(prefix, correct=False).run_id == first
        assert orch.trace(prefix).run_id == first
        with pytest.raises(InputError, match="is ambiguous"):
            orch.get_run(os.path.commonprefix([first, second]))
        with pytest.raises(NotFoundError, match="no run 'r0zz'"):
            orch.get_run("r0zz")
        assert asyncio.run(orch.areject(unique_prefix(second, [first]))).status == "rejected"
