"""Stage `summary`: one number per experiment, the Kaggle score of every model, in `<metrics_dir>/summary.json`.

Reads the metrics file each model stage wrote per collection (`<metrics_dir>/<model>/<slug>.json`, see
pipeline/scoring/evaluate.py) and writes, per model and split:

    {"<model>": {"<split>": {"kaggle": mean, "collections": n, "<slug>": score, ...}}}

The Kaggle score is the leaderboard's: the unweighted mean of the collection scores, i.e. the tile:xla score
(`2 - best of top 5 / best`, averaged over graphs) and the four layout Kendall taus (averaged over graphs), over
the collections `data.collections` configures (all five for a full run, so it equals the leaderboard's mean).
A split a metrics file lacks (the real test split has no truth) is left out of that model, never counted as zero.
`dvc exp show --sort-by metrics/summary.json:ensemble.valid.kaggle` ranks experiments by it.
Key `autotune` carries stage autotune's mean share of the oracle's gain (`<metrics_dir>/autotune.json`, "all"):
{"share": mean, "share_std": std, "programs": n, "min_share": ..., "share_featurizer_sample": ...,
"share_random_search": ...}; `dvc exp show --sort-by metrics/summary.json:autotune.share` ranks by it.

It also lays out the review page of `dvc plots show` (dvc.yaml's top-level `plots:`, grouped per collection):
`<plots_dir>/summary/models/<slug>.csv` (graph_id, model, score: every model's valid score per graph, the
model-vs-model comparison), `<plots_dir>/summary/ranks/<slug>.csv` (model, graph_id, true_rank, predicted_rank)
and `<plots_dir>/summary/gnn_curves.csv` (collection, seed, epoch, loss, valid_score: one line per collection and
member seed), read from the model stages' plots (a missing one is a one-line error naming it), and
`summary.page_template`, the HTML page DVC fills with the charts, with Vega inlined so it renders offline
(pipeline/plots_page.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from omegaconf import DictConfig

import pandas as pd

from pipeline.errors import run_main
from pipeline import notebook_data as reports
from pipeline import plots_page
from pipeline.config import stage_args
from pipeline.files import atomic_path, read_json, write_json
from pipeline.scoring import metrics
from pipeline.scoring.evaluate import metrics_file
from pipeline.tpugraphs.dataset import Collection

SUMMARY_NAME = "summary.json"
AUTOTUNE_NAME = "autotune.json"        # stage autotune's metrics (pipeline/autotune.py)
STAGE = "summary"                      # its folder under plots_dir
COMPARED_SPLIT = "valid"               # the split every model is scored on with truth, real data included


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


def found(table_and_missing: tuple[pd.DataFrame, list[Path]], what: str) -> pd.DataFrame:
    """The table of a notebook_data loader; FileNotFoundError naming the first missing file."""
    table, missing = table_and_missing
    if missing:
        raise FileNotFoundError(f"{missing[0]}: no {what} file; run the stage that writes it first (dvc repro)")
    return table


def review_tables(plots_dir: str | Path, models: Sequence[str], slugs: Sequence[str]) -> dict[str, pd.DataFrame]:
    """{relative csv path: table} of the grouped review charts (see the module docstring), from the model stages'
    per-graph scores, rank scatters and GNN curves."""
    stages = {m: reports.MODEL_STAGES.get(m, m) for m in models}
    graphs = found(reports.per_graph(plots_dir, slugs, stages), "per-graph score")
    graphs = graphs[graphs["split"] == COMPARED_SPLIT]
    ranks = pd.concat([found(reports.rank_scatter_points(plots_dir, slugs, m), "rank scatter").assign(model=m)
                       for m in models], ignore_index=True)
    tables = {}
    for slug in slugs:
        tables[f"models/{slug}.csv"] = graphs.loc[graphs["collection"] == slug, ["graph_id", "model", "score"]]
        tables[f"ranks/{slug}.csv"] = ranks.loc[ranks["collection"] == slug,
                                                ["model", "graph_id", "true_rank", "predicted_rank"]]
    if "gnn" in stages:
        curves = found(reports.gnn_curves(plots_dir, slugs), "gnn curve")
        tables["gnn_curves.csv"] = curves[["collection", "seed", "epoch", "loss", "valid_score"]]
    return tables


def write_review(tables: dict[str, pd.DataFrame], folder: Path) -> None:
    """Write the review tables under `folder`, replacing it whole (nothing stale from other collections stays)."""
    with atomic_path(folder) as tmp:
        for name, table in tables.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            table.to_csv(tmp / name, index=False)


def autotune_summary(metrics_dir: str | Path) -> dict:
    """The mean shares of stage autotune's `<metrics_dir>/autotune.json` (one-line error when it is missing)."""
    overall = read_collection_metrics(Path(metrics_dir) / AUTOTUNE_NAME).get("all")
    if not isinstance(overall, dict) or not isinstance(overall.get("share"), dict):
        raise ValueError(f"{Path(metrics_dir) / AUTOTUNE_NAME}: key 'all.share' missing; re-run stage autotune")
    return {"share": overall["share"]["mean"], "share_std": overall["share"]["std"],
            "programs": overall["share"]["n"], "min_share": overall.get("min_share"),
            "share_featurizer_sample": overall["share_featurizer_sample"]["mean"],
            "share_random_search": overall["share_random_search"]["mean"]}


def run(cfg: DictConfig) -> dict:
    """Summarise the configured models over the configured collections and write summary.json, the review
    charts' tables and the offline page template."""
    collections = [Collection.parse(c) for c in cfg.data.collections]
    models = list(cfg.summary.models)
    summary = summarize(cfg.paths.metrics_dir, models, collections, list(cfg.summary.splits))
    summary["autotune"] = autotune_summary(cfg.paths.metrics_dir)
    tables = review_tables(cfg.paths.plots_dir, models, [c.slug for c in collections])
    page = plots_page.page_template(str(cfg.summary.vega_lite_version))
    write_review(tables, Path(cfg.paths.plots_dir) / STAGE)
    plots_page.write_template(page, cfg.summary.page_template)
    write_json(summary, summary_file(cfg.paths.metrics_dir))
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    _, cfg = stage_args(__doc__.splitlines()[0], argv, collection=False)
    summary = run(cfg)
    for model, splits in summary.items():
        if model != "autotune":
            print(model, "  ".join(f"{split} {s['kaggle']:.4f}" for split, s in splits.items()))
    print("autotune: mean share of the oracle's gain", summary["autotune"]["share"])


if __name__ == "__main__":
    run_main(main)
