"""Read stage outputs into DataFrames for the notebooks (notebooks/01-data.ipynb, notebooks/02-results.ipynb).

Pure readers, no writes. Every folder argument is a `cfg.paths.*` value and `slugs` is `cfg.data.collections`.
Readers of per-collection outputs return `(table, missing)`: the rows of the files that exist and the paths of those
that do not (a run without a model shows a note instead of failing). A file that exists but is malformed raises a
PipelineError (a ValueError) naming the file, what was expected and what was found.

Where the stages write (file names from pipeline.pruned and pipeline.scoring.evaluate; the GNN/LightGBM plot folders are
mirrored here so the notebooks need neither torch nor LightGBM):
- prune: `<pruned_dir>/<slug>/{index.csv,report.json}`, `<pruned_dir>/<slug>/<split>/<graph_id>/*.npy`;
- every model stage: `<metrics_dir>/<stage>/<slug>.json` ({"valid"|"test": {"score", "graphs"}, ...}),
  `<plots_dir>/<stage>/<slug>_per_graph.csv` (split, graph_id, score) and `<slug>_scatter.csv` (valid ranks);
- gnn: `<plots_dir>/gnn/<slug>/curve.csv`; lgbm: `<plots_dir>/lgbm/<slug>/importance.csv`;
- ensemble: weights and member_valid_scores in its metrics JSON; submit: `<metrics_dir>/submit.json`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline import files
from pipeline.errors import PipelineError, shortened
from pipeline.files import is_number, read_json
from pipeline.predictions import load_predictions, predictions_path
from pipeline.tpugraphs.schema import LABELLED_SPLITS, PREDICTED_SPLITS, SPLITS
from pipeline.scoring.evaluate import metrics_file, per_graph_file, scatter_file
from pipeline.pruned import (COUNT_COLUMNS, INDEX_COLUMNS, INDEX_FILE, REPORT_FILE, collection_dir, graph_dir,
                             load_pruned_graph, read_index)

MODEL_STAGES: dict[str, str] = {"heuristic": "heuristic", "lgbm": "lgbm", "gnn": "gnn",
                                "ensemble": "ensemble"}   # model (predictions folder) -> stage writing its metrics
GNN_CURVE = ("gnn", "curve.csv")       # <plots_dir>/gnn/<slug>/curve.csv
LGBM_IMPORTANCE = ("lgbm", "importance.csv")
SUBMIT_METRICS = "submit.json"
AUTOTUNE_METRICS = "autotune.json"   # stage autotune (pipeline/autotune.py)
AUTOTUNE_SEARCHES = {"pick": "t_pick_ns", "oracle": "t_oracle_ns", "random search": "t_random_search_ns",
                     "featurizer sample": "t_featurizer_sample_ns"}   # a search's name -> its runtime's row key
AUTOTUNE_COLUMNS = ("program", "collection", "t_default_ns", *AUTOTUNE_SEARCHES.values(), "share", "guard_kept_pick")
CEILING = "ceiling"          # pseudo-model: the score of ranking by the dataset's noise-free cost model

Found = tuple[pd.DataFrame, list[Path]]


TEXT_COLUMNS = ("graph_id", "split", "feature")   # read verbatim (`files.read_csv`): a graph id may be `NA` or `None`


def read_csv(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """A CSV that must have `columns` (graph_id read as text), each but TEXT_COLUMNS a number in every row;
    PipelineError naming the file and the missing or non-numeric columns."""
    table = files.read_csv(path, TEXT_COLUMNS)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise PipelineError(f"{path}: columns {missing} missing; expected {list(columns)}, found {list(table.columns)}")
    check_numeric(path, table, [c for c in columns if c not in TEXT_COLUMNS], complete=True)
    return table


def check_numeric(path: Path, table: pd.DataFrame, columns: Sequence[str], complete: bool = False) -> None:
    """PipelineError naming the file and column unless each of `columns` holds numbers (and, if `complete`, no empty
    cell): a cell such as 'abc' made the column text, which the notebooks' charts and sums misread."""
    for column in columns:
        values = table[column]
        if len(values) and (not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)):
            bad = values[pd.to_numeric(values, errors="coerce").isna() & values.notna()]
            raise PipelineError(f"{path}: column {column!r} expected numbers, found "
                             f"{shortened(bad.iloc[0] if len(bad) else values.dtype)}; re-run the stage that "
                             f"writes it")
        if complete and values.isna().any():
            raise PipelineError(f"{path}: column {column!r} expected a number in every row, found an empty cell in "
                             f"row {int(values.isna().to_numpy().argmax()) + 1} (a file cut short?); re-run the stage")


