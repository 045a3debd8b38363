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

from typing import Mapping, Sequence

import numpy as np
from omegaconf import DictConfig

from pipeline.config import data_fingerprint, stage_args
from pipeline.ensembling.blend import blend, gain_over_best_member, pick_weights
from pipeline.errors import PipelineError, clipped, run_main
from pipeline.scoring import metrics
from pipeline.timings import Stopwatch, write_timings
from pipeline.scoring.evaluate import evaluate_and_write, load_truth, score_line
from pipeline.predictions import Predictions, load_predictions, predictions_path, save_predictions
from pipeline.pruned import header_configs
from pipeline.tpugraphs.dataset import Collection, graph_paths, npz_root
from pipeline.tpugraphs.npz import list_members
from pipeline.tpugraphs.schema import PREDICTED_SPLITS


def run(cfg: DictConfig, collection: Collection) -> dict:
    """Blend the configured members, write ensemble predictions and metrics with the chosen weights."""
    from pipeline import tracking

    watch = Stopwatch()
    names = list(cfg.ensemble.members)
    truth = {split: load_truth(cfg, collection, split) for split in PREDICTED_SPLITS}
    preds = {split: member_predictions(cfg, names, collection, split, truth[split]) for split in PREDICTED_SPLITS}
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


def member_predictions(cfg: DictConfig, names: Sequence[str], collection: Collection, split: str,
                       truth: Mapping[str, np.ndarray] | None) -> list[Predictions]:
    """Each member's predictions of `split`, refused in one line naming the file unless they score exactly the split's
    graphs, one score per configuration (those of `truth`, else of the graph files: real test data has no truth): a
    member whose stage last ran on other data (a stage run by hand after a data.root change) made a ValueError
    traceback on valid, and on test its graphs were blended unchecked."""
    if truth is not None:
        expected = {g: len(runtimes) for g, runtimes in truth.items()}
    else:
        expected = {p.stem: header_configs(list_members(p))       # npz headers only, as check_pruned_from counts
                    for p in graph_paths(npz_root(cfg.data.root), collection, split)}
    members = []
    for name in names:
        path = predictions_path(cfg.paths.predictions_dir, name, collection.slug, split)
        preds = load_predictions(path)
        try:
            preds.check_covers(expected, where="found")
        except ValueError as error:
            raise PipelineError(f"{path}: expected the scores of the {len(expected)} {split} graph(s) of {cfg.data.root}, "
                                f"one per configuration; found {clipped(str(error).removeprefix('found: '), 300)}; "
                                f"it was written on other data: re-run `python -m pipeline.{name} --collection "
                                f"{collection.slug}` (or `dvc repro`)") from None
        members.append(preds)
    return members


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
