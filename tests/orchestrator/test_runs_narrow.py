"""`orchestrator runs` at any width: one line per run within the terminal's columns, each run named by the
shortest unique prefix of its id (8 characters or more, which `show` takes), a run paused in many places
by the first place and a count, the least important columns left out when they do not fit, no column
without a value; `--full` prints whole ids and every place; `--json` keeps whole ids and every path."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from rich.console import Console

from orchestrator.cli.run_list import runs_table
from orchestrator.store import NewRun, Store, open_store
from orchestrator.store.delegating import DelegatingStore, concrete
from orchestrator.store.run_prefix import short_run_ids
from tests.conftest import FIXTURES, _cli_on, listed_row

FLOW = Path(__file__).parent.parent / "fixtures" / "flow"
CHILDREN = 12


def run(cli, path: str, *inputs: str) -> str:
    result = cli("run", path, *(arg for pair in inputs for arg in ("--input", pair)), "--json")
    assert result.exit_code in (0, 3), result.stderr
    return str(result.json()["run_id"])


@pytest.fixture(scope="module")
def page_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, str]]:
    """A page a reviewer triages, read by every test of the listing (none changes it): a map of CHILDREN
    child runs each paused inside, a run paused at a gate, one approved despite its gate and labelled
    incorrect (an outcome and a blamed step), one succeeded. The CLI on that database, and the run ids."""
    cli = _cli_on(f"sqlite:///{tmp_path_factory.mktemp('page') / 'orchestrator.db'}")
    runs = {"tree": run(cli, str(FLOW / "tree_map.yaml"), f"count={CHILDREN}",
                        f"unclear={json.dumps(list(range(CHILDREN)))}"),
            "paused": run(cli, str(FIXTURES / "gated.yaml"), "x=1"),
            "wrong": run(cli, str(FIXTURES / "gated.yaml"), "x=1"),
            "plain": run(cli, str(FIXTURES / "gated.yaml"), "x=9")}
    assert cli("approve", runs["wrong"]).exit_code == 0
    assert cli("label", runs["wrong"], "--incorrect").exit_code == 0
    return cli, runs


@pytest.fixture
def cli(page_db: tuple[Any, dict[str, str]]) -> Any:
    """The CLI on the page's database."""
    return page_db[0]


@pytest.fixture
def page(page_db: tuple[Any, dict[str, str]]) -> dict[str, str]:
    return page_db[1]


@pytest.mark.parametrize("columns", [40, 80, 120])
def test_every_run_is_one_line_within_the_terminals_width(cli, page, columns):
    result = cli("runs", columns=columns)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns, result.stdout
    assert len(lines) == 1 + len(page)  # the header, then a line per run
    for run_id in page.values():
        assert listed_row(result.stdout, run_id).split()[1] in ("gated", "tree-map")


def test_at_80_columns_a_run_shows_its_state_where_it_waits_and_a_count_of_the_other_places(cli, page):
    result = cli("runs", columns=80)
    header = result.stdout.splitlines()[0].split()
    assert header[:3] == ["run", "workflow", "status"] and "paused" in header
    tree = listed_row(result.stdout, page["tree"])
    assert "paused" in tree and re.search(rf"per_ticket\[0\].* \+{CHILDREN - 1} more", tree), tree
    assert "scored" in listed_row(result.stdout, page["paused"])


def test_a_wide_terminal_shows_the_first_place_whole_and_the_reason(cli, page):
    result = cli("runs", columns=200)
    tree = listed_row(result.stdout, page["tree"])
    assert f"per_ticket[0] > classify +{CHILDREN - 1} more" in tree
    assert "field 'confidence' = 0.2 is below min 0.5" in tree
    assert "per_ticket[1]" not in result.stdout
    assert "0.00 incorrect" in listed_row(result.stdout, page["wrong"])
    assert "scored" in listed_row(result.stdout, page["wrong"]).split("incorrect")[1]  # the blamed step


def test_the_least_important_columns_give_way_first(cli, page):
    def header(columns: int) -> list[str]:
        return cli("runs", columns=columns).stdout.splitlines()[0].replace("paused at", "paused_at").split()

    assert header(200) == ["run", "workflow", "status", "age", "outcome", "paused_at", "reason", "blamed"]
    assert header(80) == ["run", "workflow", "status", "age", "paused_at", "reason"]
    assert header(40) == ["run", "workflow", "status", "age"]
    assert header(20) == ["run", "status"]


def test_a_column_no_listed_run_has_a_value_for_is_left_out(db_url):
    fresh = _cli_on(db_url)
    run(fresh, str(FIXTURES / "ok.yaml"))
    header = fresh("runs").stdout.splitlines()[0].split()
    assert header == ["run", "workflow", "status", "age"]
    assert fresh("runs", "--status", "failed").stdout == "no runs\n"


def test_the_prefix_shown_for_each_run_is_what_show_takes(cli, page):
    table = cli("runs", columns=80).stdout
    for run_id in page.values():
        prefix = listed_row(table, run_id).split()[0]
        assert len(prefix) == 8 and run_id.startswith(prefix)
        shown = cli("show", prefix, "--json")
        assert shown.exit_code == 0, shown.stderr
        assert shown.json()["run_id"] == run_id


@pytest.fixture
def chosen_ids() -> Iterator[list[str]]:
    """Runs created from here on get the ids of the list, in order (as if random ids had collided)."""
    ids: list[str] = []
    taken = iter(ids)
    with mock.patch("orchestrator.store.sqlite.new_run_id", lambda: next(taken)), \
            mock.patch("orchestrator.store.sql.new_run_id", lambda: next(taken)):
        yield ids


