"""Official metrics: slowdown@K and the Kaggle tile score for tile:xla, Kendall tau-b for the layout collections.

Convention everywhere: `scores` are model outputs where **lower = predicted faster**; `runtimes` are the true
runtimes of the same configurations (tile: normalised by config_runtime_normalizers).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from pipeline.predictions import Predictions

TILE_TOP_K = 5  # Kaggle scores tile:xla on the best of the top-5 predictions


def _check(scores: np.ndarray, runtimes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    runtimes = np.asarray(runtimes, dtype=np.float64).reshape(-1)
    if scores.shape != runtimes.shape or scores.size == 0:
        raise ValueError(f"scores {scores.shape} and runtimes {runtimes.shape} must be the same non-empty length")
    return scores, runtimes


def kendall_tau(scores: np.ndarray, runtimes: np.ndarray) -> float:
    """Kendall tau-b between predicted scores and true runtimes (scipy's default variant).

    1.0 = perfect order. A graph whose runtimes (or scores) are all tied has no defined tau; it scores 0.
    """
    scores, runtimes = _check(scores, runtimes)
    from scipy.stats import kendalltau            # lazily: scipy.stats takes seconds to import

    tau = kendalltau(scores, runtimes).statistic
    return 0.0 if np.isnan(tau) else float(tau)


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k lowest scores (fastest first); ties broken by config index, so results are deterministic."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    return np.argsort(scores, kind="stable")[:k]


def slowdown_at_k(scores: np.ndarray, runtimes: np.ndarray, k: int) -> float:
    """(best runtime among the top-k predicted - best runtime) / best runtime; 0 = the best config is in the top k."""
    scores, runtimes = _check(scores, runtimes)
    best = runtimes.min()
    if best <= 0:
        raise ValueError(f"slowdown needs positive runtimes, got min {best}")
    return float((runtimes[top_k_indices(scores, k)].min() - best) / best)


def tile_score(scores: np.ndarray, runtimes: np.ndarray, k: int = TILE_TOP_K) -> float:
    """Kaggle tile score of one graph: 2 - best_of_top_k / best = 1 - slowdown@k (1.0 is perfect)."""
    return 1.0 - slowdown_at_k(scores, runtimes, k)


def graph_score(kind: str, scores: np.ndarray, runtimes: np.ndarray) -> float:
    """The collection's metric on one graph: tile -> tile_score, layout -> kendall_tau."""
    if kind == "tile":
        return tile_score(scores, runtimes)
    if kind == "layout":
        return kendall_tau(scores, runtimes)
    raise ValueError(f"unknown collection kind {kind!r}; expected 'tile' or 'layout'")


def score_predictions(kind: str, preds: Predictions, truth: Mapping[str, np.ndarray]) -> dict:
    """Score every graph of `truth`; returns {"score": mean over graphs, "per_graph": {graph_id: score}}.

    Raises ValueError if a graph of `truth` has no prediction or a wrong number of scores.
    """
    preds.check_covers({g: len(r) for g, r in truth.items()}, where="score_predictions")
    per_graph = {g: graph_score(kind, preds[g], truth[g]) for g in sorted(truth)}
    score = float(np.mean(list(per_graph.values()))) if per_graph else float("nan")
    return {"score": score, "per_graph": per_graph}


def kaggle_score(collection_scores: Mapping[str, float]) -> float:
    """The leaderboard score: the mean of the five collection scores."""
    return float(np.mean(list(collection_scores.values())))