def _concat(frames: list[pd.DataFrame], columns: Sequence[str]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(columns))


def _per_collection(paths: Mapping[str, Path], columns: Sequence[str]) -> Found:
    """Read `{slug: csv path}` into one table with a leading `collection` column; missing files are listed."""
    frames, missing = [], []
    for slug, path in paths.items():
        if not path.exists():
            missing.append(path)
            continue
        frames.append(read_csv(path, columns).assign(collection=slug))
    table = _concat(frames, list(columns) + ["collection"])
    return table[["collection"] + [c for c in table.columns if c != "collection"]], missing


def missing_note(missing: Iterable[Path], what: str) -> str:
    """One line for a notebook: which outputs of `what` are absent (empty string when none)."""
    missing = [str(p) for p in missing]
    if not missing:
        return ""
    return f"Note: {len(missing)} {what} output(s) not found (stage not run?): " + ", ".join(missing)


# ---------------------------------------------------------------- data (01-data.ipynb)

def pruned_index(pruned_dir: str | Path, slugs: Sequence[str]) -> Found:
    """Every pruned graph of every collection: index.csv rows plus `collection` (missing index.csv files listed)."""
    frames, missing = [], []
    for slug in slugs:
        path = collection_dir(pruned_dir, slug) / INDEX_FILE
        if not path.exists():
            missing.append(path)
            continue
        table = read_index(pruned_dir, slug)
        check_numeric(path, table, COUNT_COLUMNS, complete=True)
        unknown = sorted(set(table["split"]) - set(SPLITS))
        if unknown:
            raise PipelineError(f"{path}: column 'split' expected one of {list(SPLITS)}, found "
                             f"{shortened(unknown[0])}; re-run the prune stage")
        frames.append(table.assign(collection=slug))
    table = _concat(frames, ["collection"] + INDEX_COLUMNS)
    return table[["collection"] + [c for c in table.columns if c != "collection"]], missing


def split_counts(index: pd.DataFrame) -> pd.DataFrame:
    """Graphs, nodes, edges and configs (before/after pruning) per collection and split, from `pruned_index`."""
    counts = index.groupby(["collection", "split"], sort=False).agg(graphs=("graph_id", "size"),
                                                                    **{c: (c, "sum") for c in COUNT_COLUMNS})
    return counts.reset_index()


def keep_ratios(counts: pd.DataFrame) -> pd.DataFrame:
    """What pruning keeps: node, edge and config (after de-duplication) fractions per row of `split_counts`."""
    ratios = counts[["collection", "split", "graphs"]].copy()
    for name, before, after in (("node_keep", "nodes", "nodes_pruned"), ("edge_keep", "edges", "edges_pruned"),
                                ("config_keep", "configs", "configs_dedup")):
        ratios[name] = counts[after] / counts[before].where(counts[before] > 0)
    return ratios


def prune_params(pruned_dir: str | Path, slugs: Sequence[str]) -> Found:
    """Per collection, the prune report's parameters, kept node-feature columns and skipped graphs."""
    rows, missing = [], []
    for slug in slugs:
        path = collection_dir(pruned_dir, slug) / REPORT_FILE
        if not path.exists():
            missing.append(path)
            continue
        report = read_json(path)
        for key, kind in (("params", dict), ("skipped", list)):
            if not isinstance(report.get(key, kind()), kind):
                raise PipelineError(f"{path}: key {key!r} expected a JSON {'object' if kind is dict else 'list'}, "
                                 f"found {shortened(report[key])}; re-run the prune stage")
        row = {"collection": slug, "node_feat_columns": report.get("node_feat_columns"),
               "skipped": len(report.get("skipped", []))}
        rows.append({**row, **{f"prune.{k}": v for k, v in report.get("params", {}).items()}})
    return _concat([pd.DataFrame(rows)] if rows else [], ["collection", "node_feat_columns", "skipped"]), missing


