"""The training loop: sampled configs per graph, ranking loss, AdamW + warm-up schedule, clipping, bf16 on CUDA,
per-epoch validation (model selection by the collection metric), early stopping on a plateau of that metric
(pipeline/graphnet/schedule.py) and an exactly resumable checkpoint.

`fit` takes typed settings (`TrainSettings`, `GSTSettings`) and runs: `_setup` (optimiser, schedule, GST trainer),
`_resume`, then per epoch `_train_epoch`, `validate`, `_select`, the stop decision and `_save_checkpoint`.
Validation scores every kept config of a valid graph (up to `gnn.valid_max_configs`) with the TTA orderings and
config batches of the final inference, so the selected epoch's score is the score its predictions get (unless
`gnn.valid_tta` sets fewer orderings for the selection).

Randomness: the graph order of epoch e comes from rng (seed, e) (shared by all ranks), config sampling from a
per-rank generator and dropout from torch's RNG; all of it is checkpointed, so resuming reproduces the
uninterrupted run bit for bit on CPU.
"""
from __future__ import annotations

import copy
import math
import time
import zlib
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from pipeline.errors import TrainingDivergedError
from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.data import config_batch, graph_tensors, runtimes, sample_configs, shard
from pipeline.graphnet.distributed import DistInfo, average_gradients, gather_objects
from pipeline.graphnet.ema import WeightAverage, step_decay
from pipeline.graphnet.gst import GSTSettings, GSTTrainer, SegmentCache, freeze_to_head
from pipeline.graphnet.infer import InferSettings, autocast, predict_rows
from pipeline.graphnet.losses import ranking_loss
from pipeline.graphnet.model import ModelSpec
from pipeline.graphnet.schedule import LrSchedule, Plateau, stop_reason
from pipeline.pruned import PrunedGraph
from pipeline.scoring import metrics

RESUME_CHANGES_SHOWN = 4          # differences a refused checkpoint's message lists at most


@dataclass(frozen=True)
class TrainSettings:
    """What training reads from the `gnn` group, resolved for one collection (values by search picked) by
    `pipeline.settings.gnn.train_settings`."""

    lr: float                     # peak AdamW learning rate
    weight_decay: float
    warmup_frac: float            # share of the budget's optimiser steps spent warming up
    schedule: str                 # after the warm-up: plateau | constant | cosine (to 0 at the budget)
    lr_patience: int              # plateau: epochs without a gain that multiply the rate by lr_decay
    lr_decay: float
    epochs: int                   # the budget: most epochs (before GST's head fine-tuning)
    patience: int                 # epochs without a validation gain > min_delta that stop training
    min_delta: float
    steps_per_epoch: int | None   # None: one pass over the (rank's share of the) train graphs
    graphs_per_step: int          # graphs whose losses are averaged into one optimiser step
    configs_per_graph: int        # configs sampled per graph per step
    grad_clip: float | None       # max gradient norm, None: no clipping
    loss: str                     # pipeline.graphnet.losses.ranking_loss name
    margin: float
    min_gap: float
    resume: bool                  # continue from the checkpoint when it exists
    amp: bool                     # bf16 autocast on CUDA
    valid_max_configs: int        # per-epoch model selection scores at most this many configs per valid graph
    valid: InferSettings          # how valid configs are scored: as at the final inference
    ema_epochs: float | None = None   # validate and keep an EMA of the weights with this time constant (epochs)
    valid_metric: str = "score"   # what selection reads per valid graph: the collection's score | order (Kendall tau)


@dataclass
class FitResult:
    best_state: dict                      # weights of the selected epoch (CPU tensors)
    best_epoch: int
    best_score: float                     # valid metric of the selected epoch (NaN without valid graphs)
    curve: list[dict] = field(default_factory=list)   # one row per epoch: epoch, loss, valid_score, lr
    timing: list[dict] = field(default_factory=list)  # per epoch of this call: epoch, seconds, ... (not checkpointed:
                                                      # wall-clock time would make identical runs differ)
    valid_per_graph: dict = field(default_factory=dict)  # graph_id -> valid metric at the best epoch
    last_epoch: int = -1                  # the last epoch trained (GST head fine-tuning included)
    stopped: str | None = None            # why the main phase ended: plateau | budget (None while it runs)
    main_epochs: int = 0                  # epochs of the main phase (before GST's head fine-tuning)
    plateau: dict = field(default_factory=dict)   # Plateau state (early stopping)


