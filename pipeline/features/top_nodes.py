"""Feature group `layout_top_nodes`: the layout chosen for each of the k largest configurable nodes of a graph.

The other layout groups sum over nodes, which loses which node got which layout. Here slot j holds the j-th largest
configurable node (by elements of its output tensor, ties by node id), the same slot in every graph, so trees
can split on "the largest node's output layout" directly. Per slot: the log2 elements and the kind (index into
`NODE_KINDS`) of the node, its 18 `node_config_feat` values as they are (output, input, kernel blocks; -1 padded),
and, under its effective output layout (a default block means the node's HLO layout), the log2 sizes of its two most
minor dims and the padded/raw element ratio of TPU (8, 128) tiles. Graphs with fewer configurable nodes than slots
leave the remaining slots NaN (LightGBM's missing value).
"""
from __future__ import annotations

import numpy as np

from pipeline.tpugraphs.schema import LAYOUT_BLOCKS, MAX_DIMS

SLOT_FIELDS = ("log2_elements", "kind",
               *(f"{tensor}_{d}" for tensor in LAYOUT_BLOCKS for d in range(MAX_DIMS)),
               "minor0_log2", "minor1_log2", "pad_ratio")
MINOR0_LOG2, MINOR1_LOG2, PADDED = 0, 1, 8     # columns of `LayoutContext.minor_table` (features.layout)


def top_node_names(top_nodes: int) -> list[str]:
    """Column names of `top_node_features` for `top_nodes` slots, slot by slot."""
    return [f"top{j}_{field}" for j in range(top_nodes) for field in SLOT_FIELDS]


def largest_nodes(shape: np.ndarray, node_ids: np.ndarray, top_nodes: int) -> np.ndarray:
    """int64 [min(top_nodes, NC)]: configurable node positions k by decreasing elements, ties by increasing node id.

    The tie-break uses the ids, not the positions, so the slots do not depend on the order in which the file
    stores `node_config_ids` (the format allows any order).

    Args:
        shape: float64 [NC, 6] output dim sizes of the configurable nodes (-1 past the rank).
        node_ids: int [NC] the graph's node_config_ids (distinct), in the same order as `shape`.
        top_nodes: slots.
    """
    elements = np.where(shape > 0, shape, 1.0).prod(axis=1)                  # [NC]
    return np.lexsort((np.asarray(node_ids), -elements))[:top_nodes]


def top_node_features(shape: np.ndarray, node_ids: np.ndarray, kind: np.ndarray, minor_table: np.ndarray,
                      blocks: np.ndarray, slot0: np.ndarray, slot1: np.ndarray, top_nodes: int) -> np.ndarray:
    """float32 [configs, len(top_node_names(top_nodes))] for one chunk of configurations.

    Args:
        shape: float64 [NC, 6] output dim sizes of the configurable nodes (-1 past the rank).
        node_ids: int [NC] their node ids (node_config_ids), which break ties among equally large nodes.
        kind: [NC] node kind index.
        minor_table: float64 [NC, 7, 7, 9] minor-dim statistics per (most-minor dim + 1, second-minor dim + 1).
        blocks: int8 [configs, NC, 3, 6] the chunk's node_config_feat.
        slot0, slot1: int64 [configs, NC] most-minor and second-minor dim of the effective output layout (-1: none).
        top_nodes: slots.
    """
    n_configs = blocks.shape[0]
    nodes = largest_nodes(shape, node_ids, top_nodes)                        # [S]
    n_slots = len(nodes)
    elements = np.where(shape[nodes] > 0, shape[nodes], 1.0).prod(axis=1)    # [S]
    constant = np.broadcast_to(np.stack([np.log2(elements), kind[nodes]], 1)[None], (n_configs, n_slots, 2))
    values = blocks[:, nodes].reshape(n_configs, n_slots, len(LAYOUT_BLOCKS) * MAX_DIMS)   # [configs, S, 18]
    stats = minor_table[nodes[None, :], slot0[:, nodes] + 1, slot1[:, nodes] + 1]  # [configs, S, 9]
    minor = np.stack([stats[..., MINOR0_LOG2], stats[..., MINOR1_LOG2], stats[..., PADDED] / elements], -1)
    filled = np.concatenate([constant, values, minor], axis=2)               # [configs, S, fields]
    out = np.full((n_configs, top_nodes, len(SLOT_FIELDS)), np.nan)
    out[:, :n_slots] = filled
    return out.reshape(n_configs, -1).astype(np.float32)                     # [configs, top_nodes * fields]
