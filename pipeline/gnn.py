"""Stage `gnn`: a GraphSAGE cost model with cross-configuration attention per collection.

    python -m pipeline.gnn --collection layout-xla-default [gnn.lr=3e-4 gnn.cross_attention=false ...]
    torchrun --nproc_per_node=2 -m pipeline.gnn --collection layout-xla-default   # DDP, graphs sharded

Reads the pruned graphs `<pruned_dir>/<slug>/`. For every member seed of `gnn.seeds` (pipeline/graphnet/members.py)
it trains on train (configs sampled per graph per step) until the valid metric plateaus or `gnn.epochs` run out,
selects the epoch by the collection metric on valid and ranks every configuration of valid and test with TTA; the
stage's predictions are the members' per-graph rank-normalised scores averaged.
Outputs (rank 0, each written atomically):
- `<models_dir>/gnn/<slug>/seed<k>/model.pt` (member k's best model: spec + weights + best/last epoch, stop reason);
  its resumable state goes to `<checkpoints_dir>/gnn/<slug>/seed<k>/checkpoint.pt`, not a DVC output;
- `<predictions_dir>/gnn/<slug>/{valid,test}.npz` (one score per ORIGINAL config index, lower = faster);
- `<plots_dir>/gnn/<slug>/curve.csv` (seed, epoch, loss, valid_score, lr, ...: every member's curve);
- metrics via `pipeline.scoring.evaluate.evaluate_and_write` (`<metrics_dir>/gnn/<slug>.json` + per-graph CSV),
  with every member's valid/test score, epochs and stop reason, and the seed ensemble's gain over its best member.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from omegaconf import DictConfig

from pipeline.errors import PipelineError, run_main
from pipeline.config import stage_args, warn_threads
from pipeline.timings import Stopwatch, write_timings
from pipeline.files import read_json, write_csv
from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.distributed import DistInfo, barrier, init_distributed, shutdown
from pipeline.graphnet.member_pool import Recorder, member_threads, pool_size, run_pool
from pipeline.graphnet.members import member_dir, member_seed, rank_mean
from pipeline.graphnet.progress import epoch_reporter
from pipeline.graphnet.scoring import member_predictions
from pipeline.graphnet.losses import hinge_min_gap, ordered_pair_count
from pipeline.graphnet.model import build_model
from pipeline.graphnet.schedule import STOP_BUDGET, STOP_PLATEAU
from pipeline.graphnet.settings import GnnSettings
from pipeline.graphnet.train_loop import FitResult, TrainSettings, fit, pick_device
from pipeline.predictions import Predictions, predictions_path, save_predictions
from pipeline.scoring import metrics as scoring
from pipeline.pruned import (INDEX_FILE, NORMALIZER_FILE, REPORT_FILE, WHOLE_GRAPH, PrunedGraph, check_pruned_from,
                             collection_dir, iter_split)
from pipeline.pruning.normalize import Normalizer
from pipeline.settings.gnn import gnn_settings
from pipeline.tpugraphs.dataset import Collection
from pipeline.tpugraphs.schema import PREDICTED_SPLITS

STAGE = "gnn"
MODEL = "gnn"
CURVE_FILE = "curve.csv"
TIMING_KEYS = ("seconds", "epoch_seconds")   # a member's timings: in the timings file, not in its metrics
CURVE_COLUMNS = ["seed", "epoch", "loss", "valid_score", "lr"]   # no timings (pipeline/timings.py)


def pruned_graphs(cfg: DictConfig, collection: Collection, split: str) -> list[PrunedGraph]:
    """The memory-mapped pruned graphs of one split."""
    return list(iter_split(cfg.paths.pruned_dir, collection.slug, split))


def sibling_folder(cfg: DictConfig, collection: Collection) -> Path:
    """gnn.joint_sources: the pruned folder of `collection.sibling` (the other source, the same search; the schema
    made sure it is configured); PipelineError naming its index when prune has not written it."""
    sibling = collection.sibling
    folder = collection_dir(cfg.paths.pruned_dir, sibling.slug)
    if not (folder / INDEX_FILE).exists():
        raise PipelineError(f"{folder / INDEX_FILE} missing: {collection.slug} trains on {sibling.slug}'s train "
                            f"graphs too; run `dvc repro prune@{sibling.slug}` first")
    return folder


def sibling_train_graphs(cfg: DictConfig, collection: Collection) -> list[PrunedGraph]:
    """gnn.joint_sources: the train graphs of `collection.sibling` (`sibling_folder`), their `node_feat` recomputed
    from `node_feat_raw` with THIS collection's normaliser (its columns and statistics) and their ids prefixed with
    the sibling's slug."""
    sibling, folder = collection.sibling, sibling_folder(cfg, collection)
    normalizer = Normalizer.load(collection_dir(cfg.paths.pruned_dir, collection.slug) / NORMALIZER_FILE)
    return [dataclasses.replace(g, graph_id=f"{sibling.slug}/{g.graph_id}",       # [nodes, this collection's columns]
                                node_feat=normalizer.apply(g.node_feat_raw, folder / "train" / g.graph_id))
            for g in iter_split(cfg.paths.pruned_dir, sibling.slug, "train")]


