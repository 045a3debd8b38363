"""Graph segments for Graph Segment Training (GST, `gnn.mode=gst`): node blocks and their exact halos.

A layout graph is cut into segments of at most `gst.segment_size` nodes: contiguous node-id blocks
(`gst.segmentation=contiguous`, near-equal sizes, as GST's `N // size + 1` parts), or the graph's own HLO computations
(`gst.segmentation=node_splits`: a segment starts at every `node_splits` boundary; computations larger than the limit
are cut into near-equal blocks and consecutive small ones are merged while they fit).

Each segment carries its halo: every node within `layers + 1` undirected hops of the segment's own nodes, with
the induced edges in their original order. An L-layer GNN's state at a node depends only on its L-hop
neighbourhood, and a node's inputs (its config embedding, operand sizes, mismatched-edge counts, degrees) only on
its direct edges, so running the model on segment + halo and keeping the own nodes' outputs gives exactly the
full-graph states of those nodes (up to float summation order). Segment outputs can therefore be combined into the
full-graph score, training can back-propagate through a few segments at a time, and inference is independent of
the segment size. (The GST paper drops the edges between segments instead, which makes every prediction depend
on where the cuts fall.)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from pipeline.choices import GST_SEGMENTATIONS
from pipeline.graphnet.data import GraphTensors, graph_tensors
from pipeline.pruned import PrunedGraph
from pipeline.pruning.subgraph import induced_subgraph, khop_mask

SEGMENTATIONS = GST_SEGMENTATIONS   # how a graph is cut into segments (gnn.gst.segmentation)


@dataclass
class Segment:
    """One segment of a graph, ready for the model."""

    index: int                      # position in the graph's segment list
    nodes: np.ndarray               # [own nodes] int64 graph node ids of the segment (ascending)
    graph: GraphTensors             # the segment's own nodes + halo, induced edges
    own: torch.Tensor               # [segment + halo nodes] bool, True for the segment's own nodes
    config_columns: torch.Tensor    # [configurable nodes in segment + halo] int64 columns of node_config_feat
    config_dependent: bool          # some configurable node lies in segment + halo (else one output for all)

    def to(self, device: torch.device | str) -> "Segment":
        """The segment with its tensors on `device` (moved once, not on every forward)."""
        return replace(self, graph=self.graph.to(device), own=self.own.to(device),
                       config_columns=self.config_columns.to(device))


def _near_equal(start: int, stop: int, size: int) -> list[int]:
    """Cut points strictly inside [start, stop) splitting it into ceil(len / size) near-equal blocks."""
    parts = -(-(stop - start) // size)
    return [int(round(x)) for x in np.linspace(start, stop, parts + 1)[1:-1]]


def segment_bounds(n_nodes: int, segment_size: int, segmentation: str,
                   node_splits: np.ndarray | None = None, node_ids: np.ndarray | None = None) -> np.ndarray:
    """Boundaries of the segments: int64 [segments + 1], 0 first, n_nodes last, every block <= segment_size.

    Args:
        n_nodes: nodes of the (pruned or whole) graph.
        segment_size: most nodes per segment (>= 1).
        segmentation: one of SEGMENTATIONS.
        node_splits: ORIGINAL node ids starting the HLO computations (`node_splits` of the npz), for `node_splits`.
        node_ids: [nodes] ascending original id of each graph node (pruned graphs), for `node_splits`.
    """
    if n_nodes == 0:
        return np.zeros(1, np.int64)
    if segmentation == "node_splits":
        if node_splits is None or node_ids is None:
            raise ValueError("gst.segmentation=node_splits needs the graph's node_splits and node_ids")
        # a computation starting at a pruned-away node starts at the next kept node
        starts = np.searchsorted(np.asarray(node_ids), np.asarray(node_splits, dtype=np.int64).ravel())
        pieces = np.unique(np.concatenate([[0, n_nodes], starts[(starts > 0) & (starts < n_nodes)]]))
        cuts = _merge_pieces(pieces, segment_size)
    else:
        cuts = _near_equal(0, n_nodes, segment_size)
    return np.asarray([0, *cuts, n_nodes], dtype=np.int64)


def _merge_pieces(pieces: np.ndarray, segment_size: int) -> list[int]:
    """Cut points from computation boundaries `pieces` (0 .. n): big pieces split, small neighbours merged."""
    blocks: list[tuple[int, int]] = []
    for start, stop in zip(pieces[:-1], pieces[1:]):
        points = [int(start), *_near_equal(int(start), int(stop), segment_size), int(stop)]
        blocks += list(zip(points[:-1], points[1:]))
    cuts, open_start = [], blocks[0][0]
    for start, stop in blocks:
        if stop - open_start > segment_size:        # the block does not fit into the open segment: close it
            cuts.append(start)
            open_start = start
    return cuts


def build_segments(graph: PrunedGraph, segment_size: int, halo_hops: int, segmentation: str) -> list[Segment]:
    """The segments of a layout graph with their halos (`halo_hops` = model layers + 1), in node order."""
    if graph.node_config_ids is None:
        raise ValueError(f"pruned graph {graph.split}/{graph.graph_id}: GST segments need a layout graph "
                         "(node_config_ids missing)")
    if segmentation == "node_splits" and graph.node_splits is None:
        raise ValueError(f"pruned graph {graph.split}/{graph.graph_id}: node_splits missing, so "
                         "gst.segmentation=node_splits cannot cut it; use gst.segmentation=contiguous")
    bounds = segment_bounds(graph.n_nodes, segment_size, segmentation, graph.node_splits, graph.node_ids)
    edges = np.asarray(graph.edge_index, dtype=np.int64).reshape(-1, 2)     # [edges, (consumer, producer)]
    config_ids = np.asarray(graph.node_config_ids, dtype=np.int64)
    segments = []
    for index, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:])):
        own_nodes = np.arange(start, stop, dtype=np.int64)
        keep = khop_mask(graph.n_nodes, edges, own_nodes, halo_hops)       # [nodes] segment + halo
        columns = np.flatnonzero(keep[config_ids])                           # configurable nodes inside
        sub = induced_subgraph(keep, edges, config_ids[columns])
        view = PrunedGraph(graph_id=f"{graph.graph_id}#segment{index}", split=graph.split,
                           node_feat=np.asarray(graph.node_feat[sub.node_ids]),
                           node_feat_raw=np.asarray(graph.node_feat_raw[sub.node_ids]),
                           node_opcode=np.asarray(graph.node_opcode[sub.node_ids]), edge_index=sub.edge_index,
                           node_ids=sub.node_ids, config_runtime=np.zeros(0), config_count=np.zeros(0, np.int64),
                           config_inverse=np.zeros(0, np.int64), node_config_ids=sub.node_config_ids)
        own = torch.from_numpy((sub.node_ids >= start) & (sub.node_ids < stop))
        segments.append(Segment(index=index, nodes=own_nodes, graph=graph_tensors(view), own=own,
                                config_columns=torch.from_numpy(columns), config_dependent=bool(len(columns))))
    return segments


def segment_configs(configs: torch.Tensor, segment: Segment) -> torch.Tensor:
    """The columns of a config batch [configs, configurable nodes, 18] that a segment sees:
    [configs, configurable nodes in segment + halo, 18] (one config when the segment does not depend on it)."""
    if not segment.config_dependent:
        configs = configs[:1]
    return configs.index_select(1, segment.config_columns.to(configs.device))
