"""Stage `ensemble`: combine model predictions per collection with weights chosen on the validation split.

Scores are first normalised within each graph (`minmax`, the 14th place's choice, or `rank`), so members on
different scales mix fairly. `ensemble.weighting` then sets the weights: `equal` averages the members (no free
weight, nothing fitted to the 5 to 20 validation graphs), `grid` scores a weight grid over the simplex (step
`ensemble.grid_step`, every single member included) on valid and applies the best weights to test. Because every
single member is on the grid and normalisation is monotonic within a graph, a grid ensemble's validation score is
at least the best member's, which is why that number says little: the metrics JSON reports the gain over the
member best on valid, on valid and on test (where the dataset has test truth). Test truth never picks weights.
"""
from __future__ import annotations

import itertools
import sys
from typing import Mapping, Sequence

import numpy as np
from omegaconf import DictConfig

from pipeline.scoring import metrics
from pipeline.config import stage_args
from pipeline.timings import Stopwatch, write_timings
from pipeline.scoring.evaluate import evaluate_and_write, load_truth, score_line
from pipeline.predictions import Predictions, load_predictions, predictions_path, save_predictions
from pipeline.tpugraphs.dataset import Collection
from pipeline.tpugraphs.schema import PREDICTED_SPLITS



def normalize_scores(scores: np.ndarray, method: str) -> np.ndarray:
    """Rescale one graph's scores to [0, 1] keeping their order: `minmax` or `rank` (ties share a rank)."""
    scores = np.asarray(scores, dtype=np.float64)
    if method == "rank":
        from scipy.stats import rankdata          # lazily: scipy.stats takes seconds to import

        scores = rankdata(scores, method="average")
    elif method != "minmax":
        raise ValueError(f"ensemble.normalize={method!r}; expected 'minmax' or 'rank'")
    span = scores.max() - scores.min()
    return (scores - scores.min()) / span if span > 0 else np.zeros_like(scores)


def weight_grid(n_members: int, step: float) -> np.ndarray:
    """All weight vectors on the simplex with the given step: [candidates, members], each row sums to 1."""
    ticks = int(round(1 / step))
    rows = [c for c in itertools.product(range(ticks + 1), repeat=n_members) if sum(c) == ticks]
    return np.array(rows, dtype=np.float64) / ticks


def blend(members: Sequence[Predictions], weights: np.ndarray, method: str) -> Predictions:
    """Weighted sum of the members' per-graph normalised scores."""
    blended = Predictions()
    for graph_id in members[0]:
        blended[graph_id] = sum(w * normalize_scores(m[graph_id], method) for w, m in zip(weights, members))
    return blended


def choose_weights(kind: str, members: Sequence[Predictions], truth: Mapping[str, np.ndarray],
                   step: float, method: str) -> tuple[np.ndarray, float]:
    """The grid weights with the best mean validation score; returns (weights, score).

    Ties (a saturated validation score, e.g. tile at 1.0) go to the most even weights (least sum of squares), the
    blend that trusts the validation set least, and then to the first on the grid.
    """
    best_weights, best_key = None, (-np.inf, -np.inf)
    for weights in weight_grid(len(members), step):
        score = metrics.score_predictions(kind, blend(members, weights, method), truth)["score"]
        key = (score, -float(np.sum(weights ** 2)))
        if key[0] > best_key[0] + 1e-12 or (abs(key[0] - best_key[0]) <= 1e-12 and key[1] > best_key[1] + 1e-12):
            best_weights, best_key = weights, key
    return best_weights, best_key[0]


WEIGHTINGS = ("grid", "equal")


def pick_weights(kind: str, members: Sequence[Predictions], truth: Mapping[str, np.ndarray], weighting: str,
                 step: float, method: str) -> np.ndarray:
    """[members] weights summing to 1: equal, or the best of the grid on valid (`choose_weights`)."""
    if weighting == "equal":
        return np.full(len(members), 1.0 / len(members))
    if weighting != "grid":
        raise ValueError(f"ensemble.weighting={weighting!r}; expected one of {list(WEIGHTINGS)}")
    return choose_weights(kind, members, truth, step, method)[0]


