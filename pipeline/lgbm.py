"""Stage `lgbm`: a LightGBM ranker per collection, from the pruned graphs to predictions on valid and test.

One query per graph: train configurations (de-duplicated kept rows) are sampled per graph (`configs_per_graph`)
and chunked into queries of at most `lgbm.max_query_rows` rows (LightGBM refuses more than 10000).
Relevance labels are runtime-quantile grades within the graph: with q = (configs of the graph strictly faster) /
(configs of the graph), label = G - 1 - floor(q * G) for G = `label_grades`, so the fastest get G - 1, ties share
a grade and each grade holds about 1/G of the graph. Early stopping watches one metric on valid
(`first_metric_only`): by default the collection's own score (mean per-graph Kendall tau for layout, tile score for
tile) through a custom eval; `eval_metric=ndcg` uses LightGBM's ndcg@k instead. Predictions are minus the
predicted relevance (lower = faster), expanded to every original config through `config_inverse`.

Outputs: `<models_dir>/lgbm/<slug>/model.txt`, `<plots_dir>/lgbm/<slug>/importance.{png,csv}`,
`<predictions_dir>/lgbm/<slug>/{valid,test}.npz`, metrics via `pipeline.scoring.evaluate`.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.config import stage_args, warn_threads
from pipeline.files import atomic_path, write_csv
from pipeline.features.table import FeatureSpec, GraphFeaturizer
from pipeline.predictions import Predictions, predictions_path, save_predictions
from pipeline.pruned import PrunedGraph, iter_split, read_index
from pipeline.tpugraphs.schema import PREDICTED_SPLITS

MODEL = "lgbm"
LIGHTGBM_MAX_QUERY_ROWS = 10000     # LightGBM: "Number of rows ... exceeds upper limit of 10000 for a query"
LIGHTGBM_DEFAULT_GRADES = 31        # length of LightGBM's default label_gain


def relevance_labels(runtime: np.ndarray, grades: int) -> np.ndarray:
    """int32 [configs] runtime-quantile grades in 0..grades-1, fastest = grades-1 (see module docstring)."""
    runtime = np.asarray(runtime, dtype=np.float64)
    faster = np.searchsorted(np.sort(runtime), runtime, side="left")          # configs strictly faster
    return (grades - 1 - np.floor(faster * grades / max(len(runtime), 1))).astype(np.int32)


def sample_rows(n_rows: int, limit: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted row indices: all rows when limit <= 0 or n_rows <= limit, else `limit` drawn without replacement."""
    if limit <= 0 or n_rows <= limit:
        return np.arange(n_rows)
    return np.sort(rng.choice(n_rows, size=limit, replace=False))


