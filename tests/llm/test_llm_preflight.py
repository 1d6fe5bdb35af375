"""The model configuration is checked before any model call: an ``output_schema`` that is not a
JSON Schema and a broken ``$ORCHESTRATOR_LLM_PRICES`` file fail ``validate`` and ``run`` (exit 2,
one line, nothing stored, no request sent), and an ``api_key_env`` naming an unset variable is
said in one line instead of being ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.llm.fake_openai_server import FakeOpenAI

INPUTS = FIXTURES.parent / "inputs"


def _missing(tmp_path: Path) -> Path:
    return tmp_path / "no_such_prices.json"


def _directory(tmp_path: Path) -> Path:
    (tmp_path / "prices_dir").mkdir()
    return tmp_path / "prices_dir"


BAD_PRICES = [
    ("missing", _missing, "cannot read the price file: No such file or directory"),
    ("not_json", lambda _: INPUTS / "prices_not_json.json", "cannot read the price file: Expecting ',' delimiter"),
    ("list", lambda _: INPUTS / "prices_list.json",
     'expected {"model": {"input": X, "output": Y}}, not a JSON list'),
    ("directory", _directory, "cannot read the price file: not a regular file: it is a directory"),
    ("negative", lambda _: INPUTS / "prices_negative.json",
     "model 'house-model' needs \"input\" and \"output\" prices that are numbers of 0 or more (USD per 1M tokens)"),
]


@pytest.mark.parametrize(("name", "make", "message"), BAD_PRICES, ids=[b[0] for b in BAD_PRICES])
def test_a_bad_price_file_stops_validate_and_run_before_any_call(cli, db_url, fake_openai: FakeOpenAI, monkeypatch,
                                                                 tmp_path, name, make, message):
    prices = make(tmp_path)
    monkeypatch.setenv("ORCHESTRATOR_LLM_PRICES", str(prices))
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    expected = f"error: {FIXTURES / 'llm_step.yaml'}: $ORCHESTRATOR_LLM_PRICES={prices}: {message}"
    for command in ("validate", "run"):
        result = cli(command, str(FIXTURES / "llm_step.yaml"), db=command == "run")
        assert result.exit_code == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(expected), lines
    assert fake_openai.requests == []
    assert not Path(db_url.split("///", 1)[1]).exists()


def test_a_workflow_without_model_calls_ignores_the_price_file(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("ORCHESTRATOR_LLM_PRICES", str(tmp_path / "missing.json"))
    assert cli("run", str(FIXTURES / "ok.yaml")).exit_code == 0


def test_an_output_schema_that_is_not_a_json_schema_fails_validate(cli, db_url, fake_openai, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_LLM_BASE_URL", fake_openai.base_url)
    path = FIXTURES / "llm_bad_schema.yaml"
    for command in ("validate", "run"):
        result = cli(command, str(path), db=command == "run")
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            f"error: {path}:7: steps.classify.output_schema: step 'classify' output_schema is not a JSON Schema: "
            "'strin' is not valid under any of the given schemas (at properties/category/type)"]
    assert fake_openai.requests == []
    assert not Path(db_url.split("///", 1)[1]).exists()


@pytest.mark.parametrize(("url", "then"), [
    ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1 is on this machine, so it is called without a key"),
    ("https://llm.example.invalid/v1", "its calls to https://llm.example.invalid/v1 will fail until it is set"),
], ids=["local", "remote"])
def test_an_unset_api_key_variable_is_said_in_one_line(cli, tmp_path, url, then):
    (tmp_path / "key.yaml").write_text((FIXTURES / "llm_key_unset.yaml").read_text().replace(
        "http://127.0.0.1:9/v1", url))
    result = cli("validate", str(tmp_path / "key.yaml"), db=False)
    assert result.exit_code == 0
    assert result.stderr.strip().splitlines() == [
        f"warning: step 'classify': api_key_env names $MY_UNSET_LLM_KEY, which is not set; {then}"]


def test_a_set_key_or_the_default_variable_says_nothing(cli, monkeypatch):
    monkeypatch.setenv("MY_UNSET_LLM_KEY", "sk-test")
    assert cli("validate", str(FIXTURES / "llm_key_unset.yaml"), db=False).stderr == ""
    assert cli("validate", str(FIXTURES / "llm_step.yaml"), db=False).stderr == ""