def test_a_prefix_grows_until_it_names_one_run_and_an_older_exact_id_wins(durable_url, chosen_ids):
    """`r1234567` is a whole (older, shorter) id, and three newer ids begin with it; two share 11 characters."""
    chosen_ids += ["r1234567", "r12345670000000000000000a", "r1234567abc0000000000000b", "r1234567abd000000000000c",
                   "r7654321000000000000000d"]
    store = open_store(durable_url)
    wf = store.register_workflow("ids", "1", {"name": "ids", "steps": []}, None, "h")
    for _ in chosen_ids:
        store.create_run(NewRun(wf, "ids", {}, status="succeeded"))
    store.close()
    cli = _cli_on(durable_url)
    table = cli("runs", columns=80).stdout
    prefixes = {run_id: listed_row(table, run_id).split()[0] for run_id in chosen_ids}
    assert prefixes == {"r1234567": "r1234567", "r12345670000000000000000a": "r12345670",
                        "r1234567abc0000000000000b": "r1234567abc", "r1234567abd000000000000c": "r1234567abd",
                        "r7654321000000000000000d": "r7654321"}
    for run_id, prefix in prefixes.items():
        assert cli("show", prefix, "--json").json()["run_id"] == run_id


class ReadsCounted(DelegatingStore):
    """A store that counts the reads of run ids by prefix, then hands them to the store underneath."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.url = store.url
        self.reads: Counter[str] = Counter()

    def target(self) -> Store:
        return self.store

    def run_ids_starting(self, prefix: str, *, limit: int) -> list[str]:
        self.reads["run_ids_starting"] += 1
        return self.store.run_ids_starting(prefix, limit=limit)

    def run_ids_starting_any(self, prefixes: Sequence[str], *, limit: int) -> list[str]:
        self.reads["run_ids_starting_any"] += 1
        return self.store.run_ids_starting_any(prefixes, limit=limit)


def test_a_page_of_runs_is_named_with_one_read_and_a_run_sharing_its_first_characters_with_one_more(
        durable_url, chosen_ids):
    chosen_ids += [f"r{n:07x}{n:017x}" for n in range(30)] + ["r0000001f" + "0" * 16]
    store = open_store(durable_url)
    wf = store.register_workflow("ids", "1", {"name": "ids", "steps": []}, None, "h")
    for _ in chosen_ids:
        store.create_run(NewRun(wf, "ids", {}, status="succeeded"))
    counted = concrete(ReadsCounted)(store)
    page = chosen_ids[2:30]
    assert short_run_ids(counted, page) == {run_id: run_id[:8] for run_id in page}
    assert counted.reads == Counter({"run_ids_starting_any": 1})
    assert short_run_ids(counted, chosen_ids[:2]) == {chosen_ids[0]: "r0000000", chosen_ids[1]: "r00000010"}
    assert counted.reads == Counter({"run_ids_starting_any": 2, "run_ids_starting": 2})  # the run sharing
    # "r0000001" with another is read again on its own, from its first 8 characters, then from 9
    store.close()


def test_full_prints_whole_ids_and_every_place_a_run_waits(cli, page):
    table = cli("runs", "--full").stdout
    for run_id in page.values():
        assert listed_row(table, run_id).startswith(run_id + " ")
    tree = listed_row(table, page["tree"])
    assert "per_ticket[0] > classify, per_ticket[1] > classify" in tree
    assert " more" not in table
    assert f"per_ticket[{CHILDREN - 1}] > classify" in table


def test_json_keeps_whole_ids_and_every_path(cli, page):
    docs = {d["run_id"]: d for d in cli("runs", "--json", columns=80).json()}
    assert set(docs) == set(page.values())
    tree = docs[page["tree"]]
    assert tree["waiting_step"] == "per_ticket[0] > classify"
    assert sorted(tree["waiting_steps"]) == sorted(f"per_ticket[{i}] > classify" for i in range(CHILDREN))


def rendered(docs: list[dict[str, Any]], width: int) -> list[str]:
    """The table of ``runs_page_document`` rows as a terminal ``width`` columns wide shows it."""
    console = Console(width=width, file=io.StringIO(), force_terminal=True, color_system=None, record=True)
    console.print(runs_table(docs, lambda run_id: run_id[:8], width=width), soft_wrap=False)
    return console.export_text().splitlines()


def listed(run_id: str, **keys: Any) -> dict[str, Any]:
    return {"run_id": run_id, "workflow": "research", "status": "paused", "created_at": "2026-01-01T00:00:00+00:00",
            "outcome": None, "correct": None, "blamed_step": None, "waiting_steps": [], "gate_reason": None, **keys}


def test_a_reason_of_several_lines_stays_on_the_runs_line():
    docs = [listed("r1111111aaaa", waiting_steps=["critique"], gate_reason="too short:\nneeds 3 sources\r\ngot 1")]
    lines = rendered(docs, 200)
    assert len(lines) == 2 and "too short: ⏎ needs 3 sources ⏎ got 1" in lines[1]


def test_runs_that_called_a_model_show_tokens_and_cost_where_they_fit():
    usage = {"input_tokens": 1200, "output_tokens": 340, "cost": 0.0123, "calls": 2}
    docs = [listed("r1111111aaaa", status="succeeded", llm=usage, outcome=1.0, correct=True),
            listed("r2222222bbbb", waiting_steps=[f"draft#{i}" for i in range(40, 0, -1)], gate_reason="too long")]
    wide = rendered(docs, 200)
    assert wide[0].split() == ["run", "workflow", "status", "age", "outcome", "paused", "at", "reason", "tokens",
                               "cost"]
    assert "1200/340" in wide[1] and "$0.0123" in wide[1] and "draft#40 +39 more" in wide[2]
    for width in (80, 60):
        lines = rendered(docs, width)
        assert len(lines) == 3 and max(len(line) for line in lines) <= width