def split_queries(rows: np.ndarray, max_query_rows: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle `rows` and cut them into the fewest near-equal queries of at most max_query_rows (each sorted)."""
    if not 1 <= max_query_rows <= LIGHTGBM_MAX_QUERY_ROWS:
        raise ValueError(f"lgbm.max_query_rows: expected 1..{LIGHTGBM_MAX_QUERY_ROWS}, found {max_query_rows}")
    n_queries = -(-len(rows) // max_query_rows)
    return [np.sort(part) for part in np.array_split(rng.permutation(rows), n_queries)] if len(rows) else []


@dataclass
class RankData:
    """Rows of one split, contiguous per query and per graph."""

    features: np.ndarray     # [rows, features] float32
    label: np.ndarray        # [rows] int32 relevance grade
    group: list[int]         # query sizes in row order
    graph_offsets: np.ndarray  # [graphs + 1] row offsets of each graph
    runtime: np.ndarray      # [rows] float64 (tile: normalised)
    names: list[str]


def build_rank_data(graphs: Iterable[PrunedGraph], kind: str, spec: FeatureSpec, configs_per_graph: int,
                    label_grades: int, max_query_rows: int, rng: np.random.Generator, desc: str = "",
                    total: int | None = None) -> RankData:
    """Sample, label, chunk and featurise the configurations of every graph into one ranking data set."""
    features, labels, runtimes, group, offsets, names = [], [], [], [], [0], None
    for graph in tqdm(graphs, desc=desc, unit="graph", leave=False, total=total):
        featurizer = GraphFeaturizer(graph, kind, spec)
        if names is not None and featurizer.names != names:
            raise ValueError(f"graph {graph.graph_id!r}: feature columns differ from the collection's first graph")
        names = featurizer.names
        runtime = np.asarray(graph.config_runtime, dtype=np.float64)
        grade = relevance_labels(runtime, label_grades)
        queries = split_queries(sample_rows(graph.n_kept, configs_per_graph, rng), max_query_rows, rng)
        group += [len(q) for q in queries]
        rows = np.concatenate(queries) if queries else np.zeros(0, dtype=np.int64)
        features.append(featurizer.matrix(rows))
        labels.append(grade[rows])
        runtimes.append(runtime[rows])
        offsets.append(offsets[-1] + len(rows))
    if names is None:
        raise ValueError(f"{desc}: no graphs to build a ranking data set from")
    return RankData(np.concatenate(features), np.concatenate(labels), group, np.asarray(offsets),
                    np.concatenate(runtimes), names)


def lgb_params(lgbm: DictConfig, kind: str, seed: int) -> dict:
    """LightGBM parameters of one collection kind; deterministic for a fixed seed and num_threads."""
    settings = lgbm[kind]
    grades = int(settings.label_grades)
    if not 2 <= grades <= LIGHTGBM_DEFAULT_GRADES:
        raise ValueError(f"lgbm.{kind}.label_grades: expected 2..{LIGHTGBM_DEFAULT_GRADES}, found {grades}")
    gains = {"linear": [float(g) for g in range(grades)], "exponential": [float(2 ** g - 1) for g in range(grades)]}
    if settings.label_gain not in gains:
        raise ValueError(f"lgbm.{kind}.label_gain: expected one of {list(gains)}, found {settings.label_gain!r}")
    if lgbm.objective not in ("lambdarank", "rank_xendcg"):
        raise ValueError(f"lgbm.objective: expected lambdarank or rank_xendcg, found {lgbm.objective!r}")
    if lgbm.eval_metric not in ("score", "ndcg"):
        raise ValueError(f"lgbm.eval_metric: expected score or ndcg, found {lgbm.eval_metric!r}")
    return {
        "objective": lgbm.objective, "num_leaves": int(lgbm.num_leaves), "learning_rate": float(lgbm.learning_rate),
        "min_data_in_leaf": int(lgbm.min_data_in_leaf), "feature_fraction": float(lgbm.feature_fraction),
        "bagging_fraction": float(lgbm.bagging_fraction), "bagging_freq": int(lgbm.bagging_freq),
        "lambda_l2": float(lgbm.lambda_l2), "max_bin": int(lgbm.max_bin), "num_threads": int(lgbm.num_threads),
        "label_gain": gains[settings.label_gain],
        "lambdarank_truncation_level": int(settings.lambdarank_truncation_level),
        "metric": "ndcg" if lgbm.eval_metric == "ndcg" else "None", "eval_at": list(lgbm.eval_at),
        "seed": int(seed), "deterministic": True, "force_row_wise": True, "verbosity": -1,
    }


def score_eval(kind: str, data: RankData):
    """A LightGBM feval: the collection's mean per-graph score (higher is better) of minus the predictions."""
    from pipeline.scoring.metrics import graph_score

    bounds = [(a, b) for a, b in zip(data.graph_offsets[:-1], data.graph_offsets[1:]) if b > a]

    def feval(preds: np.ndarray, _dataset) -> tuple[str, float, bool]:
        return "score", float(np.mean([graph_score(kind, -preds[a:b], data.runtime[a:b]) for a, b in bounds])), True
    return feval


def train_ranker(train: RankData, valid: RankData, lgbm: DictConfig, kind: str, seed: int):
    """Fit with early stopping on valid's first metric. Returns (booster, {metric name: [value per round]})."""
    import lightgbm as lgb

    params = lgb_params(lgbm, kind, seed)
    dtrain = lgb.Dataset(train.features, train.label, group=train.group, feature_name=train.names)
    dvalid = lgb.Dataset(valid.features, valid.label, group=valid.group, reference=dtrain)
    history: dict = {}
    booster = lgb.train(params, dtrain, num_boost_round=int(lgbm.num_boost_round), valid_sets=[dvalid],
                        valid_names=["valid"], feval=score_eval(kind, valid) if lgbm.eval_metric == "score" else None,
                        callbacks=[lgb.early_stopping(int(lgbm.early_stopping_rounds), first_metric_only=True,
                                                      verbose=False), lgb.record_evaluation(history)])
    return booster, history.get("valid", {})


def predict_graph(booster, graph: PrunedGraph, kind: str, spec: FeatureSpec, num_threads: int) -> np.ndarray:
    """float64 [original configs]: minus the predicted relevance (lower = faster), via config_inverse."""
    featurizer = GraphFeaturizer(graph, kind, spec)
    if featurizer.names != booster.feature_name():
        raise ValueError(f"graph {graph.graph_id!r}: feature columns differ from the model's")
    relevance = np.empty(graph.n_kept, dtype=np.float64)
    for start, x in featurizer.iter_chunks():
        relevance[start:start + len(x)] = booster.predict(x, num_iteration=booster.best_iteration or None,
                                                          num_threads=num_threads)
    inverse = np.asarray(graph.config_inverse, dtype=np.int64)
    if inverse.size and (inverse.min() < 0 or inverse.max() >= graph.n_kept):
        raise ValueError(f"graph {graph.graph_id!r}: config_inverse outside 0..{graph.n_kept - 1}")
    return -relevance[inverse]


def predict_split(booster, graphs: Iterable[PrunedGraph], kind: str, spec: FeatureSpec, num_threads: int,
                  desc: str = "", total: int | None = None) -> Predictions:
    """Scores for every original config of every graph; checked to cover each exactly once."""
    preds, n_configs = Predictions(), {}
    for graph in tqdm(graphs, desc=desc, unit="graph", leave=False, total=total):
        preds[graph.graph_id] = predict_graph(booster, graph, kind, spec, num_threads)
        n_configs[graph.graph_id] = graph.n_configs
    preds.check_covers(n_configs, where=desc)
    return preds


def importance_table(booster) -> pd.DataFrame:
    """Feature importance (total gain and split count), most important first."""
    table = pd.DataFrame({"feature": booster.feature_name(),
                          "gain": booster.feature_importance("gain", iteration=booster.best_iteration or None),
                          "split": booster.feature_importance("split", iteration=booster.best_iteration or None)})
    return table.sort_values(["gain", "feature"], ascending=[False, True], kind="stable").reset_index(drop=True)


def write_importance(table: pd.DataFrame, csv_path: Path, png_path: Path, top: int, title: str) -> None:
    """Write the importance CSV and a bar plot of the `top` features by gain (both atomically)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    write_csv(table, csv_path)
    shown = table.head(top).iloc[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.25 * len(shown) + 1.2))
    ax.barh(shown["feature"], shown["gain"])
    ax.set_xlabel("total gain")
    ax.set_title(title)
    fig.tight_layout()
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def split_size(pruned_dir, slug: str, split: str) -> int:
    """Graphs of one split in the pruned index (the total of the progress bars)."""
    return int((read_index(pruned_dir, slug)["split"] == split).sum())


def run(cfg: DictConfig, collection) -> dict:
    """Train on train, early-stop on valid, write the model, importance, predictions and metrics of one collection."""
    from pipeline import tracking
    from pipeline.scoring.evaluate import evaluate_and_write

    started = time.perf_counter()
    lgbm, kind, slug = cfg.lgbm, collection.kind, collection.slug
    settings, spec = lgbm[kind], FeatureSpec.from_cfg(lgbm)
    rng = np.random.default_rng(int(cfg.seed))
    data = {split: build_rank_data(iter_split(cfg.paths.pruned_dir, slug, split), kind, spec, limit,
                                   int(settings.label_grades), int(lgbm.max_query_rows), rng, desc=f"{slug}/{split}",
                                   total=split_size(cfg.paths.pruned_dir, slug, split))
            for split, limit in (("train", int(settings.configs_per_graph)),
                                 ("valid", int(settings.valid_configs_per_graph)))}
    booster, history = train_ranker(data["train"], data["valid"], lgbm, kind, int(cfg.seed))
    fit_seconds = time.perf_counter() - started

    model_path = Path(cfg.paths.models_dir) / MODEL / slug / "model.txt"
    with atomic_path(model_path) as tmp:
        booster.save_model(str(tmp), num_iteration=booster.best_iteration or None)
    plots = Path(cfg.paths.plots_dir) / MODEL / slug
    importance = importance_table(booster)
    write_importance(importance, plots / "importance.csv", plots / "importance.png", int(lgbm.importance_top),
                     f"LightGBM {collection.name}: top features by gain")

    preds = {split: predict_split(booster, iter_split(cfg.paths.pruned_dir, slug, split), kind, spec,
                                  int(lgbm.num_threads), desc=f"predict {slug}/{split}",
                                  total=split_size(cfg.paths.pruned_dir, slug, split)) for split in PREDICTED_SPLITS}
    for split, split_preds in preds.items():
        save_predictions(split_preds, predictions_path(cfg.paths.predictions_dir, MODEL, slug, split))
    extra = {"seconds": round(time.perf_counter() - started, 3), "fit_seconds": round(fit_seconds, 3),
             "best_iteration": int(booster.best_iteration), "train_rows": int(len(data["train"].label)),
             "features": len(data["train"].names)}
    result = evaluate_and_write(cfg, "lgbm", collection, preds, extra=extra)
    with tracking.start_run(cfg, "lgbm", slug) as wandb_run:
        for step, values in enumerate(zip(*history.values())):
            wandb_run.log({f"valid/{name}": v for name, v in zip(history, values)}, step=step)
        wandb_run.summary.update({**extra, **{f"{s}/score": result[s]["score"] for s in PREDICTED_SPLITS
                                              if s in result}})
        tracking.log_table(wandb_run, "per_graph", pd.DataFrame(result["per_graph"]))
        tracking.log_table(wandb_run, "importance", importance.head(int(lgbm.importance_top)))
        tracking.log_image(wandb_run, "importance_plot", plots / "importance.png")
    return result


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m pipeline.lgbm --collection <slug> [overrides]`."""
    from pipeline.tpugraphs.dataset import Collection

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # idle OpenMP threads must not spin on a busy box
    args, cfg = stage_args(__doc__, argv)
    warn_threads("lgbm.num_threads", int(cfg.lgbm.num_threads))
    result = run(cfg, Collection.parse(args.collection))
    scores = {s: round(result[s]["score"], 4) for s in PREDICTED_SPLITS if s in result}
    print(f"lgbm {args.collection}: {scores} in {result['seconds']} s")


if __name__ == "__main__":
    main()
