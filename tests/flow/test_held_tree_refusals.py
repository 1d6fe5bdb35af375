"""A decision refused because the tree's root is held says who holds it and for how long, read from the
root's stored row: ``being executed by host:pid (its lease runs N s more)``; a root left ``running`` with no
process holding its lease (a decision stored without a lease to continue it) says exactly that, never a
made-up holder. Nothing is decided either way."""

from __future__ import annotations

import re

from orchestrator.store import Lease, open_store
from tests.flow.conftest import FLOW


def _paused_tree(cli) -> dict:
    res = cli("run", str(FLOW / "tree_review.yaml"), "--json")  # waits at research > retrieve
    assert res.exit_code == 3, res.stderr
    return res.json()


def test_a_rejection_ending_a_held_root_names_its_holder_and_the_time_its_lease_has_left(cli, db_url):
    doc = _paused_tree(cli)
    store = open_store(db_url)
    held = Lease(doc["run_id"], "worker-7.example:4242", "0123456789abcdef", 60.0)
    assert store.acquire_lease(held, statuses=("paused",))  # another host's worker continues the root
    res = cli("reject", doc["run_id"], "--step", "research > retrieve")
    assert res.exit_code == 2
    message = res.stderr.strip()
    assert re.search(rf"run {doc['run_id']}, the root of the tree, is being executed by worker-7\.example:4242 "
                     r"\(its lease runs (\d+\.\d) s more\); nothing was decided", message), message
    left = float(re.search(r"runs (\d+\.\d) s more", message)[1])  # type: ignore[index]
    assert 0 < left <= 60.0
    assert "?" not in message
    assert store.reviews(doc["children"][0]["run_id"]) == []


def test_a_root_running_without_a_holder_is_said_to_have_none(cli, db_url):
    doc = _paused_tree(cli)
    store = open_store(db_url)
    # what a decision stored without a lease leaves: the root running, and no process holding it
    assert store.set_run_status(doc["run_id"], "running", expect=("paused",), holder=None)
    res = cli("reject", doc["run_id"], "--step", "research > retrieve")
    assert res.exit_code == 2
    assert (f"run {doc['run_id']}, the root of the tree, is running with no process holding its lease; nothing "
            "was decided") in res.stderr
    assert "?" not in res.stderr
    assert store.reviews(doc["children"][0]["run_id"]) == []
