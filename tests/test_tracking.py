import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from pipeline import tracking


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    for var, sub in [("WANDB_DATA_DIR", "data"), ("WANDB_CACHE_DIR", "cache"), ("WANDB_CONFIG_DIR", "config")]:
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.setenv("DVC_EXP_NAME", "exp-one")
    return tmp_path


def cfg_for(tmp_path, mode):
    return OmegaConf.create({"wandb": {"project": "tpugraphs-test", "entity": None, "mode": mode,
                                       "dir": str(tmp_path / "wb")}, "seed": 3})


@pytest.mark.slow
def test_offline_run_is_written_with_metrics(wandb_env):
    cfg = cfg_for(wandb_env, "offline")
    with tracking.start_run(cfg, "heuristic", "tile-xla") as run:
        run.log({"valid/score": 0.75})
        run.summary["test/score"] = 0.5
        tracking.log_table(run, "per_graph", pd.DataFrame({"graph_id": ["a"], "score": [0.75]}))
    runs = list((wandb_env / "wb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    wandb_bin = Path(sys.executable).with_name("wandb")
    out = subprocess.run([str(wandb_bin), "leet", "inspect", "--summary", "--json", str(runs[0])],
                         capture_output=True, text=True, check=True).stdout
    record = json.loads(out)
    text = json.dumps(record)
    assert "exp-one-heuristic-tile-xla" in text
    assert "0.75" in text and "test/score" in text


def test_disabled_mode_writes_nothing(wandb_env):
    cfg = cfg_for(wandb_env, "disabled")
    with tracking.start_run(cfg, "heuristic", "tile-xla") as run:
        run.log({"valid/score": 1.0})
        run.summary.update({"valid/score": 1.0})
        tracking.log_artifact(run, "submission", "csv", wandb_env / "missing.csv")   # nothing read, nothing kept
    assert isinstance(run, tracking.NullRun)              # wandb is neither imported nor started
    assert not (wandb_env / "wb").exists()


def test_bad_mode_from_the_environment_is_rejected(wandb_env, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "sometimes")          # wandb.mode itself: the schema checks it
    with pytest.raises(ValueError, match="environment variable WANDB_MODE='sometimes'"):
        with tracking.start_run(cfg_for(wandb_env, "disabled"), "heuristic"):
            pass