def pick_device(name: str) -> torch.device:
    """gnn.device: auto (CUDA when present) | cpu | cuda."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("gnn.device=cuda but no CUDA device is available")
    return torch.device(name)


def valid_rows(graph: PrunedGraph, max_configs: int, seed: int) -> np.ndarray:
    """The fixed subset of kept configs scored for model selection (all of them when the graph has few)."""
    if graph.n_kept <= max_configs:
        return np.arange(graph.n_kept)
    rng = np.random.default_rng([seed, zlib.crc32(graph.graph_id.encode())])
    return np.sort(rng.choice(graph.n_kept, size=max_configs, replace=False))


def validate(model: nn.Module, kind: str, graphs: list[PrunedGraph], settings: TrainSettings, seed: int,
             device: torch.device, info: DistInfo, segments: SegmentCache | None = None) -> dict[str, float]:
    """Metric per valid graph (kept configs, `settings.valid.tta` orderings), sharded over ranks: the collection's own
    score, or with `settings.valid_metric` "order" Kendall tau for any kind (tile's top-k score stays flat while a
    tile model's order improves; it would stop the run and decay its rate on that flat start)."""
    model.eval()
    mine = {}
    for graph in graphs[info.rank::info.world]:
        rows = valid_rows(graph, settings.valid_max_configs, seed)
        rng = np.random.default_rng([seed, zlib.crc32(graph.graph_id.encode())])
        tensors = graph_tensors(graph).to(device) if segments is None else None
        scores = predict_rows(model, kind, graph, tensors, rows, settings.valid, rng, device,
                              None if segments is None else segments.get(graph))
        truth = np.asarray(graph.config_runtime[rows], dtype=np.float64)
        mine[graph.graph_id] = (metrics.graph_score(kind, scores, truth) if settings.valid_metric == "score"
                                else metrics.kendall_tau(scores, truth))
    model.train()
    merged = {}
    for part in gather_objects(mine, info):
        merged.update(part)
    return merged


def train_step(model: nn.Module, kind: str, graphs: list[PrunedGraph], settings: TrainSettings,
               rng: np.random.Generator, device: torch.device, ddp: bool, cache: dict | None = None,
               gst: GSTTrainer | None = None) -> tuple[float, int]:
    """Forward/backward over a few graphs (gradients accumulated); returns (mean loss, configs seen).

    `cache` (graph_id -> GraphTensors on device) keeps the static tensors of graphs already seen.
    `gst` samples the configs and scores them segment-wise instead (Graph Segment Training).
    """
    total, seen = 0.0, 0
    cache = {} if cache is None else cache
    k = settings.configs_per_graph
    for i, graph in enumerate(graphs):
        visit = None if gst is None else gst.sample(graph, k, rng)
        rows = sample_configs(graph, k, rng) if visit is None else visit.rows
        if gst is None and graph.graph_id not in cache:
            cache[graph.graph_id] = graph_tensors(graph).to(device)
        configs = config_batch(kind, graph, rows).to(device)
        target = runtimes(graph, rows).to(device)
        sync = nullcontext() if (not ddp or i == len(graphs) - 1) else model.no_sync()
        with sync:
            with autocast(device, settings.amp):
                if gst is None:
                    scores = model(cache[graph.graph_id], configs)          # [configs]
                else:
                    scores = gst.scores(graph, visit, configs, rng)         # [configs]
            loss = ranking_loss(settings.loss, scores.float(), target, settings.margin, settings.min_gap) / len(graphs)
            loss.backward()
        total += float(loss.detach()) * len(graphs)
        seen += len(rows)
    return total / len(graphs), seen


@dataclass
class _Run:
    """The state of one training run: what an epoch updates and the checkpoint holds."""

    model: nn.Module                       # as trained (DDP-wrapped when distributed)
    core: nn.Module                        # the model itself
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    rng: np.random.Generator               # this rank's config sampling
    visits: list[PrunedGraph]              # an epoch's graph visits (GST: one per `segments_per_step` segments)
    segments: SegmentCache | None = None   # GST only
    trainer: GSTTrainer | None = None      # GST only
    ema: WeightAverage | None = None       # the weights' moving average (settings.ema_epochs), else None
    start: int = 0                         # first epoch to run
    cache: dict = field(default_factory=dict)


def steps_per_epoch(settings: TrainSettings, n_items: int, world: int) -> int:
    """Optimiser steps per epoch: settings.steps_per_epoch, else one pass over this rank's share of n_items."""
    if settings.steps_per_epoch:
        return settings.steps_per_epoch
    per_rank = -(-n_items // world)
    return max(1, -(-per_rank // settings.graphs_per_step))


def _setup(model: nn.Module, spec: ModelSpec, train_graphs: list[PrunedGraph], settings: TrainSettings,
           gst: GSTSettings | None, seed: int, device: torch.device, info: DistInfo) -> _Run:
    """Optimiser, GST trainer, epoch visits, LR schedule over the budget and random generators, in this order."""
    core = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    segments = None if gst is None else SegmentCache(gst, spec.layers + 1, device)
    trainer = None if gst is None else GSTTrainer(core, gst, segments)
    # an epoch trains every node once: in GST a graph is visited once per `segments_per_step` of its segments
    visits = train_graphs if gst is None else [g for g in train_graphs for _ in range(trainer.visits(g))]
    finetune_scale = gst.finetune_lr_scale if gst else 0.0
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, LrSchedule(
        settings.schedule, settings.epochs * steps_per_epoch(settings, len(visits), info.world), settings.warmup_frac,
        finetune_scale))
    rng = np.random.default_rng([seed, info.rank])
    torch.manual_seed(seed + info.rank)
    ema = (WeightAverage(core, step_decay(settings.ema_epochs, steps_per_epoch(settings, len(visits), info.world)))
           if settings.ema_epochs else None)
    return _Run(model=model, core=core, optimizer=optimizer, scheduler=scheduler, rng=rng, visits=visits,
                segments=segments, trainer=trainer, ema=ema)


def _resume(run: _Run, state: dict, spec: ModelSpec, info: DistInfo, checkpoint_path: Path,
            record: dict) -> FitResult:
    """Restore a run from its checkpoint `state` written with the same spec, world size and `ckpt.resume_record`
    (else CheckpointError: one line naming what differs); returns the FitResult so far."""
    if state["spec"] != spec.to_dict() or len(state["rng"]) != info.world:
        raise ckpt.CheckpointError(f"{checkpoint_path}: checkpoint was written for another model spec or world "
                                   f"size; delete it or run with gnn.resume=false")
    changes = ckpt.record_changes(state.get("record"), record)
    if changes:
        listed = "; ".join(changes[:RESUME_CHANGES_SHOWN]) + ("; ..." if len(changes) > RESUME_CHANGES_SHOWN else "")
        raise ckpt.CheckpointError(f"{checkpoint_path}: checkpoint of another run ({listed}); delete it or run "
                                   f"with gnn.resume=false")
    run.core.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    ckpt.restore_rng_state(state["rng"][info.rank], run.rng)
    run.start = state["epoch"] + 1
    if run.trainer is not None:
        run.trainer.load_state_dict(state["gst"][info.rank])
    if run.ema is not None:                      # the record's gnn.ema_epochs matched: the average is there
        run.ema.load_state_dict(state["ema"])
    return FitResult(best_state=state["best_state"], best_epoch=state["best_epoch"], best_score=state["best_score"],
                     curve=state["curve"], valid_per_graph=state["valid_per_graph"], last_epoch=state["epoch"],
                     stopped=state.get("stopped"), main_epochs=state.get("main_epochs", state["epoch"] + 1),
                     plateau=state.get("plateau", {}))


def _train_epoch(run: _Run, items: list[PrunedGraph], epoch: int, kind: str, settings: TrainSettings, seed: int,
                 device: torch.device, info: DistInfo) -> tuple[list[float], int]:
    """One epoch of optimiser steps over this rank's share of `items`; returns (step losses, configs seen)."""
    from tqdm import tqdm

    stream = shard(items, info.rank, info.world, np.random.default_rng([seed, epoch]))
    gps, losses, seen = settings.graphs_per_step, [], 0
    steps = steps_per_epoch(settings, len(items), info.world)
    # a bar on a terminal only (disable=None): DVC logs and CI keep one line per epoch (gnn.py)
    for step in tqdm(range(steps), desc=f"epoch {epoch + 1}", unit="step", leave=False,
                     disable=None if info.is_main else True):
        batch = [stream[(step * gps + j) % len(stream)] for j in range(gps)]
        run.optimizer.zero_grad(set_to_none=True)
        loss, n = train_step(run.model, kind, batch, settings, run.rng, device,
                             info.enabled and run.trainer is None, run.cache, run.trainer)
        if not math.isfinite(loss):
            raise TrainingDivergedError(f"training diverged: the loss is {loss} at epoch {epoch + 1}, step {step + 1}"
                                        f"; lower gnn.lr (now {settings.lr:g} for this collection)")
        if run.trainer is not None:
            average_gradients(run.core, info)
        if settings.grad_clip:
            nn.utils.clip_grad_norm_(run.model.parameters(), settings.grad_clip)
        run.optimizer.step()
        run.scheduler.step()
        if run.ema is not None:
            run.ema.update(run.core)
        losses.append(loss)
        seen += n
    return losses, seen


def _select(result: FitResult, core: nn.Module, epoch: int, score: float, per_graph: dict) -> None:
    """Keep this epoch's weights when it is the best on valid so far (always, without valid graphs). A tie goes to
    the later, longer-trained epoch: a saturated metric (tile valid at its ceiling of 1.0) keeps improving models."""
    if not per_graph or score >= result.best_score:
        result.best_state = copy.deepcopy({k: v.detach().cpu() for k, v in core.state_dict().items()})
        result.best_epoch, result.best_score, result.valid_per_graph = epoch, score, per_graph


def _save_checkpoint(run: _Run, result: FitResult, epoch: int, spec: ModelSpec, info: DistInfo, path: Path,
                     record: dict) -> None:
    """Every rank's random and GST state gathered; rank 0 writes the resumable checkpoint."""
    rngs = gather_objects(ckpt.rng_state(run.rng), info)
    gst_states = None if run.trainer is None else gather_objects(run.trainer.state_dict(), info)
    if info.is_main:
        ckpt.save_atomic({"epoch": epoch, "spec": spec.to_dict(), "model": run.core.state_dict(),
                          "optimizer": run.optimizer.state_dict(), "scheduler": run.scheduler.state_dict(),
                          "rng": rngs, "best_state": result.best_state, "best_epoch": result.best_epoch,
                          "best_score": result.best_score, "curve": result.curve,
                          "valid_per_graph": result.valid_per_graph, "gst": gst_states, "stopped": result.stopped,
                          "main_epochs": result.main_epochs, "plateau": result.plateau,
                          "ema": None if run.ema is None else run.ema.state_dict(), "record": record}, path)


def fit(model: nn.Module, spec: ModelSpec, train_graphs: list[PrunedGraph], valid_graphs: list[PrunedGraph],
        settings: TrainSettings, gst: GSTSettings | None, seed: int, checkpoint_path: Path, device: torch.device,
        info: DistInfo = DistInfo(), on_epoch: Callable[[dict], None] | None = None,
        max_epochs: int | None = None) -> FitResult:
    """Train `model` (already on `device`, DDP-wrapped when distributed) and select the best epoch on valid.

    The main phase runs until the validation metric plateaus (`settings.patience` epochs without a gain above
    `settings.min_delta`) or `settings.epochs` epochs have run; `FitResult.stopped` says which, `best_epoch` and
    `last_epoch` which epochs were selected and trained last.

    `gst`: Graph Segment Training (pipeline.graphnet.gst) instead of whole-graph steps; the model is then NOT wrapped
    in DDP (its segments are not one forward call) and gradients are averaged over ranks explicitly. A GST epoch
    visits every graph once per `segments_per_step` of its segments, so that, as in the pruned mode, it trains
    every node once. After the main phase, gst.finetune_epochs epochs (one visit per graph) train the prediction
    head only. Every rank's historical table and segment cycles are part of the checkpoint.

    With `settings.ema_epochs`, validation, selection (`best_state`) and hence early stopping see the moving
    average of the weights (pipeline/graphnet/ema.py), not the last step's.

    Writes the resumable checkpoint (rank 0) after every epoch; with settings.resume it continues from it.
    `max_epochs` stops early after that many epochs of this call (to simulate an interruption in tests).
    """
    if not train_graphs:
        raise ValueError("gnn: no train graphs in the pruned collection")
    run = _setup(model, spec, train_graphs, settings, gst, seed, device, info)
    result = FitResult(best_state=copy.deepcopy(run.core.state_dict()), best_epoch=-1, best_score=-math.inf)
    record = ckpt.resume_record(settings, gst, seed, [*train_graphs, *valid_graphs])
    state = ckpt.load_checkpoint(checkpoint_path) if settings.resume else None
    if state is not None:
        result = _resume(run, state, spec, info, checkpoint_path, record)
    plateau = Plateau(settings.patience, settings.min_delta)
    if result.plateau:
        plateau.load_state_dict(result.plateau)

    model.train()
    finetune_epochs = gst.finetune_epochs if gst else 0
    epoch, calls = run.start, 0
    while (result.stopped is None or epoch < result.main_epochs + finetune_epochs) and \
            (max_epochs is None or calls < max_epochs):
        tic = time.perf_counter()
        items = run.visits
        if result.stopped is not None:                                 # GST head fine-tuning: one visit per graph
            run.trainer.finetune, items = True, train_graphs
            freeze_to_head(run.core)
            run.scheduler.lr_lambdas[0].finetune = True
            _apply_schedule(run)
        losses, seen = _train_epoch(run, items, epoch, spec.kind, settings, seed, device, info)
        train_seconds = time.perf_counter() - tic
        averaged = nullcontext() if run.ema is None else run.ema.applied(run.core)
        with averaged:              # validated and selected: the averaged weights when gnn.ema_epochs is set
            per_graph = (validate(run.core, spec.kind, valid_graphs, settings, seed, device, info, run.segments)
                         if valid_graphs else {})
            score = float(np.mean(list(per_graph.values()))) if per_graph else float("nan")
            _select(result, run.core, epoch, score, per_graph)
        rank_stats = gather_objects((float(np.mean(losses)), seen), info)
        row = {"epoch": epoch, "loss": float(np.mean([s[0] for s in rank_stats])), "valid_score": score,
               "lr": float(run.scheduler.get_last_lr()[0])}
        timing = {"epoch": epoch, "train_seconds": train_seconds,
                  "configs_per_second": sum(s[1] for s in rank_stats) / max(train_seconds, 1e-9),
                  "seconds": time.perf_counter() - tic}
        result.curve.append(row)
        result.timing.append(timing)
        if result.stopped is None:
            result.stopped = stop_reason(plateau, score, epoch, settings.epochs)
            if run.scheduler.lr_lambdas[0].reduce(plateau, settings.lr_patience, settings.lr_decay):
                _apply_schedule(run)
            result.main_epochs, result.plateau = epoch + 1, plateau.state_dict()
        result.last_epoch = epoch
        _save_checkpoint(run, result, epoch, spec, info, checkpoint_path, record)
        if on_epoch is not None and info.is_main:
            on_epoch({**row, **timing, "best_epoch": result.best_epoch})
        epoch, calls = epoch + 1, calls + 1
    return result


def _apply_schedule(run: _Run) -> None:
    """Set the rate the schedule gives now (after a change of its phase or scale), effective from the next step."""
    schedule = run.scheduler.lr_lambdas[0]
    for group, base in zip(run.optimizer.param_groups, run.scheduler.base_lrs):
        group["lr"] = base * schedule(run.scheduler.last_epoch)