def output_dirs(cfg: DictConfig, collection: Collection) -> tuple[Path, Path]:
    """(model folder, plots folder) of this stage and collection."""
    return (Path(cfg.paths.models_dir) / MODEL / collection.slug, Path(cfg.paths.plots_dir) / MODEL / collection.slug)


def checkpoint_dir(cfg: DictConfig, collection: Collection) -> Path:
    """`<checkpoints_dir>/gnn/<slug>`: the members' resumable state (`seed<k>/checkpoint.pt`), outside the DVC
    outputs, so that DVC's run cache can restore the stage's models and a killed run still finds it."""
    return Path(cfg.paths.checkpoints_dir) / MODEL / collection.slug


def write_curve(curve: list[dict], path: Path) -> None:
    """Every member's training curve for `dvc plots` (atomic)."""
    write_csv(pd.DataFrame(curve, columns=CURVE_COLUMNS), path)


def train_min_gap(cfg: DictConfig, collection: Collection, settings: GnnSettings, verbose: bool) -> float:
    """The hinge's min_gap: from the duplicate-runtime spread prune measured, or gnn.min_gap (losses.hinge_min_gap).

    A spread so wide (a noisy cost model measuring each configuration twice, 3x apart) that the min_gap it gives
    orders no pair of any train graph would leave the hinge nothing to learn from, every member a constant model:
    then gnn.min_gap stands in, with a warning line."""
    path = collection_dir(cfg.paths.pruned_dir, collection.slug) / REPORT_FILE
    quantile = settings.min_gap_quantile
    report = read_json(path) if quantile is not None else {}
    min_gap, source = hinge_min_gap(settings.train.min_gap, quantile, report, str(path))
    if min_gap != settings.train.min_gap:
        runtimes = [graph.config_runtime for graph in pruned_graphs(cfg, collection, "train")]
        if not any(ordered_pair_count(r, min_gap) for r in runtimes) and \
                any(ordered_pair_count(r, settings.train.min_gap) for r in runtimes):
            if verbose:
                print(f"[{STAGE} {collection.slug}] warning: min_gap {min_gap:.5f} ({source}) orders no pair of train "
                      f"configurations; using gnn.min_gap={settings.train.min_gap} instead (lower "
                      f"gnn.min_gap_quantile to keep one from the data)", file=sys.stderr, flush=True)
            return float(settings.train.min_gap)
    if verbose:
        print(f"[{STAGE} {collection.slug}] pairwise hinge min_gap {min_gap:.5f} ({source})", flush=True)
    return min_gap


def train_settings(cfg: DictConfig, collection: Collection, settings: GnnSettings, verbose: bool) -> TrainSettings:
    """The training settings of one collection with the hinge's min_gap set (from the data when
    gnn.min_gap_quantile): once per stage run, shared by every member (with `verbose`, the notes are printed once)."""
    if verbose and settings.prune_hops is not None and settings.gst is not None:
        print(f"[{STAGE} {collection.slug}] note: gnn.mode=gst on graphs pruned with prune.hops={settings.prune_hops}; "
              f"prune.hops={WHOLE_GRAPH} gives GST the whole graphs", flush=True)
    return dataclasses.replace(settings.train, min_gap=train_min_gap(cfg, collection, settings, verbose))


