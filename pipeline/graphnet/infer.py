"""Rank every configuration of a graph in memory-bounded batches, with test-time augmentation (TTA).

A score depends on the other configs of its batch (cross-config attention), so each TTA round shuffles the kept
configs, cuts them into near-equal batches of at most `infer_batch`, and the rounds are averaged. Scores are finally
expanded to the ORIGINAL config indices with `config_inverse` (duplicates share their kept row's score).
"""
from __future__ import annotations

import zlib
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch
from torch import nn

from pipeline.graphnet.data import GraphTensors, config_batch, graph_tensors
from pipeline.graphnet.gst import SegmentCache, segmented_scores
from pipeline.graphnet.segments import Segment
from pipeline.predictions import Predictions
from pipeline.pruned import PrunedGraph


@dataclass(frozen=True)
class InferSettings:
    """How configs are scored at inference (from the `gnn` group): batch size, TTA orderings, bf16 autocast."""

    infer_batch: int            # most configs per forward pass
    tta: int                    # random config orderings averaged
    amp: bool                   # bf16 autocast on CUDA



def autocast(device: torch.device, amp: bool):
    """bf16 autocast on CUDA when amp is on; nothing on CPU."""
    if amp and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return nullcontext()


def tta_batches(n: int, tta: int, infer_batch: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Batches of positions 0..n-1: `tta` random orderings, each cut into near-equal batches <= infer_batch.

    Every position appears exactly `tta` times (once per ordering). Near-equal batches avoid a tiny last batch,
    in which the configs would have few others to compare with.
    """
    n_batches = max(1, -(-n // infer_batch))
    batches = []
    for _ in range(tta):
        batches += np.array_split(rng.permutation(n), n_batches)
    return [b for b in batches if len(b)]


@torch.no_grad()
def predict_rows(model: nn.Module, kind: str, graph: PrunedGraph, tensors: GraphTensors | None, rows: np.ndarray,
                 settings: InferSettings, rng: np.random.Generator, device: torch.device,
                 segments: list[Segment] | None) -> np.ndarray:
    """Mean TTA score of the kept-config rows `rows` of one graph: float64 [len(rows)].

    `tensors` must already be on `device`; the model must be in eval mode. With `segments` (GST), the graph is
    scored segment by segment instead (`tensors` unused), exactly and with memory bounded by one segment.
    """
    rows, tta = np.asarray(rows, dtype=np.int64), settings.tta
    total = np.zeros(len(rows))
    seen = np.zeros(len(rows), dtype=np.int64)
    for batch in tta_batches(len(rows), tta, settings.infer_batch, rng):
        configs = config_batch(kind, graph, rows[batch]).to(device)
        with autocast(device, settings.amp):
            if segments is None:
                scores = model(tensors, configs)                  # [batch]
            else:
                scores = segmented_scores(model, segments, configs, graph.n_nodes)
        total[batch] += scores.float().cpu().numpy()
        seen[batch] += 1
    if np.any(seen != tta):
        raise RuntimeError(f"graph {graph.graph_id}: TTA scored some configs {seen.min()}..{seen.max()} times, not {tta}")
    return total / tta


def predict_graph(model: nn.Module, kind: str, graph: PrunedGraph, settings: InferSettings,
                  rng: np.random.Generator, device: torch.device, segments: SegmentCache | None) -> np.ndarray:
    """One score per ORIGINAL config index of the graph (float64 [configs]); lower = predicted faster.
    With `segments` (GST models), the graph is scored segment by segment."""
    parts = None if segments is None else segments.get(graph)
    tensors = graph_tensors(graph).to(device) if parts is None else None
    kept = predict_rows(model, kind, graph, tensors, np.arange(graph.n_kept), settings, rng, device, parts)
    inverse = np.asarray(graph.config_inverse, dtype=np.int64)
    if inverse.size and (inverse.min() < 0 or inverse.max() >= graph.n_kept):
        raise ValueError(f"pruned graph {graph.split}/{graph.graph_id}: config_inverse expected 0..{graph.n_kept - 1}, "
                         f"found {inverse.min()}..{inverse.max()}")
    return kept[inverse]


def predict_graphs(model: nn.Module, kind: str, graphs: Iterable[PrunedGraph], settings: InferSettings,
                   seed: int, device: torch.device, progress: bool, segments: SegmentCache | None) -> Predictions:
    """Predictions for every graph; a graph's TTA orderings come from rng (seed, crc32(graph_id)), so results are
    repeatable and do not depend on which other graphs (or which DDP rank) are involved."""
    from tqdm import tqdm

    was_training = model.training
    model.eval()
    preds = Predictions()
    graphs = list(graphs)
    for graph in tqdm(graphs, desc="predict", disable=not progress, leave=False):
        rng = np.random.default_rng([seed, zlib.crc32(graph.graph_id.encode())])
        preds[graph.graph_id] = predict_graph(model, kind, graph, settings, rng, device, segments)
    model.train(was_training)
    return preds
