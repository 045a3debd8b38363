"""End-to-end: `dvc repro` on the synthetic_ci preset in a temporary copy of the repository."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(cmd, cwd, env):
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def copy_repo(dest: Path) -> None:
    """Copy what a fresh clone would hold (tracked + untracked-not-ignored files), no outputs or venv."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for name in files:
        src = ROOT / name
        if src.is_file() and not name.startswith(("data/", "models/", "predictions/", "metrics/", "plots/")):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    dest = tmp_path_factory.mktemp("repo")
    copy_repo(dest)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "WANDB_MODE": "offline",
           "WANDB_SILENT": "true", "OMP_WAIT_POLICY": "PASSIVE", "DVC_NO_ANALYTICS": "1"}
    env.pop("DVC_ROOT", None)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy"]):
        run(cmd, dest, env)
    run([str(BIN / "python"), "-m", "pipeline.config", "data=synthetic_ci"], dest, env)
    run([str(BIN / "dvc"), "repro"], dest, env)
    return dest, env


@pytest.mark.slow
def test_dvc_repro_writes_a_valid_submission(repo):
    dest, env = repo
    submission = dest / "submissions" / "submission.csv"
    table = pd.read_csv(submission, dtype=str)
    assert list(table.columns) == ["ID", "TopConfigs"] and len(table) > 0
    out = run([str(BIN / "python"), "-m", "pipeline.submit", "--check", str(submission)], dest, env)
    assert "valid submission" in out.stdout
    metrics = run([str(BIN / "dvc"), "metrics", "show", "--json"], dest, env).stdout
    assert "kaggle_score" in metrics


@pytest.mark.slow
def test_check_rejects_a_broken_submission(repo):
    dest, env = repo
    table = pd.read_csv(dest / "submissions" / "submission.csv", dtype=str)
    broken = dest / "broken.csv"
    table.iloc[1:].to_csv(broken, index=False)
    result = subprocess.run([str(BIN / "python"), "-m", "pipeline.submit", "--check", str(broken)], cwd=dest,
                            env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "missing ID" in result.stderr


@pytest.mark.slow
def test_offline_wandb_runs_land_in_the_repo(repo):
    dest, _ = repo
    assert list((dest / "wandb").glob("offline-run-*")), "no offline wandb run written"