def train_collection(cfg: DictConfig, collection: Collection, member: int, settings: GnnSettings,
                     train_with: TrainSettings, info: DistInfo = DistInfo(), on_epoch=None,
                     max_epochs: int | None = None) -> tuple[torch.nn.Module, FitResult]:
    """Build and train member `member` of one collection with `settings` and `train_with` (train_settings); returns
    (best model on CPU, FitResult) and writes the member's model.pt (spec, weights, best/last epoch and stop reason)
    on rank 0."""
    torch.set_num_threads(settings.num_threads)
    device = pick_device(settings.device)
    if device.type == "cuda":
        torch.cuda.set_device(info.local_rank)
        device = torch.device("cuda", info.local_rank)
    train, valid = pruned_graphs(cfg, collection, "train"), pruned_graphs(cfg, collection, "valid")
    if not train:
        raise ValueError(f"{cfg.paths.pruned_dir}/{collection.slug}: no train graphs; run the prune stage first")
    if settings.joint_sources:
        train = train + sibling_train_graphs(cfg, collection)
    spec = settings.spec(train[0].node_feat.shape[1])
    seed = member_seed(settings.seed, member)
    torch.manual_seed(seed)                              # identical initial weights on every rank
    model = build_model(spec, settings.infer_chunk_mb).to(device)
    gst = settings.gst
    wrapped = model
    if info.enabled and gst is None:           # GST averages gradients itself (pipeline.graphnet.gst)
        wrapped = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[info.local_rank] if device.type == "cuda" else None)
    model_dir = member_dir(output_dirs(cfg, collection)[0], member)
    checkpoint = member_dir(checkpoint_dir(cfg, collection), member) / ckpt.CHECKPOINT_FILE
    result = fit(wrapped, spec, train, valid, train_with, gst, seed, checkpoint, device,
                 info, on_epoch, max_epochs)
    best = build_model(spec, settings.infer_chunk_mb)
    best.load_state_dict(result.best_state)
    if info.is_main:
        ckpt.save_model(best, spec, model_dir / ckpt.MODEL_FILE,
                        {**run_summary(result), "collection": collection.name, "seed": settings.seed,
                         "member": member})
    return best.eval(), result


def run_summary(result: FitResult) -> dict:
    """What a member's model.pt and the metrics record about its training length."""
    return {"best_epoch": result.best_epoch, "best_valid_score": result.best_score, "last_epoch": result.last_epoch,
            "stopped": result.stopped}


def predict_split(cfg: DictConfig, collection: Collection, settings: GnnSettings, model: torch.nn.Module,
                  split: str, seed: int, info: DistInfo = DistInfo(), progress: bool = True) -> Predictions:
    """Rank every config of every graph of a split with one member (TTA orderings from the member's `seed`;
    graphs sharded over ranks, merged on every rank; a progress bar on rank 0 with `progress`)."""
    from pipeline.graphnet.distributed import gather_objects

    device = pick_device(settings.device)
    if device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
    graphs = pruned_graphs(cfg, collection, split)
    mine = member_predictions(model, collection.kind, graphs[info.rank::info.world], settings, seed, device,
                              progress=info.is_main and progress)
    merged = Predictions()
    for part in gather_objects(mine.scores, info):
        for graph_id, scores in part.items():
            merged[graph_id] = scores
    merged.check_covers({g.graph_id: g.n_configs for g in graphs}, where=f"{STAGE} {collection.slug}/{split}")
    return merged


@dataclass(frozen=True)
class MemberJob:
    """One member to train and predict with: what a pool worker needs (picklable)."""

    cfg: DictConfig
    collection: Collection
    settings: GnnSettings
    train_with: TrainSettings                # train_settings(...): min_gap resolved once for every member
    member: int                              # the member seed (an entry of gnn.seeds)
    position: int                            # its 0-based place in gnn.seeds
    workers: int = 1                         # members training at once (progress lines' ETA)
    max_epochs: int | None = None


