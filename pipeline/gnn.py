"""Stage `gnn`: a GraphSAGE cost model with cross-configuration attention per collection.

    python -m pipeline.gnn --collection layout-xla-default [gnn.lr=3e-4 gnn.cross_attention=false ...]
    torchrun --nproc_per_node=2 -m pipeline.gnn --collection layout-xla-default   # DDP, graphs sharded

Reads the pruned graphs `<pruned_dir>/<slug>/`, trains on train (configs sampled per graph per step), selects the
epoch by the collection metric on valid, ranks every configuration of valid and test with TTA.
Outputs (rank 0, each written atomically):
- `<models_dir>/gnn/<slug>/model.pt` (best model: spec + weights) and `checkpoint.pt` (resumable state);
- `<predictions_dir>/gnn/<slug>/{valid,test}.npz` (one score per ORIGINAL config index, lower = faster);
- `<plots_dir>/gnn/<slug>/curve.csv` (epoch, loss, valid_score, lr, ...);
- metrics via `pipeline.scoring.evaluate.evaluate_and_write` (`<metrics_dir>/gnn/<slug>.json` + per-graph CSV).
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch
from omegaconf import DictConfig

from pipeline.config import stage_args, warn_threads
from pipeline.files import write_csv
from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.distributed import DistInfo, barrier, init_distributed, shutdown
from pipeline.graphnet.gst import TRAINING_MODES, GSTSettings, SegmentCache
from pipeline.graphnet.infer import InferSettings, predict_graphs
from pipeline.graphnet.losses import hinge_min_gap
from pipeline.graphnet.model import ModelSpec, build_model
from pipeline.graphnet.train_loop import FitResult, TrainSettings, fit, pick_device
from pipeline.predictions import Predictions, predictions_path, save_predictions
from pipeline.pruned import REPORT_FILE, WHOLE_GRAPH, PrunedGraph, collection_dir, iter_split, prune_hops
from pipeline.tpugraphs.dataset import Collection
from pipeline.tpugraphs.schema import PREDICTED_SPLITS

STAGE = "gnn"
MODEL = "gnn"
CURVE_FILE = "curve.csv"


def gst_settings(gnn: DictConfig, collection: Collection) -> GSTSettings | None:
    """The GST settings when gnn.mode=gst and the collection is a layout one (tile graphs train whole), else None."""
    mode = str(gnn.mode)
    if mode not in TRAINING_MODES:
        raise ValueError(f"gnn.mode={mode!r}; expected one of {TRAINING_MODES}")
    if mode != "gst" or collection.kind != "layout":
        return None
    return GSTSettings.from_cfg(gnn.gst)


def pruned_graphs(cfg: DictConfig, collection: Collection, split: str) -> list[PrunedGraph]:
    """The memory-mapped pruned graphs of one split."""
    return list(iter_split(cfg.paths.pruned_dir, collection.slug, split))


def output_dirs(cfg: DictConfig, collection: Collection) -> tuple[Path, Path]:
    """(model folder, plots folder) of this stage and collection."""
    return (Path(cfg.paths.models_dir) / MODEL / collection.slug, Path(cfg.paths.plots_dir) / MODEL / collection.slug)


def write_curve(curve: list[dict], path: Path) -> None:
    """The training curve for `dvc plots` (atomic)."""
    write_csv(pd.DataFrame(curve, columns=["epoch", "loss", "valid_score", "lr", "train_seconds",
                                           "configs_per_second"]), path)


def train_min_gap(cfg: DictConfig, collection: Collection, verbose: bool) -> float:
    """The hinge's min_gap: from the duplicate-runtime spread prune measured, or gnn.min_gap (losses.hinge_min_gap)."""
    path = collection_dir(cfg.paths.pruned_dir, collection.slug) / REPORT_FILE
    quantile = cfg.gnn.min_gap_quantile
    report = json.loads(path.read_text()) if quantile is not None else {}
    min_gap, source = hinge_min_gap(float(cfg.gnn.min_gap), quantile, report, str(path))
    if verbose:
        print(f"[{STAGE} {collection.slug}] pairwise hinge min_gap {min_gap:.5f} ({source})", flush=True)
    return min_gap


