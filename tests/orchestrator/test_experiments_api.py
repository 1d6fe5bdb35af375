"""``Orchestrator.dataset``, ``.experiment`` and ``.compare``: the experiment loop from Python, typed."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from orchestrator.api import Comparison, DatasetDetail, ExperimentDetail, Orchestrator
from orchestrator.core.errors import InputError
from tests.orchestrator.test_experiments import STEPS, workflow_text


@pytest.fixture
def folder(tmp_path: Path, step_log: Path) -> Path:
    (tmp_path / "exp_steps.py").write_text(STEPS)
    (tmp_path / "upper.yaml").write_text(workflow_text())
    (tmp_path / "lower.yaml").write_text(workflow_text(answer="lower"))
    return tmp_path


def test_two_experiments_on_a_dataset_of_examples_compare_with_their_flips(folder, db_url):
    with Orchestrator(db_url) as orch:
        made = orch.dataset("hand", examples=[{"inputs": {"q": "abc"}, "reference": "abc"},
                                              {"inputs": {"q": "xyz"}, "reference": "XYZ"}])
        assert isinstance(made, DatasetDetail)
        assert (made.version, made.size, [e.inputs for e in made.examples]) == (1, 2, [{"q": "abc"}, {"q": "xyz"}])
        upper = orch.experiment(folder / "upper.yaml", "hand", name="upper")
        lower = anyio.run(lambda: orch.aexperiment(folder / "lower.yaml", "hand", name="lower"))
        assert isinstance(upper, ExperimentDetail) and upper.status == "finished"
        assert [r["correct"] for r in upper.runs] == [False, True]
        assert [r["correct"] for r in lower.runs] == [True, False]
        compared = orch.compare("upper", "lower")
        assert isinstance(compared, Comparison)
        assert compared.flips == {"fixed": 1, "broken": 1, "ambiguous": 0, "total": 2}
        assert compared.changed_steps == ["answer"]
        assert anyio.run(orch.acompare, "lower", "upper").flips["total"] == 2


def test_a_dataset_from_runs_and_bad_arguments(folder, db_url):
    with Orchestrator(db_url) as orch:
        orch.run(folder / "upper.yaml", {"q": "abc"})
        made = orch.dataset("runs", from_runs=True, workflow="demo")
        assert made.size == 1 and made.examples[0].source_run_id is not None
        assert orch.dataset("runs").version == 1
        with pytest.raises(InputError, match="examples\\[1\\]"):
            orch.dataset("hand", examples=[{"inputs": {}}, {"reference": 1}])
        with pytest.raises(InputError, match="one of from_runs, examples and file"):
            orch.dataset("hand", from_runs=True, examples=[])
        ran = orch.experiment(folder / "upper.yaml", "runs", reuse="none")
        assert ran.summary["reuse"]["step_executions_saved"] == 0 and ran.summary["statuses"] == {"succeeded": 1}