@dataclass
class MemberOutcome:
    """A trained member: its predictions, run_summary + timings, curve rows, size and the rows it logged."""

    preds: dict[str, Predictions]
    summary: dict
    curve: list[dict]
    parameters: int
    logged: list[dict] = dataclasses.field(default_factory=list)


def train_member(job: MemberJob, info: DistInfo = DistInfo(), run=None) -> MemberOutcome:
    """Train member `job.member` and rank valid and test with it (a pool worker's task when `run` is None: the
    rows to log are then returned in `logged`)."""
    slug, members, settings = job.collection.slug, len(job.settings.members), job.settings
    recorder = Recorder() if run is None else run
    watch = Stopwatch()
    report = (epoch_reporter(slug, job.member, job.position, members, job.train_with.epochs,
                             job.train_with.patience, recorder, job.workers) if info.is_main else None)
    model, result = train_collection(job.cfg, job.collection, job.member, settings, job.train_with, info, report,
                                     job.max_epochs)
    seed = member_seed(settings.seed, job.member)
    preds = {split: predict_split(job.cfg, job.collection, settings, model, split, seed, info,
                                  progress=job.workers == 1)       # side by side, bars would garble each other
             for split in PREDICTED_SPLITS}
    summary = {"seed": job.member, **run_summary(result), "seconds": watch.elapsed(),
               "epoch_seconds": epoch_seconds(result)}
    if result.stopped == STOP_BUDGET and info.is_main:
        print(f"[{STAGE} {slug}] warning: seed {job.member} stopped at the budget (gnn.epochs={job.train_with.epochs}) "
              f"before its valid score plateaued (best epoch {result.best_epoch + 1}); raise gnn.epochs", flush=True)
    return MemberOutcome(preds, summary, [{"seed": job.member, **row} for row in result.curve],
                         sum(p.numel() for p in model.parameters()), recorder.rows if run is None else [])


def train_members(cfg: DictConfig, collection: Collection, settings: GnnSettings, info: DistInfo, run=None,
                  max_epochs: int | None = None) -> tuple[list[dict[str, Predictions]], list[dict], list[dict], int]:
    """Train and predict with every member of gnn.seeds, `gnn.member_workers` at a time on a CPU
    (pipeline/graphnet/member_pool.py), else one after the other: (per member {split: Predictions}, per member
    run_summary + seconds and mean epoch seconds, every member's curve rows, parameters of one member)."""
    members = settings.members
    train_with = train_settings(cfg, collection, settings, info.is_main)
    workers = pool_size(settings.member_workers, len(members), info.enabled, pick_device(settings.device).type)
    if workers > 1:
        threads = [member_threads(settings.num_threads, workers, len(members), p) for p in range(len(members))]
        print(f"[{STAGE} {collection.slug}] {len(members)} members, {workers} at a time (torch threads: "
              f"{', '.join(map(str, threads))})", flush=True)
        jobs = [MemberJob(cfg, collection, dataclasses.replace(settings, num_threads=threads[position]), train_with,
                          member, position, workers, max_epochs) for position, member in enumerate(members)]
        outcomes = run_pool(train_member, jobs, workers)
        for row in (r for o in outcomes for r in o.logged) if run is not None else ():
            run.log(row)
    else:
        outcomes = [train_member(MemberJob(cfg, collection, settings, train_with, member, position,
                                           max_epochs=max_epochs), info, run)
                    for position, member in enumerate(members)]
    return ([o.preds for o in outcomes], [o.summary for o in outcomes], [r for o in outcomes for r in o.curve],
            outcomes[-1].parameters)


def epoch_seconds(result: FitResult) -> float | None:
    """A member's mean seconds per epoch trained in this run (None when it only resumed a finished run)."""
    return round(float(np.mean([t["seconds"] for t in result.timing])), 3) if result.timing else None


