"""Graph Segment Training (GST, arXiv 2305.12322) for layout graphs: `gnn.mode=gst`.

A visit of a training graph draws configs as in the pruned mode, but keeps them for a cycle: the graph's segments
(pipeline.graphnet.segments) are trained in a random order, `gst.segments_per_step` per visit, all with the same config
batch (`SegmentCycles`). In a visit, the chosen segments run with autograd; every other segment's summary comes
from the historical table (pipeline.graphnet.history). The first visit of a cycle initialises the entries of the new
batch under no_grad; after that an entry changes only when its segment is trained (its summary is pushed), so a
cycle costs one no_grad pass over the graph plus one forward/backward per segment, and memory holds the autograd
graph of `segments_per_step` segments only.

Stale-embedding dropout drops each historical segment summary with probability `gst.stale_dropout`, one draw per
segment shared by the batch's configs (the paper draws per config; but configs are compared with each other, and
dropping a segment for some configs only adds its whole contribution as noise to their differences, the reason
for `layers.SharedDropout` too). The trained segments' additive parts are scaled by 1 + p * stale / trained (the
paper's `(num_parts - 1) / 2 + 1` for p = 0.5 and one trained segment), so that in expectation as many segments
are summed as the graph has. Segment summaries combine (sums add, maxima take the max) into the graph summary,
which the prediction head (`LayoutModel.readout`) turns into one score per config.

`gst.finetune_epochs` end the training: every segment is computed fresh (no_grad, no dropout) and only the
prediction head (config attention + pooled head) learns, removing the staleness the head saw during GST.
Inference (`segmented_scores`) runs the segments one after another and combines them exactly, so its memory is
bounded by one segment (+ halo) and its output does not depend on the segment size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from pipeline.graphnet.data import sample_configs
from pipeline.graphnet.history import HistoricalTable
from pipeline.graphnet.segments import SEGMENTATIONS, Segment, build_segments, segment_configs
from pipeline.pruned import PrunedGraph


@dataclass(frozen=True)
class GSTSettings:
    """The `gnn.gst` config group (`pipeline.settings.gnn.gst_settings`: None unless gnn.mode=gst on layout
    graphs; the schema refuses gnn.norm=instance there, which normalises over nodes a segment does not see)."""

    segment_size: int           # most nodes per segment
    segmentation: str           # one of SEGMENTATIONS: contiguous | node_splits
    segments_per_step: int      # segments back-propagated per graph per step
    stale_dropout: float        # probability of dropping a historical segment summary (per step, shared by configs)
    finetune_epochs: int        # prediction-head-only epochs at the end
    finetune_lr_scale: float    # their learning rate, as a fraction of the peak learning rate


class SegmentCache:
    """Segments of a graph (static tensors on the device), built on first use and kept for the graphs seen so far
    (`keep=False`: built anew each time, for one pass over many graphs at inference)."""

    def __init__(self, settings: GSTSettings, halo_hops: int, device: torch.device, keep: bool = True):
        self.settings, self.halo_hops, self.device, self.keep = settings, halo_hops, device, keep
        self._segments: dict[tuple[str, str], list[Segment]] = {}

    def get(self, graph: PrunedGraph) -> list[Segment]:
        key = (graph.split, graph.graph_id)
        if key not in self._segments:
            segments = [s.to(self.device) for s in
                        build_segments(graph, self.settings.segment_size, self.halo_hops, self.settings.segmentation)]
            if not self.keep:
                return segments
            self._segments[key] = segments
        return self._segments[key]


def summarize_segment(model: nn.Module, segment: Segment, configs: torch.Tensor) -> torch.Tensor:
    """One segment's summary for a config batch: [configs, summary_dim] (expanded when config-independent)."""
    out = model.segment_summary(segment.graph, segment_configs(configs, segment), segment.own.to(configs.device))
    return out.expand(configs.shape[0], -1)


def combine(trained: list[torch.Tensor], stale: list[torch.Tensor], hidden: int, keep: np.ndarray | None = None,
            scale: float = 1.0) -> torch.Tensor:
    """The graph summary [configs, 1 + 2 * hidden] from segment summaries.

    trained: summaries with autograd; their sums are multiplied by `scale`.
    stale: historical summaries; keep: bool [len(stale), configs], False = dropped (None: all kept).
    """
    parts = [(s, None, scale) for s in trained]
    parts += [(s, None if keep is None else torch.from_numpy(keep[i]).to(s.device), 1.0) for i, s in enumerate(stale)]
    sums, maxima = [], []
    for summary, mask, factor in parts:                                 # float32: bf16 (autocast) sums lose ranks
        additive, x_max = summary.float().split([1 + hidden, hidden], dim=-1)   # [configs, 1 + hidden], [.., hidden]
        if mask is not None:
            additive = additive * mask[:, None].to(additive.dtype)
            x_max = x_max.masked_fill(~mask[:, None], float("-inf"))
        sums.append(additive * factor)
        maxima.append(x_max)
    return torch.cat([torch.stack(sums).sum(dim=0), torch.stack(maxima).amax(dim=0)], dim=-1)


def trained_scale(stale_dropout: float, n_stale: int, n_trained: int) -> float:
    """Factor on the trained segments' sums so that, in expectation, as many segments are summed as the graph has:
    n_trained * scale + (1 - p) * n_stale = n_trained + n_stale."""
    return 1.0 + stale_dropout * n_stale / n_trained


def segmented_scores(model: nn.Module, segments: list[Segment], configs: torch.Tensor, n_nodes: int) -> torch.Tensor:
    """Exact full-graph scores [configs], computed one segment at a time (summaries under no_grad; the head keeps
    its autograd graph when grad is enabled, which the fine-tuning uses)."""
    with torch.no_grad():
        summaries = [summarize_segment(model, segment, configs) for segment in segments]
    return model.readout(combine(summaries, [], model.spec.hidden), n_nodes)