def runtime_summary(pruned_dir: str | Path, index: pd.DataFrame, splits: Sequence[str] = LABELLED_SPLITS,
                    quantiles: int = 21) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runtime spread of every labelled graph (pruned runtimes: layout raw, tile divided by its normalizer).

    Args:
        pruned_dir: cfg.paths.pruned_dir.
        index: `pruned_index` table (collection, split, graph_id, ...).
        splits: the splits to read (test runtimes are unknown on real data).
        quantiles: points per graph of the returned distribution (bounded memory on 100k-config graphs).
    Returns:
        (per_graph, distribution): per_graph has collection, split, graph_id, configs (kept rows), best, median,
        worst, spread (= worst / best); distribution has collection, split, graph_id, q, ratio = the q-quantile of
        runtime / best runtime of that graph, so every graph weighs the same.
    """
    rows, dists = [], []
    q = np.linspace(0.0, 1.0, quantiles)  # [quantiles]
    for row in index[index["split"].isin(splits)].itertuples(index=False):
        folder = graph_dir(pruned_dir, row.collection, row.split, row.graph_id)
        runtime = np.asarray(load_pruned_graph(folder).config_runtime, dtype=np.float64)  # [kept configs]
        if runtime.size == 0 or np.any(runtime <= 0):
            raise PipelineError(f"{folder / 'config_runtime.npy'}: expected positive runtimes on split {row.split!r}, "
                             f"found {runtime.size} values, min {runtime.min() if runtime.size else 'none'}")
        best = runtime.min()
        rows.append({"collection": row.collection, "split": row.split, "graph_id": row.graph_id,
                     "configs": runtime.size, "best": best, "median": float(np.median(runtime)),
                     "worst": runtime.max(), "spread": runtime.max() / best})
        dists.append(pd.DataFrame({"collection": row.collection, "split": row.split, "graph_id": row.graph_id,
                                   "q": q, "ratio": np.quantile(runtime / best, q)}))
    per_graph = _concat([pd.DataFrame(rows)] if rows else [], ["collection", "split", "graph_id", "configs", "best",
                                                               "median", "worst", "spread"])
    return per_graph, _concat(dists, ["collection", "split", "graph_id", "q", "ratio"])


# ---------------------------------------------------------------- results (02-results.ipynb)

def scores(metrics_dir: str | Path, slugs: Sequence[str], models: Mapping[str, str] = MODEL_STAGES) -> Found:
    """Collection score per model and split: columns collection, model, split, score, graphs (long format).

    A generated dataset's ceiling (metrics JSON `ceiling: {split: score}`) is one more row, model CEILING.
    """
    rows, missing, ceilings = [], [], {}
    for model, stage in models.items():
        for slug in slugs:
            path = metrics_file(metrics_dir, stage, slug)
            if not path.exists():
                missing.append(path)
                continue
            result = read_json(path)
            for split in PREDICTED_SPLITS:
                if split in result:
                    if not isinstance(result[split], dict) or "score" not in result[split]:
                        raise PipelineError(f"{path}: key {split!r} expected {{'score', 'graphs'}}, "
                                         f"found {result[split]!r}")
                    rows.append({"collection": slug, "model": model, "split": split,
                                 "score": score_value(path, f"{split}.score", result[split]["score"]),
                                 "graphs": result[split].get("graphs")})
                    ceiling = result.get("ceiling", {})
                    if not isinstance(ceiling, dict):
                        raise PipelineError(f"{path}: key 'ceiling' expected {{split: score}}, found "
                                         f"{shortened(ceiling)}")
                    if split in ceiling:
                        ceilings[slug, split] = {"collection": slug, "model": CEILING, "split": split,
                                                 "score": score_value(path, f"ceiling.{split}", ceiling[split]),
                                                 "graphs": result[split].get("graphs")}
    rows += list(ceilings.values())
    return _concat([pd.DataFrame(rows)] if rows else [], ["collection", "model", "split", "score", "graphs"]), missing


def score_value(path: Path, key: str, value: object) -> float:
    """`value` as a float when it is a finite number (not a bool); else PipelineError naming the file and key."""
    if not is_number(value):
        raise PipelineError(f"{path}: key {key!r} expected a finite number, found {shortened(value)}; re-run the "
                         f"stage that writes it")
    return float(value)


def score_table(long: pd.DataFrame, models: Sequence[str] = (*MODEL_STAGES, CEILING)) -> pd.DataFrame:
    """`scores` pivoted: one row per collection and split, one column per model (models in the given order),
    the dataset's ceiling last when it has one."""
    table = long.pivot_table(index=["collection", "split"], columns="model", values="score", aggfunc="first")
    return table.reindex(columns=[m for m in models if m in table.columns])


OVERALL = "overall"          # the row of score tables holding the mean over collections (the Kaggle score)