def seed_report(kind: str, member_preds: list[dict[str, Predictions]], blended: dict[str, Predictions],
                truth: dict[str, dict | None], summaries: list[dict]) -> dict:
    """Metrics extras: every member's scores next to its training summary; per split the members' mean and std
    and the seed ensemble's gain over its best member; the members' mean best epoch, their last epoch and
    `stopped` (`budget` when any member stopped at the budget, else `plateau`)."""
    members = [{k: v for k, v in s.items() if k not in TIMING_KEYS} for s in summaries]
    report: dict = {"members": members}
    for split, split_truth in truth.items():
        if split_truth is None:
            continue
        scores = [scoring.score_predictions(kind, p[split], split_truth)["score"] for p in member_preds]
        for row, score in zip(members, scores):
            row[split] = score
        ensemble = scoring.score_predictions(kind, blended[split], split_truth)["score"]
        report[f"seed_ensemble_{split}"] = {"member_mean": float(np.mean(scores)), "member_std": float(np.std(scores)),
                                            "best_member": float(max(scores)),
                                            "gain_over_best_member": ensemble - float(max(scores))}
    budget_stops = sum(s["stopped"] == STOP_BUDGET for s in summaries)
    report |= {"best_epoch": float(np.mean([s["best_epoch"] for s in summaries])),     # members' mean
               "last_epoch": max(s["last_epoch"] for s in summaries), "stopped_at_budget": budget_stops,
               "stopped": STOP_BUDGET if budget_stops else STOP_PLATEAU}                # budget: some member did
    return report


def run(cfg: DictConfig, collection: Collection, max_epochs: int | None = None,
        settings: GnnSettings | None = None) -> dict | None:
    """The whole stage for one collection (`settings`: gnn_settings(cfg, collection) unless given); returns the
    metrics dict on rank 0 (None on other ranks)."""
    from pipeline import tracking
    from pipeline.scoring import evaluate

    settings = gnn_settings(cfg, collection) if settings is None else settings
    device = pick_device(settings.device)
    info = init_distributed(device)
    try:
        watch = Stopwatch()
        if not info.is_main:
            train_members(cfg, collection, settings, info, None, max_epochs)
            return None
        with tracking.start_run(cfg, stage=STAGE, collection=collection.slug) as run:
            member_preds, summaries, curve, parameters = train_members(cfg, collection, settings, info, run,
                                                                       max_epochs)
            preds = {split: rank_mean([p[split] for p in member_preds]) for split in PREDICTED_SPLITS}
            for split, p in preds.items():
                save_predictions(p, predictions_path(cfg.paths.predictions_dir, MODEL, collection.slug, split))
            _, plots_dir = output_dirs(cfg, collection)
            write_curve(curve, plots_dir / CURVE_FILE)
            truth = {split: evaluate.load_truth(cfg, collection, split) for split in PREDICTED_SPLITS}
            extra = {**seed_report(collection.kind, member_preds, preds, truth, summaries),
                     "world_size": info.world, "parameters": parameters}
            metrics = evaluate.evaluate_and_write(cfg, STAGE, collection, preds, extra, truth)
            timings = {"seconds": watch.elapsed(),
                       "members": [{k: s[k] for k in ("seed", *TIMING_KEYS)} for s in summaries]}
            write_timings(cfg.paths.metrics_dir, STAGE, collection.slug, timings)
            metrics["seconds"] = timings["seconds"]
            run.summary.update({k: v for k, v in metrics.items() if k not in ("per_graph", "members")})
            tracking.log_table(run, "valid_per_graph", pd.DataFrame(
                [r for r in metrics["per_graph"] if r["split"] == "valid"], columns=["split", "graph_id", "score"]))
            return metrics
    finally:
        barrier(info)
        shutdown(info)


def main(argv: Sequence[str] | None = None) -> None:
    args, cfg = stage_args(__doc__, argv)
    collection = Collection.parse(args.collection)
    settings = gnn_settings(cfg, collection)
    warn_threads("gnn.num_threads", settings.num_threads)
    check_pruned_from(cfg.paths.pruned_dir, collection, cfg.data.root)      # before any training or output
    if settings.joint_sources:                                              # it trains on the sibling's graphs too
        sibling_folder(cfg, collection)
        check_pruned_from(cfg.paths.pruned_dir, collection.sibling, cfg.data.root)
    metrics = run(cfg, collection, settings=settings)
    if metrics is not None:
        from pipeline.scoring.evaluate import score_line
        print(score_line(STAGE, collection.slug, metrics, metrics["seconds"]))


if __name__ == "__main__":
    run_main(main)