def gain_over_best_member(member_scores: Mapping[str, Mapping[str, float]],
                          ensemble_scores: Mapping[str, float]) -> dict:
    """{best_member, gain: {split: ensemble - that member}}; the best member is the one best on valid.

    member_scores: {split: {member: score}}; ensemble_scores: {split: score}; splits without scores are skipped.
    """
    best = max(member_scores["valid"], key=lambda m: member_scores["valid"][m])
    return {"best_member": best, "gain": {split: float(ensemble_scores[split] - scores[best])
                                          for split, scores in member_scores.items() if split in ensemble_scores}}


def run(cfg: DictConfig, collection: Collection) -> dict:
    """Blend the configured members, write ensemble predictions and metrics with the chosen weights."""
    from pipeline import tracking

    watch = Stopwatch()
    names = list(cfg.ensemble.members)
    preds = {split: [load_predictions(predictions_path(cfg.paths.predictions_dir, m, collection.slug, split))
                     for m in names] for split in PREDICTED_SPLITS}
    truth = {split: load_truth(cfg, collection, split) for split in PREDICTED_SPLITS}
    member_scores = {split: {m: metrics.score_predictions(collection.kind, p, truth[split])["score"]
                             for m, p in zip(names, preds[split])}
                     for split in PREDICTED_SPLITS if truth[split] is not None}
    ensemble = cfg.ensemble
    weights = pick_weights(collection.kind, preds["valid"], truth["valid"], ensemble.weighting, ensemble.grid_step,
                           ensemble.normalize)
    blended = {split: blend(preds[split], weights, ensemble.normalize) for split in PREDICTED_SPLITS}
    for split, split_preds in blended.items():
        save_predictions(split_preds, predictions_path(cfg.paths.predictions_dir, "ensemble", collection.slug, split))
    scores = {split: metrics.score_predictions(collection.kind, blended[split], truth[split])["score"]
              for split in member_scores}
    gain = gain_over_best_member(member_scores, scores)
    extra = {"weights": dict(zip(names, map(float, weights))), "member_valid_scores": member_scores["valid"],
             **({"member_test_scores": member_scores["test"]} if "test" in member_scores else {}), "best_member": gain["best_member"],
             "gain_over_best_member": gain["gain"]}
    result = evaluate_and_write(cfg, "ensemble", collection, blended, extra=extra, truth_by_split=truth)
    result["seconds"] = watch.elapsed()
    write_timings(cfg.paths.metrics_dir, "ensemble", collection.slug, {"seconds": result["seconds"]})
    with tracking.start_run(cfg, "ensemble", collection.slug) as wandb_run:
        wandb_run.summary.update({"weights": extra["weights"], "member_valid_scores": member_scores["valid"],
                                  **{f"{s}/gain_over_best_member": g for s, g in gain["gain"].items()},
                                  **{f"{s}/score": result[s]["score"] for s in PREDICTED_SPLITS if s in result}})
    return result


def main(argv: Sequence[str] | None = None) -> None:
    args, cfg = stage_args(__doc__.splitlines()[0], argv)
    collection = Collection.parse(args.collection)
    result = run(cfg, collection)
    print(score_line("ensemble", collection.slug, result, result["seconds"]))
    print(f"ensemble {collection.slug}: weights {weights_text(result['weights'])}; best member "
          f"{result['best_member']}, gain over it "
          + ", ".join(f"{split} {gain:+.4f}" for split, gain in result["gain_over_best_member"].items()))


def weights_text(weights: Mapping[str, float]) -> str:
    """`lgbm 0.50, gnn 0.50`: the blend's weights, rounded, named."""
    return ", ".join(f"{name} {weight:.2f}" for name, weight in weights.items())


if __name__ == "__main__":
    main(sys.argv[1:])
