"""What only the in-memory store promises: it is chosen by ``memory://``, each one is its own
database, and it never imports SQLAlchemy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import NotFoundError
from orchestrator.store import NewAttribution, open_store
from orchestrator.store.memory import MemoryStore
from tests.store.rows import add_run, add_workflow

REPO = Path(__file__).resolve().parents[2]


def test_memory_url_opens_a_memory_store_named_by_its_url():
    store = open_store("memory://")
    assert isinstance(store, MemoryStore)
    assert store.url == store.display_url == "memory://"


def test_each_memory_store_is_a_separate_database():
    one, two = open_store("memory://"), open_store("memory://")
    add_run(one, add_workflow(one))
    assert len(one.list_runs()) == 1
    assert two.list_runs() == [] and set(two.count_rows().values()) == {0}


def test_a_memory_store_works_without_importing_sqlalchemy():
    code = ("import sys\n"
            "from orchestrator.store import open_store, NewStepRecord\n"
            "s = open_store('memory://')\n"
            "wf = s.register_workflow('wf', '1', {}, None, 'h')\n"
            "r = s.create_run(wf, 'wf', {})\n"
            "s.insert_step_record(NewStepRecord(r, wf, 'a', 'python', 'a', 1, 'succeeded', 1.0, 2.0, output='1'))\n"
            "assert s.step_records(r)[0].output == 1 and s.count_rows()['step_records'] == 1\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'sqlmodel')))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_memory_store_refuses_references_to_rows_it_does_not_hold():
    """What the SQL stores' foreign keys refuse (there as sqlalchemy's IntegrityError)."""
    store = open_store("memory://")
    run_id = add_run(store, add_workflow(store))
    with pytest.raises(NotFoundError, match="workflow definition 99 is not stored"):
        store.create_run(99, "wf", {})
    with pytest.raises(NotFoundError, match="outcome 7 is not stored"):
        store.add_attribution(NewAttribution(run_id, "m", {}, [], {}, None, None, {}, outcome_id=7))
    assert (store.count_rows()["runs"], store.count_rows()["attributions"]) == (1, 0)
