"""Stage `heuristic`: a rule-based ranking, the floor every learned model must beat.

- layout: configurations that leave more tensors to the compiler default (all -1 blocks of node_config_feat)
  rank first; the compiler's own choice is a strong prior, and ties keep the original order.
- tile: both extremes of the output tile size lose: tiny tiles pay per-tile overheads, huge ones spill on-chip
  memory. Configurations whose output tile (output_bounds_product) is closest to the graph's median tile size,
  on a log scale, rank first.

Reads the npz files directly (streaming node_config_feat in chunks) and writes the predictions contract for
valid and test, plus metrics.
"""
from __future__ import annotations

import sys
from typing import Sequence

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.config import stage_args
from pipeline.timings import Stopwatch, write_timings
from pipeline.scoring.evaluate import evaluate_and_write, score_line
from pipeline.predictions import Predictions, predictions_path, save_predictions
from pipeline.tpugraphs.dataset import Collection, Graph, graph_paths, load_graph, npz_root
from pipeline.tpugraphs.schema import (CONFIG_FEAT_COLUMN, LAYOUT_BLOCKS, LAYOUT_VALUE_MIN, MAX_DIMS,
                                       PREDICTED_SPLITS)

OUTPUT_BOUNDS_PRODUCT = CONFIG_FEAT_COLUMN["output_bounds_product"]


def default_block_counts(node_config_feat: np.ndarray) -> np.ndarray:
    """Number of all -1 (compiler default) layout blocks per configuration.

    Args:
        node_config_feat: [configs, configurable nodes, 18] values in -1..5.
    Returns:
        [configs] int64.
    """
    configs, nodes, _ = node_config_feat.shape
    blocks = node_config_feat.reshape(configs, nodes * len(LAYOUT_BLOCKS), MAX_DIMS)   # [configs, blocks, 6]
    return np.all(blocks == LAYOUT_VALUE_MIN, axis=2).sum(axis=1).astype(np.int64)


def layout_scores(graph: Graph, chunk_size: int) -> np.ndarray:
    """Lower = predicted faster: minus the default-block count, streamed over config chunks."""
    scores = np.empty(graph.n_configs, dtype=np.float64)
    for start, chunk in graph.iter_node_config_feat(chunk_size):
        scores[start:start + len(chunk)] = -default_block_counts(chunk)
    return scores


def tile_scores(config_feat: np.ndarray) -> np.ndarray:
    """Lower = predicted faster: distance of log(output tile size) from its median. config_feat: [configs, 24]."""
    log_size = np.log1p(np.maximum(np.asarray(config_feat[:, OUTPUT_BOUNDS_PRODUCT], dtype=np.float64), 0.0))
    return np.abs(log_size - np.median(log_size))


def predict_split(root, collection: Collection, split: str, chunk_size: int) -> Predictions:
    """Heuristic scores for every graph and original config of one split."""
    preds = Predictions()
    for path in tqdm(graph_paths(root, collection, split), desc=f"heuristic {collection.slug}/{split}", unit="graph"):
        graph = load_graph(path, collection, split)
        preds[graph.graph_id] = (tile_scores(graph.config_feat) if collection.kind == "tile"
                                 else layout_scores(graph, chunk_size))
    return preds


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
    main(sys.argv[1:])
