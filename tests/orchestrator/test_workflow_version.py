"""A workflow's version (its content hash) follows its meaning: the order in which a mapping's keys are
written is no change, a changed value is."""

from __future__ import annotations

from pathlib import Path

from orchestrator.bind.loader import load_workflow

CHECKED = """\
name: versioned
steps:
  - id: draft
    run: steps:draft
    gates: [{gate: max_words, limit: 6, field: text}]
"""


def _write(folder: Path, text: str) -> Path:
    folder.mkdir()
    (folder / "steps.py").write_text("def draft():\n    return {'text': 'a short draft'}\n")
    path = folder / "wf.yaml"
    path.write_text(text)
    return path


def test_reordered_gate_parameters_are_the_same_version(tmp_path):
    written = load_workflow(_write(tmp_path / "a", CHECKED))
    reordered = load_workflow(_write(tmp_path / "b", CHECKED.replace(
        "{gate: max_words, limit: 6, field: text}", "{field: text, limit: 6, gate: max_words}")))
    assert reordered.content_hash == written.content_hash


def test_a_changed_parameter_is_a_new_version(tmp_path):
    written = load_workflow(_write(tmp_path / "a", CHECKED))
    changed = load_workflow(_write(tmp_path / "b", CHECKED.replace("limit: 6", "limit: 7")))
    assert changed.content_hash != written.content_hash
