"""Stage `heuristic`: a rule-based ranking, the floor every learned model must beat.

The rules (layout: compiler-default blocks first; tile: output tile size nearest the graph's median) live in
`pipeline.heuristic_model.scores`. The stage reads the npz files directly (streaming node_config_feat in chunks)
and writes the predictions contract for valid and test, plus metrics.
"""
from __future__ import annotations

import time
from typing import Sequence

from omegaconf import DictConfig

from pipeline.errors import run_main
from pipeline.config import stage_args
from pipeline.heuristic_model.scores import predict_split
from pipeline.scoring.evaluate import evaluate_and_write
from pipeline.predictions import predictions_path, save_predictions
from pipeline.tpugraphs.dataset import Collection, npz_root
from pipeline.tpugraphs.schema import PREDICTED_SPLITS

def run(cfg: DictConfig, collection: Collection) -> dict:
    """Predict valid and test, write predictions and metrics; returns the metrics dict."""
    from pipeline import tracking

    started = time.perf_counter()
    root = npz_root(cfg.data.root)
    preds = {split: predict_split(root, collection, split, cfg.heuristic.chunk_size) for split in PREDICTED_SPLITS}
    for split, split_preds in preds.items():
        save_predictions(split_preds, predictions_path(cfg.paths.predictions_dir, "heuristic", collection.slug, split))
    result = evaluate_and_write(cfg, "heuristic", collection, preds,
                                extra={"seconds": round(time.perf_counter() - started, 3)})
    with tracking.start_run(cfg, "heuristic", collection.slug) as wandb_run:
        wandb_run.summary.update({f"{s}/score": result[s]["score"] for s in PREDICTED_SPLITS if s in result})
    return result


def main(argv: Sequence[str] | None = None) -> None:
    args, cfg = stage_args(__doc__.splitlines()[0], argv)
    result = run(cfg, Collection.parse(args.collection))
    print({k: v for k, v in result.items() if k != "per_graph"})


if __name__ == "__main__":
    run_main(main)