def with_overall(table: pd.DataFrame) -> pd.DataFrame:
    """score_table plus one `overall` row per split: each column's mean over the collections, i.e. the Kaggle score;
    NaN where a collection lacks the score (a mean over fewer collections is not the leaderboard's number)."""
    collections = table.index.get_level_values("collection").unique()
    splits = table.index.get_level_values("split").unique()
    rows = {(OVERALL, split): table.xs(split, level="split").reindex(collections).mean(skipna=False)
            for split in splits}
    overall = pd.DataFrame.from_dict(rows, orient="index")
    overall.index = pd.MultiIndex.from_tuples(overall.index, names=table.index.names)
    return pd.concat([table, overall.reindex(columns=table.columns)])


def per_graph(plots_dir: str | Path, slugs: Sequence[str], models: Mapping[str, str] = MODEL_STAGES) -> Found:
    """Per-graph scores of every model: columns collection, model, split, graph_id, score."""
    frames, missing = [], []
    for model, stage in models.items():
        table, absent = _per_collection({s: per_graph_file(plots_dir, stage, s) for s in slugs},
                                        ["split", "graph_id", "score"])
        frames.append(table.assign(model=model))
        missing += absent
    table = _concat([f for f in frames if len(f)], ["collection", "split", "graph_id", "score", "model"])
    return table[["collection", "model", "split", "graph_id", "score"]], missing


def prediction_counts(predictions_dir: str | Path, slugs: Sequence[str], models: Sequence[str] = tuple(MODEL_STAGES),
                      splits: Sequence[str] = PREDICTED_SPLITS) -> Found:
    """What each model predicted: collection, model, split, graphs, configs (scores in the predictions file)."""
    rows, missing = [], []
    for model in models:
        for slug in slugs:
            for split in splits:
                path = predictions_path(predictions_dir, model, slug, split)
                if not path.exists():
                    missing.append(path)
                    continue
                preds = load_predictions(path)
                rows.append({"collection": slug, "model": model, "split": split, "graphs": len(preds),
                             "configs": sum(len(preds[g]) for g in preds)})
    return _concat([pd.DataFrame(rows)] if rows else [], ["collection", "model", "split", "graphs", "configs"]), missing


def rank_scatter_points(plots_dir: str | Path, slugs: Sequence[str], model: str = "ensemble") -> Found:
    """Predicted vs true rank of sampled valid configurations of one model (`<slug>_scatter.csv`)."""
    stage = MODEL_STAGES.get(model, model)
    return _per_collection({s: scatter_file(plots_dir, stage, s) for s in slugs},
                           ["graph_id", "true_rank", "predicted_rank"])


def gnn_curves(plots_dir: str | Path, slugs: Sequence[str]) -> Found:
    """GNN training curves: collection, seed, epoch, loss, valid_score, ... (gnn's curve.csv: one curve per
    member seed of `gnn.seeds`, so a collection's curve is its rows of one seed)."""
    return _per_collection({s: Path(plots_dir) / GNN_CURVE[0] / s / GNN_CURVE[1] for s in slugs},
                           ["seed", "epoch", "loss", "valid_score"])


def lgbm_importance(plots_dir: str | Path, slugs: Sequence[str], top_k: int) -> Found:
    """The `top_k` LightGBM features by total gain per collection: collection, feature, gain, split."""
    table, missing = _per_collection({s: Path(plots_dir) / LGBM_IMPORTANCE[0] / s / LGBM_IMPORTANCE[1]
                                      for s in slugs}, ["feature", "gain"])
    top = table.sort_values(["collection", "gain"], ascending=[True, False], kind="stable")
    return top.groupby("collection", sort=False).head(top_k).reset_index(drop=True), missing


def ensemble_weights(metrics_dir: str | Path, slugs: Sequence[str]) -> Found:
    """Ensemble members per collection: collection, member, weight, valid_score (the member's own)."""
    rows, missing = [], []
    for slug in slugs:
        path = metrics_file(metrics_dir, MODEL_STAGES["ensemble"], slug)
        if not path.exists():
            missing.append(path)
            continue
        result = read_json(path)
        if not isinstance(result.get("weights"), dict):
            raise PipelineError(f"{path}: key 'weights' expected {{member: weight}}, found {result.get('weights')!r}")
        member_scores = result.get("member_valid_scores", {})
        if not isinstance(member_scores, dict):
            raise PipelineError(f"{path}: key 'member_valid_scores' expected {{member: score}}, found "
                             f"{shortened(member_scores)}")
        rows += [{"collection": slug, "member": m, "weight": score_value(path, f"weights.{m}", w),
                  "valid_score": member_scores.get(m)} for m, w in result["weights"].items()]
    return _concat([pd.DataFrame(rows)] if rows else [], ["collection", "member", "weight", "valid_score"]), missing


