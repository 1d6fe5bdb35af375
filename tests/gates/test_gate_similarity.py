from __future__ import annotations

import importlib.util

import pytest

from gates import GateConfigError, Similarity
from gates import similarity as similarity_module
from gates.similarity import lexical_similarity


def test_lexical_similarity_is_cosine_over_word_counts():
    assert lexical_similarity("a b", "a b") == pytest.approx(1.0)
    assert lexical_similarity("a a b", "A B B") == pytest.approx(4 / 5)
    assert lexical_similarity("a", "b") == 0.0
    assert lexical_similarity("", "b") == 0.0


def test_similarity_passes_an_output_close_to_the_upstream_step(build, make_ctx):
    gate = build({"gate": "similarity", "to": "draft", "threshold": 0.8}, step_id="polish")
    ctx = make_ctx(draft="Acme offers the lowest unit price and delivers in five days")
    result = gate.check("Acme offers the lowest unit price and delivers in 5 days", ctx)
    assert result.passed
    assert result.reason.startswith("lexical similarity of output to step 'draft' is 0.9")
    assert result.reason.endswith(">= threshold 0.8")


def test_similarity_fails_an_output_that_drifted_from_the_reference(build, ctx):
    gate = build({"gate": "similarity", "reference": "vendor acme price 12", "threshold": 0.5,
                  "field": "text"})
    result = gate.check({"text": "the weather is nice today"}, ctx)
    assert not result.passed
    assert result.score == 0.0
    assert result.reason == \
        "lexical similarity of field 'text' to the reference text is 0.000 < threshold 0.5"


def test_similarity_compares_one_field_of_the_upstream_output(build, make_ctx):
    gate = build({"gate": "similarity", "to": "draft.summary", "threshold": 0.99})
    result = gate.check("cheap and fast", make_ctx(draft={"summary": "cheap and fast", "other": "x y z"}))
    assert result.passed
    assert gate.upstream_steps() == ("draft",)


def test_similarity_fails_with_reason_when_the_upstream_step_has_no_output(build, ctx):
    result = build({"gate": "similarity", "to": "draft", "threshold": 0.5}).check("x", ctx)
    assert result.reason == "step 'draft' has no recorded output to compare with"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"threshold": 0.5}, "step 'retrieve' gate 'similarity': give exactly one of 'to'"),
        ({"threshold": 0.5, "to": "a", "reference": "b"}, "give exactly one of 'to'"),
        ({"threshold": 1.5, "to": "a"}, "parameter 'threshold' must be a number from 0 to 1, got 1.5"),
        ({"threshold": 0.5, "to": "a", "method": "bm25"},
         "parameter 'method' should be 'lexical' or 'embedding' (got 'bm25')"),
        ({"to": "a"}, "missing required parameter 'threshold'"),
    ],
)
def test_similarity_rejects_bad_configuration(build, params, message):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "similarity", **params})
    assert message in str(err.value)


def test_similarity_embedding_without_the_extra_says_how_to_install_it(build, monkeypatch):
    monkeypatch.setattr(similarity_module, "missing_embedding_packages", lambda: ["sentence_transformers"])
    with pytest.raises(GateConfigError) as err:
        build({"gate": "similarity", "reference": "x", "threshold": 0.5, "method": "embedding"})
    assert "pip install 'orchestrator[embeddings]'" in str(err.value)
    assert "sentence_transformers" in str(err.value)


_EMBEDDINGS = all(importlib.util.find_spec(name) for name in similarity_module.EMBEDDING_PACKAGES)


@pytest.mark.slow
@pytest.mark.skipif(not _EMBEDDINGS,
                    reason="embeddings extra not installed: pip install 'orchestrator[embeddings]'")
def test_similarity_embedding_scores_paraphrases_above_unrelated_text(ctx):
    gate = Similarity(reference="The supplier delivers within five days.", threshold=0.5, method="embedding")
    assert gate.check("Delivery from the vendor takes 5 days.", ctx).passed
    assert not gate.check("Penguins live in the southern hemisphere.", ctx).passed