def train_collection(cfg: DictConfig, collection: Collection, info: DistInfo = DistInfo(),
                     run=None, max_epochs: int | None = None) -> tuple[torch.nn.Module, FitResult]:
    """Build and train the model of one collection; returns (best model on CPU, FitResult)."""
    gnn = cfg.gnn
    torch.set_num_threads(int(gnn.num_threads))
    device = pick_device(str(gnn.device))
    if device.type == "cuda":
        torch.cuda.set_device(info.local_rank)
        device = torch.device("cuda", info.local_rank)
    train, valid = pruned_graphs(cfg, collection, "train"), pruned_graphs(cfg, collection, "valid")
    if not train:
        raise ValueError(f"{cfg.paths.pruned_dir}/{collection.slug}: no train graphs; run the prune stage first")
    spec = ModelSpec.from_cfg(collection.kind, train[0].node_feat.shape[1], gnn, collection.search)
    torch.manual_seed(int(cfg.seed))                     # identical initial weights on every rank
    model = build_model(spec, gnn.infer_chunk_mb).to(device)
    gst = gst_settings(gnn, collection)
    if gst is not None and prune_hops(cfg.prune.hops, collection) is not None and info.is_main:
        print(f"[{STAGE} {collection.slug}] note: gnn.mode=gst on graphs pruned with prune.hops={cfg.prune.hops}; "
              f"prune.hops={WHOLE_GRAPH} gives GST the whole graphs", flush=True)
    wrapped = model
    if info.enabled and gst is None:           # GST averages gradients itself (pipeline.graphnet.gst)
        wrapped = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[info.local_rank] if device.type == "cuda" else None)
    model_dir, _ = output_dirs(cfg, collection)

    def on_epoch(row: dict) -> None:
        print(f"[{STAGE} {collection.slug}] epoch {row['epoch']}: loss {row['loss']:.4f} "
              f"valid {row['valid_score']:.4f} lr {row['lr']:.2e} {row['configs_per_second']:.0f} configs/s", flush=True)
        if run is not None:
            run.log(row, step=row["epoch"])

    settings = TrainSettings.from_cfg(gnn, collection.kind, collection.search)
    settings = dataclasses.replace(settings, min_gap=train_min_gap(cfg, collection, info.is_main))
    result = fit(wrapped, spec, train, valid, settings, gst, int(cfg.seed), model_dir / ckpt.CHECKPOINT_FILE, device,
                 info, on_epoch, max_epochs)
    best = build_model(spec, gnn.infer_chunk_mb)
    best.load_state_dict(result.best_state)
    if info.is_main:
        ckpt.save_model(best, spec, model_dir / ckpt.MODEL_FILE,
                        {"best_epoch": result.best_epoch, "best_valid_score": result.best_score,
                         "collection": collection.name, "seed": int(cfg.seed)})
    return best.eval(), result


def predict_split(cfg: DictConfig, collection: Collection, model: torch.nn.Module, split: str,
                  info: DistInfo = DistInfo()) -> Predictions:
    """Rank every config of every graph of a split (graphs sharded over ranks, merged on every rank)."""
    from pipeline.graphnet.distributed import gather_objects

    gnn = cfg.gnn
    device = pick_device(str(gnn.device))
    if device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
    graphs = pruned_graphs(cfg, collection, split)
    gst = gst_settings(gnn, collection)
    segments = None if gst is None else SegmentCache(gst, model.spec.layers + 1, device, keep=False)
    mine = predict_graphs(model.to(device), collection.kind, graphs[info.rank::info.world],
                          InferSettings.from_cfg(gnn), int(cfg.seed), device, progress=info.is_main,
                          segments=segments)
    merged = Predictions()
    for part in gather_objects(mine.scores, info):
        for graph_id, scores in part.items():
            merged[graph_id] = scores
    merged.check_covers({g.graph_id: g.n_configs for g in graphs}, where=f"{STAGE} {collection.slug}/{split}")
    return merged


def run(cfg: DictConfig, collection: Collection, max_epochs: int | None = None) -> dict | None:
    """The whole stage for one collection; returns the metrics dict on rank 0 (None on other ranks)."""
    from pipeline import tracking
    from pipeline.scoring import evaluate

    device = pick_device(str(cfg.gnn.device))
    info = init_distributed(device)
    try:
        tic = time.perf_counter()
        if not info.is_main:
            model, result = train_collection(cfg, collection, info, None, max_epochs)
            for split in PREDICTED_SPLITS:
                predict_split(cfg, collection, model, split, info)
            return None
        with tracking.start_run(cfg, stage=STAGE, collection=collection.slug) as run:
            model, result = train_collection(cfg, collection, info, run, max_epochs)
            train_seconds = time.perf_counter() - tic
            preds = {split: predict_split(cfg, collection, model, split, info) for split in PREDICTED_SPLITS}
            for split, p in preds.items():
                save_predictions(p, predictions_path(cfg.paths.predictions_dir, MODEL, collection.slug, split))
            _, plots_dir = output_dirs(cfg, collection)
            write_curve(result.curve, plots_dir / CURVE_FILE)
            extra = {"best_epoch": result.best_epoch, "train_seconds": round(train_seconds, 2),
                     "seconds": round(time.perf_counter() - tic, 2), "world_size": info.world,
                     "parameters": sum(p.numel() for p in model.parameters())}
            metrics = evaluate.evaluate_and_write(cfg, STAGE, collection, preds, extra)
            run.summary.update({k: v for k, v in metrics.items() if k != "per_graph"})
            tracking.log_table(run, "valid_per_graph", pd.DataFrame(
                [r for r in metrics["per_graph"] if r["split"] == "valid"], columns=["split", "graph_id", "score"]))
            return metrics
    finally:
        barrier(info)
        shutdown(info)


def main(argv: Sequence[str] | None = None) -> None:
    args, cfg = stage_args(__doc__, argv)
    warn_threads("gnn.num_threads", int(cfg.gnn.num_threads))
    collection = Collection.parse(args.collection)
    metrics = run(cfg, collection)
    if metrics is not None:
        scores = {s: round(metrics[s]["score"], 4) for s in PREDICTED_SPLITS if s in metrics}
        print(f"[{STAGE} {collection.slug}] {scores} in {metrics['seconds']} s")


if __name__ == "__main__":
    main()
