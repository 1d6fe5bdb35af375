"""Store behaviour that every face relies on, independent of the executor."""

from __future__ import annotations

from orchestrator.bind.loader import load_workflow
from orchestrator.service.runner import start_run
from orchestrator.store import NewAttribution, NewOutcome, open_store
from tests.conftest import FIXTURES


def test_a_fresh_store_can_add_outcomes_and_attributions_to_an_existing_run(db_url):
    run_id = start_run(open_store(db_url), load_workflow(FIXTURES / "ok.yaml"), {}).run_id
    fresh = open_store(db_url)  # nothing cached: the run's key is looked up inside the write
    outcome_id = fresh.add_outcome(NewOutcome(run_id, value=0.0, correct=False, source="human",
                                              termination="goal_achieved"))
    fresh2 = open_store(db_url)
    fresh2.add_attribution(NewAttribution(run_id, method="trace", params={}, step_credits=[], agent_credits={},
                                          blamed_step=None, confidence=None, evidence={}, outcome_id=outcome_id))
    assert [o.id for o in open_store(db_url).outcomes(run_id)] == [outcome_id]
    assert open_store(db_url).attributions(run_id)[0].outcome_id == outcome_id


def test_bytes_are_small_for_small_steps(db_url):
    """Step inputs taken from other steps are stored as links, not copies."""
    store = open_store(db_url)
    run_id = start_run(store, load_workflow(FIXTURES / "ok.yaml"), {}).run_id
    total = store.latest_records(run_id)["total"]
    assert set(total.inputs) == {"a", "b"}
    assert all(set(v) == {"$record"} for v in total.inputs.values())


def test_sqlite_synchronous_level_is_chosen_in_the_url(tmp_path):
    import sqlite3  # noqa: F401

    store = open_store(f"sqlite:///{tmp_path / 'full.db'}?synchronous=full")
    assert store.synchronous == "full"
    assert store.connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    normal = open_store(f"sqlite:///{tmp_path / 'normal.db'}")
    assert normal.connection.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_unknown_synchronous_level_is_a_clear_error(cli, tmp_path):
    from tests.conftest import FIXTURES

    result = cli("run", str(FIXTURES / "ok.yaml"), "--db", f"sqlite:///{tmp_path / 'x.db'}?synchronous=fast", db=False)
    assert result.exit_code == 2
    assert "synchronous='fast' is not supported; choose one of ['normal', 'full']" in result.stderr


def test_a_database_that_cannot_be_opened_is_exit_2_with_one_line(cli):
    for url, detail in (("nonsense://x", "Can't load plugin"),
                        ("mysql://x/y", "MySQLdb")):
        result = cli("runs", "--db", url, db=False)
        assert result.exit_code == 2, url
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: cannot open the database"), result.stderr
        assert detail in lines[0]


def test_a_database_server_that_does_not_answer_past_the_retries_is_exit_1_with_one_line(cli, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_DB_RETRY_SECONDS", "0")  # no retry: the first refusal is the last
    result = cli("runs", "--db", "postgresql://nobody@127.0.0.1:1/none", db=False)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot open the database 127.0.0.1:1/none: it did not "
                                                   "answer (1 try over 0.0 s): "), result.stderr
    assert "connection" in lines[0] and lines[0].endswith("check --db or ORCHESTRATOR_DB")
