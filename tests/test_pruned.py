"""pipeline.pruned: the per-collection index read back as the stages read it."""
from __future__ import annotations

import numpy as np

from pipeline.pruned import PrunedGraph, collection_dir, graph_dir, iter_split, read_index, save_pruned_graph, write_index

SLUG = "tile-xla"
NA_LIKE_IDS = ("NA", "None", "nan", "null", "0001")     # file stems pandas would read as missing, or as a number


def tiny_graph(graph_id: str) -> PrunedGraph:
    return PrunedGraph(graph_id=graph_id, split="train", node_feat=np.zeros((2, 3), np.float32),
                       node_feat_raw=np.zeros((2, 140), np.float32), node_opcode=np.array([1, 2]),
                       edge_index=np.array([[1, 0]]), node_ids=np.array([0, 1]), config_runtime=np.array([1.0]),
                       config_count=np.ones(1, np.int64), config_inverse=np.zeros(1, np.int64))


def test_graph_ids_that_look_missing_or_numeric_are_read_verbatim(tmp_path):
    rows = [{"split": "train", "graph_id": g, "source_file": f"tile/xla/train/{g}.npz", "nodes": 2, "edges": 1,
             "nodes_pruned": 2, "edges_pruned": 1, "configs": 1, "configs_dedup": 1} for g in NA_LIKE_IDS]
    write_index(rows, collection_dir(tmp_path, SLUG) / "index.csv")
    for graph_id in NA_LIKE_IDS:
        save_pruned_graph(tiny_graph(graph_id), graph_dir(tmp_path, SLUG, "train", graph_id))
    table = read_index(tmp_path, SLUG)
    assert sorted(table["graph_id"]) == sorted(NA_LIKE_IDS) and table["nodes"].dtype == np.int64
    assert sorted(g.graph_id for g in iter_split(tmp_path, SLUG, "train")) == sorted(NA_LIKE_IDS)
