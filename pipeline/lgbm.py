"""Stage `lgbm`: a LightGBM ranker per collection, from the pruned graphs to predictions on valid and test.

One query per graph: train configurations (de-duplicated kept rows) are sampled per graph (`configs_per_graph`)
and chunked into queries of at most `lgbm.max_query_rows` rows (LightGBM refuses more than 10000).
Relevance labels are runtime-quantile grades within the graph: with q = (configs of the graph strictly faster) /
(configs of the graph), label = G - 1 - floor(q * G) for G = `label_grades`, so the fastest get G - 1, ties share
a grade and each grade holds about 1/G of the graph. The objective is set per collection kind
(`lgbm.<kind>.objective`): `lambdarank` (pairs weighted by NDCG position discounts, top-heavy like the tile
score), `rank_xendcg`, or `pairwise` (a logistic loss on every pair with different runtimes, all pairs weighing the
same as in Kendall tau; it reads runtimes, not grades). LightGBM's default label_gain has 31 entries and refuses a
label past it; the explicit gains passed here allow any number of lambdarank grades (at most a query's rows make
sense), while rank_xendcg ignores label_gain and computes 2^label in a 32-bit int (31 grades at most).
Early stopping watches one metric on valid
(`first_metric_only`): by default the collection's own score (mean per-graph Kendall tau for layout, tile score for
tile) through a custom eval; `eval_metric=ndcg` uses LightGBM's ndcg@k instead. Every run records its best and
last boosting round and whether it `stopped` at a plateau (patience exhausted) or at the `num_boost_round` budget
(warned on stderr: the model may not have converged). Predictions are minus the
predicted relevance (lower = faster), expanded to every original config through `config_inverse`.

Outputs: `<models_dir>/lgbm/<slug>/model.txt`, `<plots_dir>/lgbm/<slug>/importance.{png,csv}`,
`<predictions_dir>/lgbm/<slug>/{valid,test}.npz`, metrics via `pipeline.scoring.evaluate`.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.config import stage_args, warn_threads
from pipeline.timings import Stopwatch, write_timings
from pipeline.files import atomic_path, write_csv
from pipeline.features.table import FeatureSpec, GraphFeaturizer
from pipeline.predictions import Predictions, predictions_path, save_predictions
from pipeline.pruned import PrunedGraph, iter_split, read_index
from pipeline.tpugraphs.schema import PREDICTED_SPLITS

MODEL = "lgbm"
LIGHTGBM_MAX_QUERY_ROWS = 10000     # LightGBM: "Number of rows ... exceeds upper limit of 10000 for a query"
LIGHTGBM_XENDCG_GRADES = 31         # rank_xendcg's gain 2^label is an int: labels 0..30
LABEL_GAINS = ("linear", "exponential")
OBJECTIVES = ("lambdarank", "rank_xendcg", "pairwise")   # pairwise: `pairwise_objective`, Kendall tau's pairs


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


def max_label_grades(objective: str) -> int:
    """The most relevance grades LightGBM accepts for an objective given explicit label gains (see docstring)."""
    return LIGHTGBM_XENDCG_GRADES if objective == "rank_xendcg" else LIGHTGBM_MAX_QUERY_ROWS


def label_gains(kind_name: str, gain: str, grades: int) -> list[float]:
    """LightGBM label_gain for grades 0..grades-1: `linear` (g) or `exponential` (2^g - 1)."""
    if gain == "linear":
        return [float(g) for g in range(grades)]
    if gain == "exponential":
        return [float(2.0 ** g - 1) for g in range(grades)]
    raise ValueError(f"lgbm.{kind_name}.label_gain: expected one of {list(LABEL_GAINS)}, found {gain!r}")


def lgb_params(lgbm: DictConfig, kind: str, seed: int) -> dict:
    """LightGBM parameters of one collection kind; deterministic for a fixed seed and num_threads.

    `seed` seeds every LightGBM generator (feature_fraction, bagging), so runs with different global seeds differ
    whenever feature_fraction or bagging_fraction is below 1.
    """
    settings = lgbm[kind]
    objective = str(settings.objective)
    if objective not in OBJECTIVES:
        raise ValueError(f"lgbm.{kind}.objective: expected one of {list(OBJECTIVES)}, found {objective!r}")
    grades, most = int(settings.label_grades), max_label_grades(objective)
    if not 2 <= grades <= most:
        raise ValueError(f"lgbm.{kind}.label_grades: expected 2..{most} for objective {objective}, found {grades}")
    gains = label_gains(kind, settings.label_gain, grades)
    if lgbm.eval_metric not in ("score", "ndcg"):
        raise ValueError(f"lgbm.eval_metric: expected score or ndcg, found {lgbm.eval_metric!r}")
    return {
        "objective": objective, "num_leaves": int(lgbm.num_leaves), "learning_rate": float(lgbm.learning_rate),
        "min_data_in_leaf": int(lgbm.min_data_in_leaf), "feature_fraction": float(lgbm.feature_fraction),
        "bagging_fraction": float(lgbm.bagging_fraction), "bagging_freq": int(lgbm.bagging_freq),
        "lambda_l2": float(lgbm.lambda_l2), "max_bin": int(lgbm.max_bin), "num_threads": int(lgbm.num_threads),
        "label_gain": gains,
        "lambdarank_truncation_level": int(settings.lambdarank_truncation_level),
        "metric": "ndcg" if lgbm.eval_metric == "ndcg" else "None", "eval_at": list(lgbm.eval_at),
        "seed": int(seed), "deterministic": True, "force_row_wise": True, "verbosity": -1,
    }


def pairwise_objective(data: RankData):
    """A LightGBM objective: logistic loss on every pair of a query with different runtimes, all pairs weighing
    the same (as in Kendall tau), each row's gradient averaged over its query's other rows.

    Relevance s should order faster first: pair (i faster than j) costs log(1 + exp(-(s_i - s_j))).
    """
    from scipy.special import expit

    bounds = np.cumsum([0, *data.group])

    def objective(preds: np.ndarray, _dataset) -> tuple[np.ndarray, np.ndarray]:
        grad, hess = np.zeros_like(preds), np.zeros_like(preds)
        for a, b in zip(bounds[:-1], bounds[1:]):
            if b - a < 2:
                continue
            runtime, score = data.runtime[a:b], preds[a:b]
            faster = runtime[:, None] < runtime[None, :]                  # [rows, rows] i faster than j
            push = expit(score[None, :] - score[:, None]) * faster        # sigma(-(s_i - s_j)) on ordered pairs
            curve = push * (1.0 - push)
            grad[a:b] = (push.sum(0) - push.sum(1)) / (b - a - 1)
            hess[a:b] = (curve.sum(0) + curve.sum(1)) / (b - a - 1)
        return grad, hess
    return objective


def score_eval(kind: str, data: RankData):
    """A LightGBM feval: the collection's mean per-graph score (higher is better) of minus the predictions."""
    from pipeline.scoring.metrics import graph_score

    bounds = [(a, b) for a, b in zip(data.graph_offsets[:-1], data.graph_offsets[1:]) if b > a]

    def feval(preds: np.ndarray, _dataset) -> tuple[str, float, bool]:
        return "score", float(np.mean([graph_score(kind, -preds[a:b], data.runtime[a:b]) for a, b in bounds])), True
    return feval


