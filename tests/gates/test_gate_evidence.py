from __future__ import annotations

import pytest

from gates import Evidence, GateConfigError, evaluate

DOCS = [{"id": "doc-1", "title": "A"}, {"id": "doc-2", "title": "B"}, {"id": "doc-3", "title": "C"}]


def test_evidence_passes_when_the_output_cites_a_retrieved_id(build, make_ctx):
    gate = build({"gate": "evidence", "source": "retrieve"}, step_id="summarize")
    output = {"summary": "Vendor B is cheapest [doc-2].", "notes": ["see doc-3"]}
    result = gate.check(output, make_ctx(retrieve=DOCS))
    assert result.passed
    assert result.reason == "cites 2 of 3 ids from step 'retrieve': 'doc-2', 'doc-3'"
    assert result.details["cited"] == ["doc-2", "doc-3"]


def test_evidence_fails_when_no_retrieved_id_is_cited(build, make_ctx):
    gate = build({"gate": "evidence", "source": "retrieve"}, step_id="summarize")
    result = gate.check("Vendor B is cheapest, trust me (doc-12).", make_ctx(retrieve=DOCS))
    assert not result.passed
    assert result.score == 0.0
    assert result.reason == "none of the 3 ids from step 'retrieve' is cited (ids: 'doc-1', 'doc-2', 'doc-3')"


def test_evidence_fails_when_fewer_than_min_refs_are_cited(build, make_ctx):
    gate = build({"gate": "evidence", "source": "retrieve", "min_refs": 2, "field": "summary"})
    result = gate.check({"summary": "per doc-1", "appendix": "doc-2"}, make_ctx(retrieve=DOCS))
    assert not result.passed
    assert result.score == 0.5
    assert result.reason == "cites 1 of 3 ids from step 'retrieve' in field 'summary': 'doc-1' (need 2)"


def test_evidence_reads_ids_from_a_list_inside_a_dict_source(build, make_ctx):
    source = {"query": "q", "results": [{"meta": {"key": 17}}, {"meta": {"key": 23}}]}
    gate = build({"gate": "evidence", "source": "search", "source_field": "results", "id_field": "meta.key"})
    assert gate.check({"refs": [23]}, make_ctx(search=source)).passed
    assert not gate.check({"refs": [123]}, make_ctx(search=source)).passed


def test_evidence_fails_with_reason_when_the_source_has_no_ids_or_no_output(build, make_ctx):
    gate = build({"gate": "evidence", "source": "retrieve"})
    assert gate.check("x", make_ctx(retrieve=[{"title": "no id"}])).reason == \
        "step 'retrieve' produced no ids ('id' in 1 items)"
    assert gate.check("x", make_ctx()).reason == "step 'retrieve' has no recorded output to cite from"


def test_evidence_declares_the_upstream_step_it_reads():
    assert Evidence(source="retrieve").upstream_steps() == ("retrieve",)


def test_evidence_through_evaluate_reports_the_verdict(make_ctx):
    evaluation = evaluate(Evidence(source="retrieve"), "evidence", "nothing cited", make_ctx(retrieve=DOCS))
    assert not evaluation.result.passed
    assert evaluation.gate == "evidence"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "step 'summarize' gate 'evidence': missing required parameter 'source'"),
        ({"source": "retrieve", "min_refs": 0}, "parameter 'min_refs' must be an integer >= 1, got 0"),
        ({"source": "retrieve", "id": "doc_id"}, "unknown parameter 'id'; valid: field, id_field, min_refs, "
                                                 "source, source_field"),
    ],
)
def test_evidence_rejects_bad_configuration(build, params, message):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "evidence", **params}, step_id="summarize")
    assert message in str(err.value)