def submit_scores(metrics_dir: str | Path) -> tuple[pd.DataFrame, float | None]:
    """The submission's test score per collection and its Kaggle score (mean), when submit scored it.

    Returns (empty table, None) when submit.json is absent or holds no test score (real data: no hidden truth).
    """
    path = Path(metrics_dir) / SUBMIT_METRICS
    if not path.exists():
        return pd.DataFrame(columns=["collection", "score"]), None
    test = read_json(path).get("test") or {}
    per_collection = test.get("collections", {}) if isinstance(test, dict) else None
    if not isinstance(per_collection, dict):
        raise PipelineError(f"{path}: key 'test' expected {{'collections': {{collection: score}}, 'kaggle_score'}}, "
                         f"found {shortened(test)}; re-run stage submit")
    table = pd.DataFrame({"collection": list(per_collection),
                          "score": [score_value(path, f"test.collections.{k}", v) for k, v in per_collection.items()]})
    score = test.get("kaggle_score")
    return table, None if score is None else score_value(path, "test.kaggle_score", score)


def autotune_runtimes(metrics_dir: str | Path) -> Found:
    """Stage autotune's rows: per built-in test program and layout collection the cost-model runtime of the
    compiler default, the pick and the oracle, the share of the oracle's gain and whether the guard kept the pick
    (an empty table on data without built-in programs; the file listed as missing when the stage did not run)."""
    path = Path(metrics_dir) / AUTOTUNE_METRICS
    if not path.exists():
        return pd.DataFrame(columns=list(AUTOTUNE_COLUMNS)), [path]
    rows = read_json(path).get("programs")
    if not isinstance(rows, list) or any(not isinstance(r, Mapping) or set(AUTOTUNE_COLUMNS) - set(r) for r in rows):
        raise PipelineError(f"{path}: key 'programs' must list rows with {list(AUTOTUNE_COLUMNS)}; re-run stage "
                            f"autotune")
    for i, row in enumerate(rows):      # a runtime of 0, null or text was a float() traceback or an inf/NaN ratio
        for key in ("t_default_ns", *AUTOTUNE_SEARCHES.values(), *(["share"] if row["share"] is not None else [])):
            if score_value(path, f"programs[{i}].{key}", row[key]) <= 0 and key != "share":   # share: null (no gain)
                raise PipelineError(f"{path}: key 'programs[{i}].{key}' expected a runtime > 0, found {row[key]!r}")
    return pd.DataFrame([{c: r[c] for c in AUTOTUNE_COLUMNS} for r in rows], columns=list(AUTOTUNE_COLUMNS)), []


def autotune_labels(runtimes: pd.DataFrame) -> pd.Series:
    """`<program> | <collection>` of each of `autotune_runtimes`' rows: how charts name a row."""
    return runtimes["program"].astype(str) + " | " + runtimes["collection"].astype(str)


def autotune_ratios(runtimes: pd.DataFrame) -> pd.DataFrame:
    """`autotune_runtimes`' rows in long form for a chart, one row per program, collection and search (the pick,
    the oracle and the two baselines at the pick's budget, `AUTOTUNE_SEARCHES`): program (`<program> | <collection>`),
    search, runtime_vs_default (the search's cost-model runtime / the compiler default's: 1 is the default, below
    is faster). No rows in, none out."""
    label = autotune_labels(runtimes)
    default = runtimes["t_default_ns"].astype(float)
    return pd.concat([pd.DataFrame({"program": label, "search": name,
                                    "runtime_vs_default": runtimes[key].astype(float) / default})
                      for name, key in AUTOTUNE_SEARCHES.items()], ignore_index=True)


def flatten(payload: Mapping, prefix: str = "") -> dict[str, object]:
    """Nested mapping -> {"a.b.c": scalar}; lists are kept whole."""
    flat: dict[str, object] = {}
    for key, value in payload.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def all_metrics(metrics_dir: str | Path) -> pd.DataFrame:
    """Every numeric value of every JSON under metrics_dir (like `dvc metrics show`): file, metric, value."""
    rows = []
    root = Path(metrics_dir)
    for path in sorted(root.rglob("*.json")):
        for metric, value in flatten(read_json(path)).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                rows.append({"file": path.relative_to(root).as_posix(), "metric": metric, "value": float(value)})
    return _concat([pd.DataFrame(rows)] if rows else [], ["file", "metric", "value"])
