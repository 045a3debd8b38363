"""The notebooks: stored without outputs, paths only from the config, and they run on programs_ci outputs.

Execution needs a repository holding the stage outputs of `dvc repro` on data=programs_ci. It is the `repo`
fixture (`(dest, env)`, which runs `dvc repro` in a temporary copy), or, when NOTEBOOK_OUTPUTS_REPO names a folder,
that folder (e.g. a clone where `dvc repro` already ran; it is only read).
"""
import ast
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from pipeline.config import compose, load_cfg

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
OUTPUTS_ENV = "NOTEBOOK_OUTPUTS_REPO"
CELL_TIMEOUT_S = 600
GNN_OUTPUTS = (("metrics_dir", "gnn"), ("plots_dir", "gnn"),
               ("predictions_dir", "gnn"))   # (cfg.paths key, folder) of everything stage gnn writes


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def execute(path: Path, repo_dir: Path):
    """Run a notebook with the venv's python3 kernel in repo_dir; raises CellExecutionError on any failing cell."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(repo_dir)}}).execute()
    return nb


def text_output(nb) -> str:
    parts = []
    for cell in code_cells(nb):
        for out in cell.outputs:
            parts.append(out.get("text", "") + out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def outputs_repo(request) -> Path:
    if os.environ.get(OUTPUTS_ENV):
        return Path(os.environ[OUTPUTS_ENV])
    dest, _ = request.getfixturevalue("repo")
    return dest


def test_both_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == ["01-data.ipynb", "02-results.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert code_cells(nb)
    for cell in code_cells(nb):
        assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: cell with outputs:\n{cell.source}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_paths_come_from_the_config(path):
    """No string literal in code names a configured output folder (e.g. "metrics/...")."""
    folders = [str(v).rstrip("/") for v in compose([]).paths.values()]
    nb = nbformat.read(path, as_version=4)
    for cell in code_cells(nb):
        literals = [n.value for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Constant)
                    and isinstance(n.value, str)]
        bad = [s for s in literals for f in folders if s == f or s.startswith(f + "/")]
        assert not bad, f"{path.name}: literal paths {bad}; use cfg.paths"


def test_results_notebook_never_clips_scores():
    """Tile scores can be far below -1 (a top 5 ten times slower than the best); no axis limit hides them."""
    nb = nbformat.read(ROOT / "notebooks" / "02-results.ipynb", as_version=4)
    source = "\n".join(c.source for c in code_cells(nb))
    assert "ylim" not in source and "clip(" not in source
    assert "reports.with_overall(" in source


@pytest.mark.slow
def test_data_notebook_runs(outputs_repo):
    out = text_output(execute(ROOT / "notebooks" / "01-data.ipynb", outputs_repo))
    assert "layout-xla-random" in out and "config_keep" in out and "Note:" not in out


@pytest.mark.slow
def test_results_notebook_runs(outputs_repo):
    out = text_output(execute(ROOT / "notebooks" / "02-results.ipynb", outputs_repo))
    assert "Kaggle score (mean over collections):" in out and "ensemble" in out
    assert "gnn" in out                     # the ablation table lists every stage's metrics
    assert "overall" in out                 # the score table's mean over collections
    assert "guard_kept_pick" in out         # stage autotune's default, pick and oracle runtimes per program


@pytest.mark.slow
def test_results_notebook_notes_a_missing_model(outputs_repo, tmp_path):
    """A run without the GNN: the notebook says so instead of failing."""
    paths = load_cfg([], params_file=outputs_repo / "params.yaml").paths
    shutil.copytree(ROOT / "pipeline", tmp_path / "pipeline")      # the code under test
    shutil.copy2(outputs_repo / "params.yaml", tmp_path / "params.yaml")
    for folder in (paths.metrics_dir, paths.plots_dir, paths.predictions_dir):
        shutil.copytree(outputs_repo / folder, tmp_path / folder)
    for key, stage in GNN_OUTPUTS:
        shutil.rmtree(tmp_path / paths[key] / stage)
    out = text_output(execute(ROOT / "notebooks" / "02-results.ipynb", tmp_path))
    assert "Note: 5 gnn curve output(s) not found" in out
    assert "Kaggle score (mean over collections):" in out
