"""Blend model predictions per graph: normalise each member's scores, weight them, sum; `blend` (whole splits) and
`blend_graph` (one graph) are the ensemble's inference entry points, `read_weights` the weights stage ensemble chose.

Scores are first normalised within each graph (`minmax` or `rank`), so members on different scales mix fairly.
`pick_weights` sets the weights: `equal` averages the members, `grid` scores a weight grid over the simplex on
valid (`choose_weights`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
from tqdm import tqdm

from pipeline.choices import ENSEMBLE_TIE_BREAKS, ENSEMBLE_WEIGHTINGS, MODEL_STAGES
from pipeline.errors import PipelineError, shortened
from pipeline.files import is_number, read_json
from pipeline.predictions import Predictions
from pipeline.scoring import metrics

WEIGHTINGS = ENSEMBLE_WEIGHTINGS
TIE_BREAKS = ENSEMBLE_TIE_BREAKS
TIE = 1e-12                                   # scores closer than this tie
PROGRESS_DELAY_S = 2.0                        # the weight search shows its bar (n/N, ETA) once it runs this long


def normalize_scores(scores: np.ndarray, method: str) -> np.ndarray:
    """Rescale one graph's scores to [0, 1] keeping their order: `minmax` or `rank` (ties share a rank)."""
    scores = np.asarray(scores, dtype=np.float64)
    if method == "rank":
        scores = metrics.average_ranks(scores)
    span = scores.max() - scores.min()
    return (scores - scores.min()) / span if span > 0 else np.zeros_like(scores)


def weight_grid(n_members: int, step: float) -> np.ndarray:
    """All weight vectors on the simplex with the given step: [candidates, members], each row sums to 1, in the
    lexicographic order of their ticks. Built row by row (C(ticks + members - 1, members - 1) rows), not filtered
    out of the (ticks + 1) ** members cube, which a step of 0.001 over three members made a 10^9-tuple walk."""
    ticks = int(round(1 / step))
    rows = list(_compositions(ticks, n_members))
    return np.array(rows, dtype=np.float64).reshape(len(rows), n_members) / ticks


def _compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every tuple of `parts` whole numbers >= 0 summing to `total`, in lexicographic order."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield (first, *rest)


def blend(members: Sequence[Predictions], weights: np.ndarray, method: str) -> Predictions:
    """Weighted sum of the members' per-graph normalised scores."""
    return weighted_sum(normalized(members, method), weights)


def normalized(members: Sequence[Predictions], method: str) -> list[dict[str, np.ndarray]]:
    """Each member's scores normalised within each graph of the first member (`normalize_scores`)."""
    return [{graph_id: normalize_scores(m[graph_id], method) for graph_id in members[0]} for m in members]


def weighted_sum(members: Sequence[Mapping[str, np.ndarray]], weights: np.ndarray) -> Predictions:
    """Per graph, the members' (normalised) scores weighted by `weights` [members] and summed."""
    blended = Predictions()
    for graph_id in members[0]:
        blended[graph_id] = sum(w * m[graph_id] for w, m in zip(weights, members))
    return blended


def order_score(preds: Predictions, truth: Mapping[str, np.ndarray]) -> float:
    """Mean over the graphs of `truth` of the Kendall tau between the predictions and the runtimes: how well the
    whole order of each graph's configurations is predicted (for tile, finer than the top-5 metric)."""
    return float(np.mean([metrics.kendall_tau(preds[g], runtimes) for g, runtimes in truth.items()]))


def choose_weights(kind: str, members: Sequence[Predictions], truth: Mapping[str, np.ndarray],
                   step: float, method: str, tie_break: str = "even", tolerance: float = 0.0,
                   prefer: int | None = None) -> tuple[np.ndarray, float]:
    """The grid weights with the best mean validation score; returns (weights, score).

    Blends within `tolerance` of the best score tie (0: equal scores only; valid's 3-20 graphs leave a noise that a
    tolerance can stand for). Ties go first to the blend with the most weight on member `prefer` (an index into
    `members`; None: no preference), then to the best score, then by `tie_break`: `order` prefers the blend with the
    best `order_score` on valid (the whole configuration order, which does not saturate where the tile score does,
    e.g. at 1.0 for every blend; for layout it is the score itself, so nothing changes there); then, and for `even`
    at once, the most even weights (least sum of squares) win, the blend that trusts the validation set least, then
    the first on the grid. `tie_break` is one of TIE_BREAKS (the settings schema checks `ensemble.tie_break`).
    """
    grid = weight_grid(len(members), step)
    scores, orders = np.zeros(len(grid)), np.zeros(len(grid))
    scaled = normalized(members, method)                          # once, not once per blend
    bar = tqdm(grid, desc="blend weights", unit="blend", mininterval=1.0, delay=PROGRESS_DELAY_S)
    for c, weights in enumerate(bar):
        blended = weighted_sum(scaled, weights)
        scores[c] = metrics.score_predictions(kind, blended, truth)["score"]
        orders[c] = order_score(blended, truth) if tie_break == "order" and kind == "tile" else 0.0
    chosen = best_candidate(grid, scores, orders, tolerance, prefer)
    return grid[chosen], float(scores[chosen])