def stop_reason(best_iteration: int, last_iteration: int, patience: int) -> str:
    """`plateau` when the last `patience` rounds did not improve on the best one, else `budget`."""
    return "plateau" if last_iteration - best_iteration >= patience else "budget"


def round_progress(total: int, desc: str):
    """A LightGBM callback drawing a `round n/N` bar with the latest valid metrics; `.close()` it after training."""
    bar = tqdm(total=total, desc=desc, unit="round", leave=False)

    def callback(env) -> None:
        bar.update(env.iteration + 1 - bar.n)
        bar.set_postfix({name: f"{value:.4f}" for _, name, value, _ in env.evaluation_result_list}, refresh=False)
    callback.bar, callback.close = bar, bar.close
    return callback


def train_ranker(train: RankData, valid: RankData, lgbm: DictConfig, kind: str, seed: int, desc: str = ""):
    """Fit with early stopping on valid's first metric, drawing a `round n/N` bar.

    Returns (booster, {metric name: [value per round]}); the booster keeps the best round's trees only.
    """
    import lightgbm as lgb

    params = lgb_params(lgbm, kind, seed)
    if params["objective"] == "pairwise":
        params["objective"] = pairwise_objective(train)
    dtrain = lgb.Dataset(train.features, train.label, group=train.group, feature_name=train.names)
    dvalid = lgb.Dataset(valid.features, valid.label, group=valid.group, reference=dtrain)
    history: dict = {}
    progress = round_progress(int(lgbm.num_boost_round), desc or "boost")
    try:
        booster = lgb.train(params, dtrain, num_boost_round=int(lgbm.num_boost_round), valid_sets=[dvalid],
                            valid_names=["valid"],
                            feval=score_eval(kind, valid) if lgbm.eval_metric == "score" else None,
                            callbacks=[lgb.early_stopping(int(lgbm.early_stopping_rounds), first_metric_only=True,
                                                          verbose=False), lgb.record_evaluation(history), progress])
    finally:
        progress.close()
    return booster, history.get("valid", {})


