"""The dataset role of every store: versioned examples, experiments and the runs they link."""

from __future__ import annotations

import pytest

from orchestrator.core.errors import InputError, NotFoundError
from orchestrator.spec.datasets import ExperimentRunLink, NewExample, NewExperiment
from orchestrator.store import NewRun, Store


def test_adding_examples_makes_a_new_version_and_keeps_the_older_ones_readable(store: Store):
    first = store.add_examples("tickets", [NewExample({"q": "a"}, reference="A", label="correct",
                                                      source_run_id="r1"),
                                           NewExample({"q": "b"})], create=False, description="triage")
    assert (first.name, first.version, first.examples, first.description) == ("tickets", 1, 2, "triage")
    second = store.add_examples("tickets", [NewExample({"q": "c"}, label={"why": "x"})])
    assert (second.version, second.examples) == (2, 3)

    latest = store.examples("tickets")
    assert [(e.position, e.version, e.inputs) for e in latest] == [(1, 1, {"q": "a"}), (2, 1, {"q": "b"}),
                                                                   (3, 2, {"q": "c"})]
    assert (latest[0].reference, latest[0].label, latest[0].source_run_id) == ("A", "correct", "r1")
    assert (latest[1].reference, latest[1].label, latest[1].source_run_id) == (None, None, None)
    assert latest[2].label == {"why": "x"}
    assert [e.inputs for e in store.examples("tickets", version=1)] == [{"q": "a"}, {"q": "b"}]
    assert [d.name for d in store.datasets()] == ["tickets"]


def test_creating_a_dataset_that_exists_is_refused_and_changes_nothing(store: Store):
    store.add_examples("tickets", [NewExample({"q": "a"})], create=False)
    before = store.count_rows()
    with pytest.raises(InputError, match="dataset 'tickets' exists already"):
        store.add_examples("tickets", [NewExample({"q": "b"})], create=False)
    assert store.count_rows() == before
    assert store.dataset("tickets").version == 1


def test_unknown_datasets_versions_and_experiments_are_named(store: Store):
    with pytest.raises(NotFoundError, match="no dataset 'nope'"):
        store.examples("nope")
    store.add_examples("tickets", [NewExample({"q": "a"})])
    with pytest.raises(InputError, match="versions 1 to 1; got version 2"):
        store.examples("tickets", version=2)
    with pytest.raises(NotFoundError, match="no experiment 'nope'"):
        store.experiment("nope")


def test_ten_thousand_examples_are_stored_in_one_addition(store: Store):
    view = store.add_examples("big", [NewExample({"i": i}, reference=i) for i in range(10_000)])
    assert (view.version, view.examples) == (1, 10_000)
    assert store.count_rows()["dataset_examples"] == 10_000
    examples = store.examples("big")
    assert [e.position for e in examples[:3]] == [1, 2, 3] and examples[-1].inputs == {"i": 9_999}


def test_an_experiment_links_its_runs_to_their_examples(store: Store):
    store.add_examples("tickets", [NewExample({"q": "a"}), NewExample({"q": "b"})])
    workflow_id = store.register_workflow("w", "1", {"name": "w", "steps": []}, None, "h1")
    examples = store.examples("tickets")
    view = store.create_experiment(NewExperiment("try-1", "tickets", 1, workflow_id, "w", {"reuse": "none"}))
    assert (view.status, view.dataset, view.dataset_version, view.params) == ("running", "tickets", 1,
                                                                              {"reuse": "none"})
    with pytest.raises(InputError, match="'try-1' exists already"):
        store.create_experiment(NewExperiment("try-1", "tickets", 1, workflow_id, "w"))
    runs = [store.create_run(NewRun(workflow_id, "w", {"q": e.inputs["q"]}, kind="experiment")) for e in examples]
    store.link_experiment_runs("try-1", [
        ExperimentRunLink(examples[1].id, runs[1]),
        ExperimentRunLink(examples[0].id, runs[0], reused_steps=("retrieve",), saved_model_calls=2, saved_tokens=30,
                          saved_cost=0.5, saved_seconds=1.5)])
    links = store.experiment_runs("try-1")
    assert [(link.example_id, link.run_id) for link in links] == [(examples[0].id, runs[0]), (examples[1].id, runs[1])]
    assert (links[0].reused_steps, links[0].saved_model_calls, links[0].saved_tokens, links[0].saved_cost,
            links[0].saved_seconds) == (("retrieve",), 2, 30, 0.5, 1.5)
    store.finish_experiment("try-1", "finished", {"runs": 2})
    assert (store.experiment("try-1").status, store.experiment("try-1").summary) == ("finished", {"runs": 2})
    assert [e.name for e in store.experiments(dataset="tickets")] == ["try-1"]
    store.add_examples("other", [NewExample({"q": "c"})])
    assert store.experiments(dataset="other") == []
