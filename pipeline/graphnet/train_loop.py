"""The training loop: sampled configs per graph, ranking loss, AdamW + warm-up/cosine, clipping, bf16 on CUDA,
per-epoch validation (model selection by the collection metric) and an exactly resumable checkpoint.

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

from pipeline.scoring import metrics
from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.data import config_batch, graph_tensors, runtimes, sample_configs, shard
from pipeline.graphnet.distributed import DistInfo, average_gradients, gather_objects
from pipeline.graphnet.gst import GSTSettings, GSTTrainer, SegmentCache, freeze_to_head
from pipeline.graphnet.infer import autocast, predict_rows
from pipeline.graphnet.losses import ranking_loss
from pipeline.graphnet.model import ModelSpec
from pipeline.pruned import PrunedGraph


@dataclass
class FitResult:
    best_state: dict                      # weights of the selected epoch (CPU tensors)
    best_epoch: int
    best_score: float                     # valid metric of the selected epoch (NaN without valid graphs)
    curve: list[dict] = field(default_factory=list)   # one row per epoch: epoch, loss, valid_score, lr, ...
    valid_per_graph: dict = field(default_factory=dict)  # graph_id -> valid metric at the best epoch


def pick_device(name: str) -> torch.device:
    """gnn.device: auto (CUDA when present) | cpu | cuda."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda"):
        raise ValueError(f"gnn.device={name!r}; expected auto, cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("gnn.device=cuda but no CUDA device is available")
    return torch.device(name)


def warmup_cosine(total_steps: int, warmup_frac: float, after: float = 0.0) -> Callable[[int], float]:
    """LR factor per step: linear warm-up over warmup_frac of the steps, then cosine decay to 0; steps past
    `total_steps` (GST's head fine-tuning) get the constant factor `after`."""
    warmup = max(1, int(round(total_steps * warmup_frac)))

    def factor(step: int) -> float:
        if step >= total_steps:
            return after
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return factor


def valid_rows(graph: PrunedGraph, max_configs: int, seed: int) -> np.ndarray:
    """The fixed subset of kept configs scored for model selection (all of them when the graph has few)."""
    if graph.n_kept <= max_configs:
        return np.arange(graph.n_kept)
    rng = np.random.default_rng([seed, zlib.crc32(graph.graph_id.encode())])
    return np.sort(rng.choice(graph.n_kept, size=max_configs, replace=False))


def validate(model: nn.Module, kind: str, graphs: list[PrunedGraph], gnn, seed: int, device: torch.device,
             info: DistInfo, segments: SegmentCache | None = None) -> dict[str, float]:
    """Collection metric per valid graph (kept configs, one TTA ordering), graphs sharded over ranks."""
    model.eval()
    mine = {}
    for graph in graphs[info.rank::info.world]:
        rows = valid_rows(graph, int(gnn.valid_max_configs), seed)
        rng = np.random.default_rng([seed, zlib.crc32(graph.graph_id.encode())])
        tensors = graph_tensors(graph).to(device) if segments is None else None
        scores = predict_rows(model, kind, graph, tensors, rows, int(gnn.infer_batch), 1, rng, device, bool(gnn.amp),
                              None if segments is None else segments.get(graph))
        truth = np.asarray(graph.config_runtime[rows], dtype=np.float64)
        mine[graph.graph_id] = metrics.graph_score(kind, scores, truth)
    model.train()
    merged = {}
    for part in gather_objects(mine, info):
        merged.update(part)
    return merged


def train_step(model: nn.Module, kind: str, graphs: list[PrunedGraph], gnn, k: int, rng: np.random.Generator,
               device: torch.device, ddp: bool, cache: dict | None = None,
               gst: GSTTrainer | None = None) -> tuple[float, int]:
    """Forward/backward over a few graphs (gradients accumulated); returns (mean loss, configs seen).

    `cache` (graph_id -> GraphTensors on device) keeps the static tensors of graphs already seen.
    `gst` samples the configs and scores them segment-wise instead (Graph Segment Training).
    """
    total, seen = 0.0, 0
    cache = {} if cache is None else cache
    for i, graph in enumerate(graphs):
        rows = sample_configs(graph, k, rng) if gst is None else gst.sample(graph, k, rng)
        if gst is None and graph.graph_id not in cache:
            cache[graph.graph_id] = graph_tensors(graph).to(device)
        configs = config_batch(kind, graph, rows).to(device)
        target = runtimes(graph, rows).to(device)
        sync = nullcontext() if (not ddp or i == len(graphs) - 1) else model.no_sync()
        with sync:
            with autocast(device, bool(gnn.amp)):
                if gst is None:
                    scores = model(cache[graph.graph_id], configs)          # [configs]
                else:
                    scores = gst.scores(graph, rows, configs, rng)          # [configs]
            loss = ranking_loss(str(gnn.loss), scores.float(), target, float(gnn.margin),
                                float(gnn.get("min_gap", 0.0))) / len(graphs)
            loss.backward()
        total += float(loss.detach()) * len(graphs)
        seen += len(rows)
    return total / len(graphs), seen


def fit(model: nn.Module, spec: ModelSpec, kind: str, train_graphs: list[PrunedGraph],
        valid_graphs: list[PrunedGraph], gnn, configs_per_graph: int, seed: int, checkpoint_path: Path,
        device: torch.device, info: DistInfo = DistInfo(), on_epoch: Callable[[dict], None] | None = None,
        max_epochs: int | None = None, lr: float | None = None, gst: GSTSettings | None = None) -> FitResult:
    """Train `model` (already on `device`, DDP-wrapped when distributed) and select the best epoch on valid.

    `lr` is the peak learning rate (None: gnn.lr, which must then be a number).
    `gst`: Graph Segment Training (pipeline.graphnet.gst) instead of whole-graph steps; the model is then NOT wrapped
    in DDP (its segments are not one forward call) and gradients are averaged over ranks explicitly. A GST epoch
    visits every graph once per `segments_per_step` of its segments, so that, as in the pruned mode, it trains
    every node once. The last gst.finetune_epochs epochs (one visit per graph) train the prediction head only.
    Every rank's historical table and segment cycles are part of the checkpoint.

    Writes the resumable checkpoint (rank 0) after every epoch; with gnn.resume it continues from it.
    `max_epochs` stops early after that many epochs of this call (to simulate an interruption in tests).
    """
    if not train_graphs:
        raise ValueError("gnn: no train graphs in the pruned collection")
    core = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(gnn.lr if lr is None else lr),
                                  weight_decay=float(gnn.weight_decay))
    segments = None if gst is None else SegmentCache(gst, spec.layers + 1, device)
    trainer = None if gst is None else GSTTrainer(core, gst, segments)
    # an epoch trains every node once: in GST a graph is visited once per `segments_per_step` of its segments
    visits = train_graphs if gst is None else [g for g in train_graphs for _ in range(trainer.visits(g))]
    gps = max(1, int(gnn.graphs_per_step))

    def steps_for(items: list) -> int:
        if gnn.steps_per_epoch:
            return int(gnn.steps_per_epoch)
        per_rank = -(-len(items) // info.world)
        return max(1, -(-per_rank // gps))

    epochs = int(gnn.epochs)
    finetune_epochs, finetune_scale = (gst.finetune_epochs, gst.finetune_lr_scale) if gst else (0, 0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(epochs * steps_for(visits), float(gnn.warmup_frac), finetune_scale))
    rng = np.random.default_rng([seed, info.rank])
    torch.manual_seed(seed + info.rank)
    start, result = 0, FitResult(best_state=copy.deepcopy(core.state_dict()), best_epoch=-1, best_score=-math.inf)

    state = ckpt.load_checkpoint(checkpoint_path) if gnn.resume else None
    if state is not None:
        if state["spec"] != spec.to_dict() or len(state["rng"]) != info.world:
            raise ValueError(f"{checkpoint_path}: checkpoint was written for another model spec or world size; "
                             "delete it or run with gnn.resume=false")
        core.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        ckpt.restore_rng_state(state["rng"][info.rank], rng)
        start = state["epoch"] + 1
        result = FitResult(best_state=state["best_state"], best_epoch=state["best_epoch"],
                           best_score=state["best_score"], curve=state["curve"],
                           valid_per_graph=state["valid_per_graph"])
        if trainer is not None:
            trainer.load_state_dict(state["gst"][info.rank])

    model.train()
    cache: dict = {}
    total = epochs + finetune_epochs
    stop = total if max_epochs is None else min(total, start + max_epochs)
    for epoch in range(start, stop):
        tic = time.perf_counter()
        items = visits
        if trainer is not None and epoch >= epochs:      # head fine-tuning: one visit per graph
            trainer.finetune, items = True, train_graphs
            freeze_to_head(core)
        stream = shard(items, info.rank, info.world, np.random.default_rng([seed, epoch]))
        losses, seen = [], 0
        for step in range(steps_for(items)):
            batch = [stream[(step * gps + j) % len(stream)] for j in range(gps)]
            optimizer.zero_grad(set_to_none=True)
            loss, n = train_step(model, kind, batch, gnn, configs_per_graph, rng, device,
                                 info.enabled and gst is None, cache, trainer)
            if gst is not None:
                average_gradients(core, info)
            if gnn.grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), float(gnn.grad_clip))
            optimizer.step()
            scheduler.step()
            losses.append(loss)
            seen += n
        train_seconds = time.perf_counter() - tic
        per_graph = validate(core, kind, valid_graphs, gnn, seed, device, info, segments) if valid_graphs else {}
        score = float(np.mean(list(per_graph.values()))) if per_graph else float("nan")
        rank_stats = gather_objects((float(np.mean(losses)), seen), info)
        row = {"epoch": epoch, "loss": float(np.mean([s[0] for s in rank_stats])), "valid_score": score,
               "lr": float(scheduler.get_last_lr()[0]), "train_seconds": train_seconds,
               "configs_per_second": sum(s[1] for s in rank_stats) / max(train_seconds, 1e-9)}
        result.curve.append(row)
        if not per_graph or score > result.best_score:
            result.best_state = copy.deepcopy({k: v.detach().cpu() for k, v in core.state_dict().items()})
            result.best_epoch, result.best_score, result.valid_per_graph = epoch, score, per_graph
        rngs = gather_objects(ckpt.rng_state(rng), info)
        gst_states = None if trainer is None else gather_objects(trainer.state_dict(), info)
        if info.is_main:
            ckpt.save_atomic({"epoch": epoch, "spec": spec.to_dict(), "model": core.state_dict(),
                              "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                              "rng": rngs, "best_state": result.best_state, "best_epoch": result.best_epoch,
                              "best_score": result.best_score, "curve": result.curve,
                              "valid_per_graph": result.valid_per_graph,
                              "gst": gst_states}, checkpoint_path)
        if on_epoch is not None and info.is_main:
            on_epoch(row)
    return result
