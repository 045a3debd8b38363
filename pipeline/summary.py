"""Stage `summary`: one number per experiment, the Kaggle score of every model, in `<metrics_dir>/summary.json`.

Reads the metrics file each model stage wrote per collection (`<metrics_dir>/<model>/<slug>.json`, see
pipeline/scoring/evaluate.py) and writes, per model and split:

    {"<model>": {"<split>": {"kaggle": mean, "collections": n, "<slug>": score, ...}}}

The Kaggle score is the leaderboard's: the unweighted mean of the collection scores, i.e. the tile:xla score
(`2 - best of top 5 / best`, averaged over graphs) and the four layout Kendall taus (averaged over graphs), over
the collections `data.collections` configures (all five for a full run, so it equals the leaderboard's mean).
A split a metrics file lacks (the real test split has no truth) is left out of that model, never counted as zero.
`dvc exp show --sort-by metrics/summary.json:ensemble.valid.kaggle` ranks experiments by it.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping, Sequence

from omegaconf import DictConfig

from pipeline.config import stage_args
from pipeline.files import read_json, write_json
from pipeline.scoring import metrics
from pipeline.scoring.evaluate import metrics_file
from pipeline.tpugraphs.dataset import Collection

SUMMARY_NAME = "summary.json"


def summary_file(metrics_dir: str | Path) -> Path:
    """`<metrics_dir>/summary.json`: the per-model Kaggle scores (`dvc metrics show`, `dvc exp show`)."""
    return Path(metrics_dir) / SUMMARY_NAME


def read_collection_metrics(path: Path) -> dict:
    """One stage's metrics JSON of one collection; a missing or malformed file is a one-line error naming it."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics file; run the stage that writes it first (dvc repro)")
    return read_json(path)


def split_summary(scores: Mapping[str, float]) -> dict:
    """{"kaggle": mean of the collection scores, "collections": how many, "<slug>": score ...} of one split."""
    return {"kaggle": metrics.kaggle_score(scores), "collections": len(scores), **dict(scores)}


def model_summary(per_collection: Mapping[str, Mapping], splits: Sequence[str], where: str) -> dict:
    """Summaries of one model's splits from {slug: metrics dict}; a split is kept when every collection has it.

    A split present in some collections and missing in others is an error (the mean would mix collections).
    """
    result = {}
    for split in splits:
        present = {slug: m[split]["score"] for slug, m in per_collection.items() if split in m}
        if not present:
            continue
        if len(present) != len(per_collection):
            missing = sorted(set(per_collection) - set(present))
            raise ValueError(f"{where}: split {split!r} is scored in {sorted(present)} but not in {missing}")
        result[split] = split_summary(present)
    return result


def summarize(metrics_dir: str | Path, models: Sequence[str], collections: Sequence[Collection],
              splits: Sequence[str]) -> dict:
    """{model: {split: {...}}} from the metrics files of `models` x `collections` under metrics_dir."""
    summary = {}
    for model in models:
        per_collection = {c.slug: read_collection_metrics(metrics_file(metrics_dir, model, c.slug))
                          for c in collections}
        summary[model] = model_summary(per_collection, splits, f"{Path(metrics_dir) / model}")
    return summary


def run(cfg: DictConfig) -> dict:
    """Summarise the configured models over the configured collections and write summary.json."""
    collections = [Collection.parse(c) for c in cfg.data.collections]
    summary = summarize(cfg.paths.metrics_dir, list(cfg.summary.models), collections, list(cfg.summary.splits))
    write_json(summary, summary_file(cfg.paths.metrics_dir))
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    _, cfg = stage_args(__doc__.splitlines()[0], argv, collection=False)
    summary = run(cfg)
    for model, splits in summary.items():
        print(model, "  ".join(f"{split} {s['kaggle']:.4f}" for split, s in splits.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
