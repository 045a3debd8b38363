"""Weights & Biases runs for every stage: offline by default, `wandb.mode=disabled` turns logging off.

Offline runs land in `<wandb.dir>/wandb/offline-run-*` (DVC_ROOT wins over wandb.dir, so runs of queued and
`--temp` experiments land in the main repo); review them with `wandb leet inspect --summary <run>` and upload
later with `wandb sync`. Runs are named `<experiment>-<stage>-<collection>` and grouped by DVC experiment.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    import pandas as pd

WANDB_MODES = ("offline", "online", "disabled")


def run_name(stage: str, collection: str | None) -> tuple[str, str]:
    """(run name, group): both carry the DVC experiment name when the stage runs under `dvc exp run`."""
    experiment = os.environ.get("DVC_EXP_NAME") or "workspace"
    parts = [experiment, stage] + ([collection] if collection else [])
    return "-".join(parts), experiment


@contextmanager
def start_run(cfg: DictConfig, stage: str, collection: str | None = None) -> Iterator:
    """Open a wandb run for one stage (and collection) with the resolved config; finish it on exit.

    The environment variable WANDB_MODE, when set, wins over cfg.wandb.mode (tests and CI set it).
    """
    environment = os.environ.get("WANDB_MODE")
    if environment and environment not in WANDB_MODES:        # cfg.wandb.mode: the schema checked it
        raise ValueError(f"environment variable WANDB_MODE={environment!r}; expected one of {WANDB_MODES}")
    mode = environment or cfg.wandb.mode
    if mode == "disabled":              # no run: skip wandb's import and start-up (seconds per stage)
        yield NullRun()
        return
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    run_dir = Path(os.environ.get("DVC_ROOT") or cfg.wandb.dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    name, group = run_name(stage, collection)
    config = OmegaConf.to_container(cfg, resolve=True)
    config["dvc"] = {k: os.environ.get(k) for k in ("DVC_EXP_NAME", "DVC_EXP_BASELINE_REV", "DVC_STAGE")}
    run = wandb.init(project=cfg.wandb.project, entity=cfg.wandb.entity, mode=mode, dir=str(run_dir),
                     name=name, group=group, job_type=stage, tags=[stage] + ([collection] if collection else []),
                     config=config, reinit="finish_previous",
                     settings=wandb.Settings(x_disable_stats=True, console="off"))
    try:
        yield run
    except BaseException:
        run.finish(exit_code=1)
        raise
    run.finish()


class NullRun:
    """The run of `wandb.mode=disabled`: takes what a stage logs and keeps nothing."""

    def __init__(self) -> None:
        self.summary: dict = {}

    def log(self, *args, **kwargs) -> None:
        pass

    def log_artifact(self, *args, **kwargs) -> None:
        pass


def log_table(run, name: str, table: pd.DataFrame) -> None:
    """Log a DataFrame as a wandb Table (per-graph scores, importances, ...)."""
    if isinstance(run, NullRun):
        return
    import wandb

    run.log({name: wandb.Table(dataframe=table.reset_index(drop=True))})


def log_image(run, name: str, path: str | Path) -> None:
    """Log a PNG written by the stage (a plot a person would rather look at)."""
    if isinstance(run, NullRun):
        return
    import wandb

    run.log({name: wandb.Image(str(path))})


def log_artifact(run, name: str, kind: str, path: str | Path) -> None:
    """Attach a file (e.g. the submission CSV) to the run as an artifact."""
    if isinstance(run, NullRun):
        return
    import wandb

    artifact = wandb.Artifact(name=name, type=kind)
    artifact.add_file(str(path))
    run.log_artifact(artifact)
