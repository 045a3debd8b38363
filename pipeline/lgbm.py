"""Stage `lgbm`: a LightGBM ranker per collection, from the pruned graphs to predictions on valid and test.

The ranker lives in `pipeline.lgbm_model`: its ranking data (one query per graph, sampled configs labelled with
runtime-quantile grades, `rank_data`), its training (objective per collection kind, early stopping on the
collection's score, `train`) and its one inference entry point (`infer.predict_graph`, shared with command
`predict`). Every run records its best and last boosting round and whether it `stopped` at a plateau (patience
exhausted) or at the `num_boost_round` budget (warned on stderr: the model may not have converged).

Outputs: `<models_dir>/lgbm/<slug>/model.txt`, `<plots_dir>/lgbm/<slug>/importance.{png,csv}`,
`<predictions_dir>/lgbm/<slug>/{valid,test}.npz`, metrics via `pipeline.scoring.evaluate`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from pipeline.errors import run_main
from pipeline.config import stage_args, warn_threads
from pipeline.timings import Stopwatch, write_timings
from pipeline.files import atomic_path, write_csv
from pipeline.lgbm_model.importance import importance_table, plotted_importance, write_importance
from pipeline.lgbm_model.infer import model_file, predict_split
from pipeline.lgbm_model.rank_data import build_rank_data
from pipeline.lgbm_model.settings import LgbmSettings
from pipeline.lgbm_model.train import convergence, train_ranker, warn_budget
from pipeline.predictions import predictions_path, save_predictions
from pipeline.pruned import check_pruned_from, iter_split, read_index
from pipeline.settings.lgbm import lgbm_settings
from pipeline.tpugraphs.schema import PREDICTED_SPLITS

MODEL = "lgbm"


def split_size(pruned_dir, slug: str, split: str) -> int:
    """Graphs of one split in the pruned index (the total of the progress bars)."""
    return int((read_index(pruned_dir, slug)["split"] == split).sum())


def run(cfg: DictConfig, collection, settings: LgbmSettings | None = None) -> dict:
    """Train on train, early-stop on valid, write the model, importance, predictions and metrics of one collection
    (`settings`: lgbm_settings(cfg, collection) unless given)."""
    from pipeline import tracking
    from pipeline.scoring.evaluate import evaluate_and_write

    watch = Stopwatch()
    settings = lgbm_settings(cfg, collection) if settings is None else settings
    kind, slug, spec = collection.kind, collection.slug, settings.features
    rng = np.random.default_rng(int(cfg.seed))
    data = {split: build_rank_data(iter_split(cfg.paths.pruned_dir, slug, split), kind, spec, limit,
                                   settings.label_grades, settings.max_query_rows, rng, desc=f"{slug}/{split}",
                                   total=split_size(cfg.paths.pruned_dir, slug, split))
            for split, limit in (("train", settings.configs_per_graph), ("valid", settings.valid_configs_per_graph))}
    booster, history = train_ranker(data["train"], data["valid"], settings, int(cfg.seed), desc=f"boost {slug}")
    converged = convergence(booster.best_iteration, history, settings.early_stopping_rounds)
    warn_budget(f"lgbm {slug}", converged, settings.num_boost_round)
    fit_seconds = watch.elapsed()

    model_path = model_file(Path(cfg.paths.models_dir) / MODEL / slug)
    with atomic_path(model_path) as tmp:
        booster.save_model(str(tmp), num_iteration=booster.best_iteration or None)
    plots = Path(cfg.paths.plots_dir) / MODEL / slug
    importance = importance_table(booster)
    write_importance(importance, plots / "importance.csv", plots / "importance.png", settings.importance_top,
                     f"LightGBM {collection.name}: top features by gain")

    preds = {split: predict_split(booster, iter_split(cfg.paths.pruned_dir, slug, split), kind, spec,
                                  settings.num_threads, desc=f"predict {slug}/{split}",
                                  total=split_size(cfg.paths.pruned_dir, slug, split)) for split in PREDICTED_SPLITS}
    for split, split_preds in preds.items():
        save_predictions(split_preds, predictions_path(cfg.paths.predictions_dir, MODEL, slug, split))
    extra = {**converged, "train_rows": int(len(data["train"].label)), "features": len(data["train"].names)}
    result = evaluate_and_write(cfg, "lgbm", collection, preds, extra=extra)
    timings = {"seconds": watch.elapsed(), "fit_seconds": fit_seconds}
    write_timings(cfg.paths.metrics_dir, MODEL, slug, timings)
    result = {**result, **timings}
    with tracking.start_run(cfg, "lgbm", slug) as wandb_run:
        for step, values in enumerate(zip(*history.values())):
            wandb_run.log({f"valid/{name}": v for name, v in zip(history, values)}, step=step)
        wandb_run.summary.update({**extra, **timings, **{f"{s}/score": result[s]["score"] for s in PREDICTED_SPLITS
                                              if s in result}})
        tracking.log_table(wandb_run, "per_graph", pd.DataFrame(result["per_graph"]))
        tracking.log_table(wandb_run, "importance", plotted_importance(importance, settings.importance_top)[0])
        tracking.log_image(wandb_run, "importance_plot", plots / "importance.png")
    return result


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m pipeline.lgbm --collection <slug> [overrides]`."""
    from pipeline.scoring.evaluate import score_line
    from pipeline.tpugraphs.dataset import Collection

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # idle OpenMP threads must not spin on a busy box
    args, cfg = stage_args(__doc__, argv)
    collection = Collection.parse(args.collection)
    settings = lgbm_settings(cfg, collection)
    warn_threads("lgbm.num_threads", settings.num_threads)
    check_pruned_from(cfg.paths.pruned_dir, collection, cfg.data.root)      # before any training or output
    result = run(cfg, collection, settings)
    print(score_line(MODEL, collection.slug, result, result["seconds"]))


if __name__ == "__main__":
    run_main(main)
