"""Ranking losses over the configs of one graph. Convention: lower score = predicted faster.

Element-wise losses lost badly in the competition (docs/solutions.md, "Ranking losses only"); both losses here
only see the order.
"""
from __future__ import annotations

import numpy as np
import torch

from pipeline.choices import GNN_LOSSES
from pipeline.errors import PipelineError
from pipeline.pruned import spread_quantile

LOSSES = GNN_LOSSES


def _check(scores: torch.Tensor, runtimes: torch.Tensor) -> None:
    if scores.ndim != 1 or scores.shape != runtimes.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and runtimes {tuple(runtimes.shape)} must be equal 1-d shapes")


def ordered_pairs(runtimes: torch.Tensor, min_gap: float) -> torch.Tensor:
    """bool [configs, configs]: config i is faster than j by more than a relative gap `min_gap`.

    runtime_j > runtime_i * (1 + min_gap); with min_gap > 0, near-tied pairs (measurement noise, duplicates that
    survived de-duplication) carry no order.
    """
    return runtimes[None, :] > runtimes[:, None] * (1.0 + min_gap)


def ordered_pair_count(runtimes: np.ndarray, min_gap: float) -> int:
    """How many pairs of `runtimes` [configs] `ordered_pairs` orders (the slower more than min_gap slower), counted
    in O(C log C) on the sorted runtimes, never as a [C, C] matrix (a layout train graph has up to ~100,000)."""
    ordered = np.sort(np.asarray(runtimes, dtype=np.float64))
    return int((len(ordered) - np.searchsorted(ordered, ordered * (1.0 + min_gap), side="right")).sum())


def pairwise_hinge(scores: torch.Tensor, runtimes: torch.Tensor, margin: float, min_gap: float) -> torch.Tensor:
    """Mean over ordered pairs (`ordered_pairs`, i faster than j) of max(0, margin - (score_j - score_i)).

    Zero when every faster config scores at least `margin` lower than every slower one; pairs with equal runtimes
    (or closer than min_gap) are ignored. Returns 0 (with a gradient path) when no pair is ordered.
    """
    _check(scores, runtimes)
    faster = ordered_pairs(runtimes, min_gap)                        # [configs, configs], i faster than j
    gap = scores[None, :] - scores[:, None]                          # [configs, configs], score_j - score_i
    hinge = torch.relu(margin - gap.float())
    pairs = faster.sum()
    return (hinge * faster).sum() / pairs.clamp(min=1)


def listmle(scores: torch.Tensor, runtimes: torch.Tensor) -> torch.Tensor:
    """ListMLE (Plackett-Luce negative log-likelihood of the true order, fastest first), mean per config.

    With logits = -scores and the configs sorted by runtime, loss = mean_i [logsumexp(logits[i:]) - logits[i]];
    it is always >= 0 and tends to 0 as correctly ordered scores move far apart.
    """
    _check(scores, runtimes)
    order = torch.argsort(runtimes, stable=True)                     # fastest first
    logits = -scores.float()[order]                                  # [configs]
    tail_lse = torch.logcumsumexp(logits.flip(0), dim=0).flip(0)     # [configs], logsumexp(logits[i:])
    return (tail_lse - logits).mean()


def ranking_loss(name: str, scores: torch.Tensor, runtimes: torch.Tensor, margin: float,
                 min_gap: float) -> torch.Tensor:
    """The configured loss (`gnn.loss`); min_gap applies to the pairwise hinge."""
    losses = {"pairwise_hinge": lambda: pairwise_hinge(scores, runtimes, margin, min_gap),
              "listmle": lambda: listmle(scores, runtimes)}          # LOSSES (the schema checked the name)
    return losses[name]()


def hinge_min_gap(min_gap: float, quantile: float | None, report: dict, where: str) -> tuple[float, str]:
    """The pairwise hinge's min_gap for one collection, and where it came from.

    With `quantile` (gnn.min_gap_quantile) set, min_gap is that quantile of the relative runtime spread of identical
    train configurations, as stage prune measured it (`report["duplicate_spread"]`, report.json): pairs closer
    than repeated runs of one configuration carry no order. With `quantile` null, or when train holds no repeated
    configuration, it is the number `min_gap` (gnn.min_gap). `where` names the report in errors.
    """
    if quantile is None:
        return float(min_gap), "gnn.min_gap"
    if "duplicate_spread" not in report:
        raise PipelineError(f"{where}: no duplicate_spread (written by stage prune); re-run prune, or set "
                            f"gnn.min_gap_quantile=null to use gnn.min_gap")
    spread = spread_quantile(report["duplicate_spread"], quantile, where)
    if spread is None:
        return float(min_gap), f"gnn.min_gap (no repeated train configuration in {where})"
    groups = report["duplicate_spread"]["groups"]
    return spread, f"quantile {quantile} of the runtime spread of {groups} groups of identical train configs"
