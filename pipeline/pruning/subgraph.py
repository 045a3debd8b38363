"""k-hop subgraphs around the configurable nodes of a layout graph.

Contract (used by stage `prune`):
- Seeds are the configurable nodes (`node_config_ids`); they are always kept.
- Hop h adds every node joined to a node kept at hop h-1 by an edge in either direction (its producers and its
  consumers), so `hops=1` keeps the configurable nodes with their direct inputs and outputs, `hops=0` keeps the
  configurable nodes alone, and `hops=None` keeps the whole graph.
- The subgraph is induced: every original edge whose two endpoints are both kept survives, in its original order,
  re-indexed into the kept nodes. No edge is added.
- Kept nodes stay in ascending original order, so the topological order of the file is preserved;
  `node_ids[i]` is the original id of kept node i.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Subgraph:
    """A pruned graph's topology and the map back to the original node ids."""

    node_ids: np.ndarray         # [kept nodes] int64, ascending original node ids
    edge_index: np.ndarray       # [kept edges] x 2 int64, (consumer, producer) in kept-node indices
    edge_ids: np.ndarray         # [kept edges] int64, row of each kept edge in the original edge_index
    node_config_ids: np.ndarray  # [configurable nodes] int64, in kept-node indices (same order as the input)

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def n_edges(self) -> int:
        return len(self.edge_index)


def khop_mask(n_nodes: int, edge_index: np.ndarray, seeds: np.ndarray, hops: int | None) -> np.ndarray:
    """Boolean mask [n_nodes] of the nodes within `hops` undirected hops of any seed.

    Args:
        n_nodes: nodes in the graph.
        edge_index: [edges, 2] int, rows (consumer, producer), values in [0, n_nodes).
        seeds: node ids that start the search (always kept).
        hops: number of hops (>= 0), or None for every node.

    Returns:
        bool [n_nodes].
    """
    if hops is None:
        return np.ones(n_nodes, dtype=bool)
    keep = np.zeros(n_nodes, dtype=bool)
    keep[np.asarray(seeds, dtype=np.int64)] = True
    consumer, producer = edge_index[:, 0], edge_index[:, 1]
    for _ in range(hops):
        grown = keep.copy()
        grown[producer[keep[consumer]]] = True   # inputs of kept nodes
        grown[consumer[keep[producer]]] = True   # outputs of kept nodes
        if np.array_equal(grown, keep):           # the neighbourhood stopped growing
            break
        keep = grown
    return keep


def induced_subgraph(keep: np.ndarray, edge_index: np.ndarray, node_config_ids: np.ndarray | None = None) -> Subgraph:
    """Restrict a graph to the nodes in `keep` and re-index edges and configurable nodes.

    Args:
        keep: bool [n_nodes], the nodes to keep; every node of `node_config_ids` must be in it.
        edge_index: [edges, 2] int, rows (consumer, producer).
        node_config_ids: [configurable nodes] int original ids, or None (tile graphs).

    Returns:
        The Subgraph; `node_config_ids` is empty when None was given.
    """
    node_ids = np.flatnonzero(keep).astype(np.int64)
    old_to_new = np.full(len(keep), -1, dtype=np.int64)
    old_to_new[node_ids] = np.arange(len(node_ids), dtype=np.int64)
    edge_index = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)  # [edges, 2]
    edge_keep = keep[edge_index[:, 0]] & keep[edge_index[:, 1]]
    edge_ids = np.flatnonzero(edge_keep).astype(np.int64)
    new_edges = old_to_new[edge_index[edge_ids]]   # [kept edges, 2]
    config_ids = np.zeros(0, dtype=np.int64)
    if node_config_ids is not None:
        config_ids = old_to_new[np.asarray(node_config_ids, dtype=np.int64)]
        if np.any(config_ids < 0):
            raise ValueError("induced_subgraph: a configurable node is not in the kept set")
    return Subgraph(node_ids=node_ids, edge_index=new_edges.reshape(-1, 2), edge_ids=edge_ids,
                    node_config_ids=config_ids)


def khop_subgraph(n_nodes: int, edge_index: np.ndarray, node_config_ids: np.ndarray | None,
                  hops: int | None) -> Subgraph:
    """The configurable nodes' `hops`-hop neighbourhood; the whole graph when hops is None.

    Tile graphs have no configurable nodes: they pass `node_config_ids=None` and are kept whole.
    """
    if node_config_ids is None:
        keep = np.ones(n_nodes, dtype=bool)
    else:
        keep = khop_mask(n_nodes, edge_index, node_config_ids, hops)
    return induced_subgraph(keep, edge_index, node_config_ids)