def convergence(best_iteration: int, history: dict, patience: int) -> dict:
    """{best_iteration, last_iteration, stopped} of a run: its rounds are those `history` recorded."""
    last = len(next(iter(history.values()))) if history else 0
    return {"best_iteration": int(best_iteration), "last_iteration": last,
            "stopped": stop_reason(int(best_iteration), last, patience)}


def warn_budget(where: str, convergence: dict, budget: int) -> bool:
    """Say on stderr when training stopped at the round budget, not at a plateau; returns whether it warned."""
    if convergence["stopped"] != "budget":
        return False
    print(f"warning: {where}: LightGBM stopped at the budget lgbm.num_boost_round={budget} (best round "
          f"{convergence['best_iteration']}); it may not have converged, raise num_boost_round or learning_rate",
          file=sys.stderr)
    return True


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


def plotted_importance(table: pd.DataFrame, top: int) -> tuple[pd.DataFrame, int]:
    """The at most `top` features of `table` (most important first) that have gain > 0, and how many have none."""
    used = table[table["gain"] > 0]
    return used.head(top), len(table) - len(used)


def write_importance(table: pd.DataFrame, csv_path: Path, png_path: Path, top: int, title: str) -> None:
    """Write the importance CSV (every feature) and a bar plot of the `top` features by gain, leaving out the
    features with zero gain (the title says how many); both atomically."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    write_csv(table, csv_path)
    shown, unused = plotted_importance(table, top)
    shown = shown.iloc[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.25 * len(shown) + 1.2))
    ax.barh(shown["feature"], shown["gain"])
    ax.set_xlabel("total gain")
    ax.set_title(f"{title}\n({unused} of {len(table)} features with zero gain not shown)" if unused else title)
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

    watch = Stopwatch()
    lgbm, kind, slug = cfg.lgbm, collection.kind, collection.slug
    settings, spec = lgbm[kind], FeatureSpec.from_cfg(lgbm)
    rng = np.random.default_rng(int(cfg.seed))
    data = {split: build_rank_data(iter_split(cfg.paths.pruned_dir, slug, split), kind, spec, limit,
                                   int(settings.label_grades), int(lgbm.max_query_rows), rng, desc=f"{slug}/{split}",
                                   total=split_size(cfg.paths.pruned_dir, slug, split))
            for split, limit in (("train", int(settings.configs_per_graph)),
                                 ("valid", int(settings.valid_configs_per_graph)))}
    booster, history = train_ranker(data["train"], data["valid"], lgbm, kind, int(cfg.seed), desc=f"boost {slug}")
    converged = convergence(booster.best_iteration, history, int(lgbm.early_stopping_rounds))
    warn_budget(f"lgbm {slug}", converged, int(lgbm.num_boost_round))
    fit_seconds = watch.elapsed()

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
        tracking.log_table(wandb_run, "importance", plotted_importance(importance, int(lgbm.importance_top))[0])
        tracking.log_image(wandb_run, "importance_plot", plots / "importance.png")
    return result


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m pipeline.lgbm --collection <slug> [overrides]`."""
    from pipeline.scoring.evaluate import score_line
    from pipeline.tpugraphs.dataset import Collection

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # idle OpenMP threads must not spin on a busy box
    args, cfg = stage_args(__doc__, argv)
    warn_threads("lgbm.num_threads", int(cfg.lgbm.num_threads))
    collection = Collection.parse(args.collection)
    result = run(cfg, collection)
    print(score_line(MODEL, collection.slug, result, result["seconds"]))


if __name__ == "__main__":
    main()