def gst_scores(model: nn.Module, graph: PrunedGraph, segments: list[Segment], table: HistoricalTable,
               rows: np.ndarray, configs: torch.Tensor, settings: GSTSettings, rng: np.random.Generator,
               trained: Sequence[int]) -> torch.Tensor:
    """Training scores [configs] of config `rows` (batch `configs`): segments `trained` with autograd, the others
    from the table (computed under no_grad and stored when the table does not hold this batch yet), stale-dropout
    applied; the trained segments' summaries are then pushed into the table."""
    hidden, n_configs = model.spec.hidden, configs.shape[0]
    chosen = {int(i) for i in trained}
    fresh_grad, stale = [], []
    for segment in segments:
        if segment.index in chosen:
            fresh_grad.append(summarize_segment(model, segment, configs))
            continue
        key_rows = rows if segment.config_dependent else None
        values = table.pull(graph.graph_id, segment.index, key_rows)
        if values is None:                   # first visit of a cycle: the table is initialised, never refreshed
            with torch.no_grad():
                values = summarize_segment(model, segment, configs)
            table.push(graph.graph_id, segment.index, key_rows, values)
        stale.append(values.to(configs.device).float().expand(n_configs, -1))
    p = settings.stale_dropout
    keep = None
    if p > 0 and stale:   # one draw per segment, shared by the configs (per-config drops would swamp their differences)
        keep = np.repeat(rng.random((len(stale), 1)) >= p, n_configs, axis=1)     # [stale segments, configs]
    scale = trained_scale(p, len(stale), len(fresh_grad))
    scores = model.readout(combine(fresh_grad, stale, hidden, keep, scale), graph.n_nodes)
    for segment, summary in zip((s for s in segments if s.index in chosen), fresh_grad):
        table.push(graph.graph_id, segment.index, rows if segment.config_dependent else None, summary)
    return scores


class SegmentCycles:
    """Per graph, the config batch and the random order in which its segments are trained with it.

    A graph keeps its sampled config rows until every one of its segments has been trained with them
    (`segments_per_step` per visit), so each visit finds the segments trained earlier in the cycle in the table.
    """

    def __init__(self) -> None:
        self._state: dict[str, dict] = {}

    def next(self, graph_id: str, n_segments: int, per_step: int, sample: Callable[[], np.ndarray],
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(config rows, segment indices to train) for this visit of the graph."""
        state = self._state.get(graph_id)
        if state is None or state["position"] >= n_segments:
            state = {"rows": sample(), "order": rng.permutation(n_segments), "position": 0}
            self._state[graph_id] = state
        trained = state["order"][state["position"]:state["position"] + per_step]
        state["position"] += per_step
        return state["rows"], trained

    def state_dict(self) -> dict:
        return {g: dict(s) for g, s in self._state.items()}

    def load_state_dict(self, state: dict) -> None:
        self._state = {g: dict(s) for g, s in state.items()}


def freeze_to_head(model: nn.Module) -> list[nn.Parameter]:
    """Fine-tuning: only the prediction head keeps requires_grad; returns the head parameters."""
    head = {id(p) for p in model.head_parameters()}
    for p in model.parameters():
        p.requires_grad_(id(p) in head)
    return [p for p in model.parameters() if p.requires_grad]


@dataclass(frozen=True)
class GSTVisit:
    """One visit of a training graph: the config rows to score and the segments trained with autograd
    (None while fine-tuning the head: every segment is then computed fresh under no_grad)."""

    rows: np.ndarray
    trained: np.ndarray | None


class GSTTrainer:
    """What the training loop needs in GST mode: config sampling by segment cycles, scores, checkpoint state.

    `sample` returns a `GSTVisit` that `scores` takes back, so nothing is carried between the two calls. With
    `finetune` set (the last gst.finetune_epochs epochs), configs are sampled afresh on every visit and scores come
    from every segment computed fresh (no_grad), so only the head (`freeze_to_head`) learns.
    """

    def __init__(self, model: nn.Module, settings: GSTSettings, segments: SegmentCache):
        self.model, self.settings, self.segments = model, settings, segments
        self.table, self.cycles = HistoricalTable(), SegmentCycles()
        self.finetune = False

    def visits(self, graph: PrunedGraph) -> int:
        """Visits that train every segment of the graph once (one cycle)."""
        return -(-len(self.segments.get(graph)) // self.settings.segments_per_step)

    def sample(self, graph: PrunedGraph, k: int, rng: np.random.Generator) -> GSTVisit:
        """The config rows (k of them) and the segments to train in this visit of `graph`."""
        if self.finetune:
            return GSTVisit(rows=sample_configs(graph, k, rng), trained=None)
        rows, trained = self.cycles.next(graph.graph_id, len(self.segments.get(graph)),
                                         self.settings.segments_per_step, lambda: sample_configs(graph, k, rng), rng)
        return GSTVisit(rows=rows, trained=trained)

    def scores(self, graph: PrunedGraph, visit: GSTVisit, configs: torch.Tensor,
               rng: np.random.Generator) -> torch.Tensor:
        """Training scores [configs] of the visit's config batch `configs`."""
        segments = self.segments.get(graph)
        if visit.trained is None:
            return segmented_scores(self.model, segments, configs, graph.n_nodes)
        return gst_scores(self.model, graph, segments, self.table, visit.rows, configs, self.settings, rng,
                          visit.trained)

    def state_dict(self) -> dict:
        return {"table": self.table.state_dict(), "cycles": self.cycles.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.table.load_state_dict(state["table"])
        self.cycles.load_state_dict(state["cycles"])

