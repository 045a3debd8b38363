"""Stage `ensemble`: combine model predictions per collection with weights chosen on the validation split.

Scores are first normalised within each graph (`minmax`, the 14th place's choice, or `rank`), so members on
different scales mix fairly. `ensemble.weighting` then sets the weights: `equal` averages the members (no free
weight, nothing fitted to the 5 to 20 validation graphs), `grid` scores a weight grid over the simplex (step
`ensemble.grid_step`, every single member included) on valid and applies the best weights to test; blends within
`ensemble.tolerance` of the best valid score tie, and ties go to the blend with most weight on `ensemble.prefer`.
Because every single member is on the grid and normalisation is monotonic within a graph, a grid ensemble's
validation score is at least the best member's, which is why that number says little: the metrics JSON reports the
gain over the member best on valid, on valid and on test (where the dataset has test truth). Test truth never picks
weights.
"""
from __future__ import annotations

from typing import Sequence

from omegaconf import DictConfig

from pipeline.config import data_fingerprint, stage_args
from pipeline.ensembling.blend import blend, gain_over_best_member, pick_weights
from pipeline.errors import run_main
from pipeline.scoring import metrics
from pipeline.timings import Stopwatch, write_timings
from pipeline.scoring.evaluate import evaluate_and_write, load_truth, score_line
from pipeline.predictions import load_predictions, predictions_path, save_predictions
from pipeline.tpugraphs.dataset import Collection
from pipeline.tpugraphs.schema import PREDICTED_SPLITS


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
    prefer = None if ensemble.prefer is None else names.index(ensemble.prefer)   # the schema checked it is a member
    weights = pick_weights(collection.kind, preds["valid"], truth["valid"], ensemble.weighting, ensemble.grid_step,
                           ensemble.normalize, ensemble.tie_break, float(ensemble.tolerance), prefer)
    blended = {split: blend(preds[split], weights, ensemble.normalize) for split in PREDICTED_SPLITS}
    for split, split_preds in blended.items():
        save_predictions(split_preds, predictions_path(cfg.paths.predictions_dir, "ensemble", collection.slug, split))
    scores = {split: metrics.score_predictions(collection.kind, blended[split], truth[split])["score"]
              for split in member_scores}
    gain = gain_over_best_member(member_scores, scores)
    extra = {"weights": dict(zip(names, map(float, weights))), "member_valid_scores": member_scores["valid"],
             "data_fingerprint": data_fingerprint(cfg.data),     # checked by `predict --model ensemble`
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
    run_main(main)
