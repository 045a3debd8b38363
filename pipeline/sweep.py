"""Quick local sweeps of one stage with Hydra multirun; DVC does not track them (use `dvc exp run --queue` for that).

    python -m pipeline.sweep lgbm --collection tile-xla lgbm.num_leaves=15,63 lgbm.learning_rate=0.05,0.1

Hydra expands the sweep (its full override grammar: `a=1,2`, `range(...)`, group lists `gnn=default,kaggle`) and
runs one job per combination, in this process by default or through a Hydra launcher plugin given as an override:
`hydra/launcher=submitit_slurm hydra.launcher.partition=<p> hydra.launcher.gpus_per_node=1 ...` sends each job to
SLURM (hydra-submitit-launcher; `submitit_local` runs them as local subprocesses, what the test uses).
A search instead of a grid: `hydra/sweeper=optuna hydra.sweeper.direction=maximize hydra.sweeper.n_trials=20
hydra.sweeper.sampler.seed=0 'lgbm.learning_rate=interval(0.01,0.2)' 'lgbm.num_leaves=choice(15,63)'`
(hydra-optuna-sweeper): each job returns its valid score, which Optuna maximises. Each job composes conf/ with its overrides, reads the stage's inputs where that
config says (pass the same `data=...` you ran the pipeline with) and writes the stage's outputs under
`<paths.multirun_dir>/<stage>-<collection>/<job>/`, never over the pipeline's own. A summary table of the jobs'
scores is printed and saved as `summary.csv` beside them.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

from pipeline.errors import run_main
from pipeline.config import CONF_DIR, MODEL_OUTPUT_PATHS, checked, compose, module_prog, repo_root
from pipeline.settings_schema import check_overrides
from pipeline.settings_types import SettingsError
from pipeline.tpugraphs.dataset import Collection
from pipeline.tpugraphs.schema import PREDICTED_SPLITS

STAGES = ("heuristic", "lgbm", "gnn", "ensemble")


def sweep_dir(stage: str, collection: Collection, overrides: Sequence[str]) -> Path:
    """Where the jobs of one sweep go: `<paths.multirun_dir>/<stage>-<collection>`."""
    fixed = [o for o in overrides if "," not in o and "(" not in o   # the sweep's non-swept overrides,
             and not o.lstrip("+~").startswith("hydra")]              # less Hydra's own (launcher, sweeper)
    return Path(compose(fixed).paths.multirun_dir) / f"{stage}-{collection.slug}"


def job_metrics(metrics_dir: Path, stage: str, collection: Collection) -> dict:
    """The metrics file a job of the stage wrote: {split: {"score": ...}, ...}."""
    path = Path(metrics_dir) / stage / f"{collection.slug}.json"
    result = json.loads(path.read_text())
    if "valid" not in result or "score" not in result["valid"]:
        raise ValueError(f"{path}: expected a valid score under valid.score, found keys {sorted(result)}")
    return result


def job_scores(folder: Path, stage: str, collection: Collection) -> pd.DataFrame:
    """One row per job: its overrides and the valid (and test) score from its metrics file."""
    rows = []
    for job in sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)):
        overrides = (job / ".hydra" / "overrides.yaml").read_text().strip().replace("\n", " ")
        result = job_metrics(job / "metrics", stage, collection)
        rows.append({"job": int(job.name), "overrides": overrides,
                     **{f"{s}_score": result[s]["score"] for s in PREDICTED_SPLITS if s in result}})
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=module_prog("sweep"), description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=STAGES)
    parser.add_argument("--collection", required=True)
    args, overrides = parser.parse_known_args(argv)
    stage = importlib.import_module(f"pipeline.{args.stage}")
    try:
        collection = Collection.parse(args.collection)
    except ValueError as error:
        raise SystemExit(f"error: --collection: {error}") from None
    try:                                          # every swept key is known, the fixed ones valid, before any job
        check_overrides(overrides, repo_root() / CONF_DIR)
        folder = sweep_dir(args.stage, collection, overrides)
    except SettingsError as error:
        raise SystemExit(f"error: {error}") from None

    import hydra
    from hydra.core.hydra_config import HydraConfig

    @hydra.main(version_base=None, config_path=str(repo_root() / CONF_DIR), config_name="config")
    def job(cfg) -> float:
        job_dir = Path(HydraConfig.get().runtime.output_dir)
        for key in MODEL_OUTPUT_PATHS:
            cfg.paths[key] = str(job_dir / Path(cfg.paths[key]).name)
        stage.run(checked(cfg), collection)
        return float(job_metrics(Path(cfg.paths.metrics_dir), args.stage, collection)["valid"]["score"])  # Optuna

    sys.argv = [f"{__package__}.sweep", "--multirun", *overrides, f"hydra.sweep.dir={folder}",
                "hydra.sweep.subdir=${hydra.job.num}", "hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]
    job()
    table = job_scores(folder, args.stage, collection)
    table.to_csv(folder / "summary.csv", index=False)
    print(table.to_string(index=False))
    return table


if __name__ == "__main__":
    run_main(main)