def best_candidate(grid: np.ndarray, scores: np.ndarray, orders: np.ndarray, tolerance: float = 0.0,
                   prefer: int | None = None) -> int:
    """The row of `grid` [candidates, members] `choose_weights` keeps, from each candidate's mean valid score
    [candidates] and tie-break order score [candidates] (zeros when the tie-break does not read it): among the
    candidates within `tolerance` of the best score, the most weight on `prefer`, then the best score, the best order
    score, the most even weights, the first."""
    keys = [(0.0 if prefer is None else float(w[prefer]), float(score), float(order), -float(np.sum(w ** 2)))
            for w, score, order in zip(grid, scores, orders)]
    floor = float(np.max(scores)) - max(tolerance, TIE)            # below it: not tied with the best score
    chosen = None
    for c, key in enumerate(keys):
        if key[1] < floor:
            continue
        if chosen is None or _better(key, keys[chosen]):
            chosen = c
    return chosen


def _better(key: tuple[float, ...], best: tuple[float, ...]) -> bool:
    """Lexicographic `key > best`, with values closer than TIE counted equal."""
    for value, incumbent in zip(key, best):
        if value > incumbent + TIE:
            return True
        if value < incumbent - TIE:
            return False
    return False


def pick_weights(kind: str, members: Sequence[Predictions], truth: Mapping[str, np.ndarray], weighting: str,
                 step: float, method: str, tie_break: str = "even", tolerance: float = 0.0,
                 prefer: int | None = None) -> np.ndarray:
    """[members] weights summing to 1: equal, or the best of the grid on valid (`choose_weights`)."""
    if weighting == "equal":
        return np.full(len(members), 1.0 / len(members))
    return choose_weights(kind, members, truth, step, method, tie_break, tolerance, prefer)[0]


def gain_over_best_member(member_scores: Mapping[str, Mapping[str, float]],
                          ensemble_scores: Mapping[str, float]) -> dict:
    """{best_member, gain: {split: ensemble - that member}}; the best member is the one best on valid.

    member_scores: {split: {member: score}}; ensemble_scores: {split: score}; splits without scores are skipped.
    """
    best = max(member_scores["valid"], key=lambda m: member_scores["valid"][m])
    return {"best_member": best, "gain": {split: float(ensemble_scores[split] - scores[best])
                                          for split, scores in member_scores.items() if split in ensemble_scores}}


def blend_graph(member_scores: Mapping[str, np.ndarray], weights: Mapping[str, float], method: str) -> np.ndarray:
    """float64 [configs]: one graph's blended score from each weighted member's scores (keys of `weights`)."""
    missing = sorted(set(weights) - set(member_scores))
    if missing:
        raise ValueError(f"blend_graph: no scores of members {missing}")
    return sum(float(w) * normalize_scores(member_scores[m], method) for m, w in weights.items())


def read_weights(path: str | Path, fingerprint: str | None = None) -> dict[str, float]:
    """The member weights in a metrics file of stage ensemble (`<metrics_dir>/ensemble/<slug>.json`, key `weights`);
    FileNotFoundError / PipelineError naming the file when it is missing, not a JSON object, holds no weights or
    weights the stage never writes (a member outside MODEL_STAGES, a weight not a finite number >= 0, none above 0),
    or, given the `fingerprint` of this run's data settings (`pipeline.config.data_fingerprint`), when the weights
    were chosen on other data."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; run stage ensemble for this collection first")
    record = read_json(path)
    weights = record.get("weights")
    if not isinstance(weights, dict) or not weights:
        raise PipelineError(f"{path}: key 'weights' missing; expected the member weights stage ensemble writes")
    bad = {m: w for m, w in weights.items() if m not in MODEL_STAGES or not is_number(w, low=0)}
    if bad or not any(w > 0 for w in weights.values()):
        raise PipelineError(f"{path}: key 'weights': expected weights >= 0 (finite, one above 0) of members among "
                            f"{MODEL_STAGES}; found {shortened(bad or weights)}; run stage ensemble again (dvc repro)")
    recorded = record.get("data_fingerprint")
    if fingerprint is not None and recorded != fingerprint:
        chosen_on = "on unrecorded data (no key 'data_fingerprint')" if recorded is None else f"on data {recorded!r}"
        raise PipelineError(f"{path}: weights chosen {chosen_on}, but this run's data settings are {fingerprint!r}; "
                            f"run stage ensemble on this data (dvc repro) or pass the data= it used")
    return {str(m): float(w) for m, w in weights.items()}
