from __future__ import annotations

import pytest

from gates import GateConfigError


def test_max_words_passes_text_within_the_limit(build, ctx):
    result = build({"gate": "max_words", "limit": 3}).check("one two three", ctx)
    assert result.passed
    assert result.reason == "3 words (limit 3)"


def test_max_words_fails_long_text_with_the_word_count(build, ctx):
    gate = build({"gate": "max_words", "limit": 300, "field": "summary"})
    result = gate.check({"summary": "w " * 412}, ctx)
    assert not result.passed
    assert result.reason == "field 'summary': 412 words (limit 300)"
    assert result.score == pytest.approx(300 / 412)


def test_max_words_fails_non_text(build, ctx):
    assert build({"gate": "max_words", "limit": 3}).check(["a"], ctx).reason == "output is a list, not text"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "step 'retrieve' gate 'max_words': missing required parameter 'limit'"),
        ({"limit": 0}, "parameter 'limit' must be an integer >= 1, got 0"),
        ({"limit": 2.5}, "parameter 'limit' should be a valid integer (got 2.5)"),
    ],
)
def test_max_words_rejects_bad_configuration(build, params, message):
    with pytest.raises(GateConfigError) as err:
        build({"gate": "max_words", **params})
    assert message in str(err.value)
