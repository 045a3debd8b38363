"""Score a model's predictions against the truth and write the stage's metrics files.

Truth per split: `valid` comes from the npz files themselves (tile runtimes divided by their normalizers);
`test` only exists for synthetic data, whose generator keeps the hidden runtimes in `<synthetic_dir>/truth/`.
Every model stage writes `<metrics_dir>/<stage>/<slug>.json` (collection scores, for `dvc metrics`),
`<plots_dir>/<stage>/<slug>_per_graph.csv` (one row per graph, for `dvc plots` and the notebooks) and
`<plots_dir>/<stage>/<slug>_scatter.csv` (predicted vs true rank of valid configurations, for a scatter plot).
A generated dataset states its own ceiling per collection and split (the score of ranking by the noise-free cost
model, in `<synthetic_dir>/stats.json`); the metrics JSON then carries it as `ceiling: {valid, test}`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from pipeline.errors import PipelineError, shortened
from pipeline.files import is_number, read_json, write_csv, write_json
from pipeline.scoring import metrics
from pipeline.predictions import Predictions
from pipeline.tpugraphs.dataset import Collection, graph_paths, load_graph, npz_root
from pipeline.tpugraphs.schema import PREDICTED_SPLITS, STATS_FILE, TRUTH_SUBDIR



def target_runtimes(runtime: np.ndarray, normalizers: np.ndarray | None, kind: str, where: str) -> np.ndarray:
    """The runtimes a collection is ranked by: tile divides by the normalizers, layout uses raw runtimes."""
    runtime = np.asarray(runtime, dtype=np.float64)
    if kind != "tile":
        return runtime
    if normalizers is None or np.any(np.asarray(normalizers) <= 0):
        raise ValueError(f"{where}: tile truth needs positive config_runtime_normalizers")
    return runtime / np.asarray(normalizers, dtype=np.float64)


def load_truth(cfg: DictConfig, collection: Collection, split: str) -> dict[str, np.ndarray] | None:
    """True runtimes per graph of one split, or None when the split has no labels (real test data)."""
    if split == "test":
        if cfg.data.kind != "synthetic":
            return None
        folder = Path(cfg.paths.synthetic_dir) / TRUTH_SUBDIR / collection.slug
        truth = {}
        for path in sorted(folder.glob("*.npz")):
            with np.load(path, allow_pickle=False) as z:
                normalizers = z["config_runtime_normalizers"] if "config_runtime_normalizers" in z.files else None
                truth[path.stem] = target_runtimes(z["config_runtime"], normalizers, collection.kind, str(path))
        if not truth:
            raise FileNotFoundError(f"{folder}: no hidden test truth; re-run the synthesize stage")
        return truth
    root = npz_root(cfg.data.root)
    truth = {}
    for path in graph_paths(root, collection, split):
        graph = load_graph(path, collection, split)
        truth[graph.graph_id] = target_runtimes(graph.config_runtime, graph.config_runtime_normalizers,
                                                collection.kind, str(path))
    return truth


def dataset_ceiling(cfg: DictConfig, collection: Collection) -> dict[str, float] | None:
    """{split: ceiling} of a generated dataset (stats.json `ceiling`), None on real data or without ceilings."""
    if cfg.data.kind != "synthetic":
        return None
    path = Path(cfg.paths.synthetic_dir) / STATS_FILE
    if not path.is_file():
        return None
    ceilings = read_json(path).get("ceiling", {})
    if not isinstance(ceilings, dict):
        raise PipelineError(f"{path}: key 'ceiling': expected {{collection: {{split: ceiling}}}}, found "
                            f"{shortened(ceilings)}; rebuild the dataset (`dvc repro synthesize`)")
    per_split = ceilings.get(collection.slug)
    if per_split is not None and not (isinstance(per_split, dict) and
                                      all(v is None or is_number(v) for v in per_split.values())):
        raise PipelineError(f"{path}: key 'ceiling.{collection.slug}': expected {{split: a finite number or null}}, "
                            f"found {shortened(per_split)}; rebuild the dataset (`dvc repro synthesize`)")
    known = {str(k): float(v) for k, v in (per_split or {}).items() if v is not None}   # null: no ceiling there
    return known or None


def metrics_file(metrics_dir: str | Path, stage: str, slug: str) -> Path:
    """`<metrics_dir>/<stage>/<slug>.json`: the collection scores of one stage (`dvc metrics`)."""
    return Path(metrics_dir) / stage / f"{slug}.json"


def per_graph_file(plots_dir: str | Path, stage: str, slug: str) -> Path:
    """`<plots_dir>/<stage>/<slug>_per_graph.csv`: one score per graph and split."""
    return Path(plots_dir) / stage / f"{slug}_per_graph.csv"


def scatter_file(plots_dir: str | Path, stage: str, slug: str) -> Path:
    """`<plots_dir>/<stage>/<slug>_scatter.csv`: predicted vs true rank of sampled valid configurations."""
    return Path(plots_dir) / stage / f"{slug}_scatter.csv"


def rank_scatter(preds: Predictions, truth: Mapping[str, np.ndarray], points_per_graph: int) -> pd.DataFrame:
    """Predicted vs true rank (both scaled to [0, 1], 0 = fastest) of evenly spaced configs of each graph."""
    rows = []
    for graph_id, runtimes in sorted(truth.items()):
        n = len(runtimes)
        picked = np.unique(np.linspace(0, n - 1, min(n, points_per_graph)).astype(np.int64))
        scale = max(n - 1, 1)
        true_rank = np.argsort(np.argsort(runtimes, kind="stable"), kind="stable") / scale
        predicted_rank = np.argsort(np.argsort(preds[graph_id], kind="stable"), kind="stable") / scale
        rows.append(pd.DataFrame({"graph_id": graph_id, "true_rank": true_rank[picked],
                                  "predicted_rank": predicted_rank[picked]}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["graph_id", "true_rank", "predicted_rank"])


def evaluate_and_write(cfg: DictConfig, stage: str, collection: Collection,
                       preds_by_split: Mapping[str, Predictions], extra: Mapping | None = None,
                       truth_by_split: Mapping[str, dict | None] | None = None) -> dict:
    """Score each split that has truth, write the metrics JSON and per-graph CSV, return the metrics dict.

    `truth_by_split` ({split: `load_truth(...)`}) passes truth the stage already loaded; splits it lacks are loaded.

    The JSON holds {"collection", "<split>": {"score", "graphs"}} plus `extra` (e.g. training time); a split
    without truth (real test data) is left out. With a dataset ceiling it also holds {"ceiling": {split: score}}
    for the scored splits.
    """
    result: dict = {"collection": collection.name, **(extra or {})}
    ceiling = dataset_ceiling(cfg, collection) or {}
    rows = []
    for split, preds in preds_by_split.items():
        truth = (truth_by_split[split] if truth_by_split is not None and split in truth_by_split
                 else load_truth(cfg, collection, split))
        if truth is None:
            continue
        scored = metrics.score_predictions(collection.kind, preds, truth)
        result[split] = {"score": scored["score"], "graphs": len(scored["per_graph"])}
        if split in ceiling:
            result.setdefault("ceiling", {})[split] = ceiling[split]
        rows += [{"split": split, "graph_id": g, "score": s} for g, s in scored["per_graph"].items()]
        if split == "valid":
            scatter = rank_scatter(preds, truth, cfg.evaluation.scatter_points_per_graph)
            write_csv(scatter, scatter_file(cfg.paths.plots_dir, stage, collection.slug))
    write_json(result, metrics_file(cfg.paths.metrics_dir, stage, collection.slug))
    write_csv(pd.DataFrame(rows, columns=["split", "graph_id", "score"]), per_graph_file(cfg.paths.plots_dir, stage, collection.slug))
    result["per_graph"] = rows
    return result


def score_line(stage: str, slug: str, result: Mapping, seconds: float) -> str:
    """The one line a model stage prints: its rounded score per scored split (beside the dataset's ceiling when
    known) and its seconds, e.g. `heuristic tile-xla: valid 0.8123 (ceiling 0.9500), test 0.7011 in 0.03 s`."""
    ceiling = result.get("ceiling", {})
    scores = [f"{split} {result[split]['score']:.4f}"
              + (f" (ceiling {ceiling[split]:.4f})" if split in ceiling else "")
              for split in PREDICTED_SPLITS if split in result]
    return f"{stage} {slug}: {', '.join(scores) or 'no split with truth'} in {seconds:.2f} s"
