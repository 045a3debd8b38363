"""Stage `heuristic`: a rule-based ranking, the floor every learned model must beat.

The rules (layout: compiler-default blocks first; tile: output tile size nearest the graph's median) live in
`pipeline.heuristic_model.scores`. The stage reads the npz files directly (streaming node_config_feat in chunks)
and writes the predictions contract for valid and test, plus metrics.
"""
from __future__ import annotations

from typing import Sequence

from omegaconf import DictConfig

from pipeline.errors import run_main
from pipeline.config import stage_args
from pipeline.heuristic_model.scores import predict_split
from pipeline.timings import Stopwatch, write_timings
from pipeline.scoring.evaluate import evaluate_and_write, score_line
from pipeline.predictions import predictions_path, save_predictions
from pipeline.tpugraphs.dataset import Collection, npz_root
from pipeline.tpugraphs.schema import PREDICTED_SPLITS

def run(cfg: DictConfig, collection: Collection) -> dict:
    """Predict valid and test, write predictions and metrics; returns the metrics dict."""
    from pipeline import tracking

    watch = Stopwatch()
    root = npz_root(cfg.data.root)
    preds = {split: predict_split(root, collection, split, cfg.heuristic.chunk_size) for split in PREDICTED_SPLITS}
    for split, split_preds in preds.items():
        save_predictions(split_preds, predictions_path(cfg.paths.predictions_dir, "heuristic", collection.slug, split))
    result = evaluate_and_write(cfg, "heuristic", collection, preds)
    result["seconds"] = watch.elapsed()
    write_timings(cfg.paths.metrics_dir, "heuristic", collection.slug, {"seconds": result["seconds"]})
    with tracking.start_run(cfg, "heuristic", collection.slug) as wandb_run:
        wandb_run.summary.update({f"{s}/score": result[s]["score"] for s in PREDICTED_SPLITS if s in result})
    return result


def main(argv: Sequence[str] | None = None) -> None:
    args, cfg = stage_args(__doc__.splitlines()[0], argv)
    collection = Collection.parse(args.collection)
    result = run(cfg, collection)
    print(score_line("heuristic", collection.slug, result, result["seconds"]))


if __name__ == "__main__":
    run_main(main)
