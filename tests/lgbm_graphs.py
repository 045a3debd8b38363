"""A tiny pruned layout collection shared by the LightGBM tests (lgbm_model/, test_lgbm.py): parameter -> dot ->
reshape -> dot graphs whose runtime grows with non-default blocks and copies, so a ranker can learn the rule."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.config import compose
from pipeline.pruned import PrunedGraph, collection_dir, graph_dir, save_pruned_graph, write_index
from pipeline.tpugraphs.dataset import Collection

SLUG = "layout-xla-random"
COLLECTION = Collection.parse(SLUG)
SPLIT_GRAPHS = {"train": 6, "valid": 2, "test": 2}
PERMS = [[-1] * 6, [1, 0, -1, -1, -1, -1], [0, 1, -1, -1, -1, -1]]


def random_layout_graph(graph_id: str, split: str, rng: np.random.Generator, n_configs: int = 60) -> PrunedGraph:
    """parameter -> dot -> reshape -> dot, rank 2 everywhere; runtime grows with non-default blocks and copies.

    Valid graphs get 10 extra original configs that duplicate kept rows (config_inverse is not the identity).
    """
    raw = np.full((4, 140), -1, dtype=np.float32)
    raw[:, 21:23] = [[64, 256], [256, 8], [16, 128], [128, 128]]
    raw[:, 134:136] = [1, 0]
    choice = rng.integers(0, len(PERMS), size=(n_configs, 3, 3))            # [configs, NC, tensors]
    node_config_feat = np.array(PERMS, dtype=np.int8)[choice].reshape(n_configs, 3, 18)  # [configs, NC, 18]
    copies = (choice[:, :-1, 0] != choice[:, 1:, 1]).sum(1)
    runtime = 10.0 + (choice > 0).sum((1, 2)) + 3.0 * copies + rng.random(n_configs)
    inverse = np.arange(n_configs)
    if split == "valid":
        inverse = np.concatenate([inverse, rng.integers(0, n_configs, size=10)])
    return PrunedGraph(
        graph_id=graph_id, split=split, node_feat=rng.normal(size=(4, 5)).astype(np.float32), node_feat_raw=raw,
        node_opcode=np.array([63, 34, 75, 34]), edge_index=np.array([[1, 0], [2, 1], [3, 2]]), node_ids=np.arange(4),
        config_runtime=runtime if split != "test" else np.zeros(n_configs), config_count=np.ones(n_configs, np.int64),
        config_inverse=inverse, node_config_ids=np.array([1, 2, 3]), node_config_feat=node_config_feat)


def write_pruned_collection(root: Path) -> Path:
    """Save SPLIT_GRAPHS random graphs per split and the index of collection SLUG under `root`; returns root."""
    rng = np.random.default_rng(0)
    rows = []
    for split, n in SPLIT_GRAPHS.items():
        for i in range(n):
            graph = random_layout_graph(f"{split}{i}", split, rng)
            save_pruned_graph(graph, graph_dir(root, SLUG, split, graph.graph_id))
            rows.append({"split": split, "graph_id": graph.graph_id, "source_file": f"{graph.graph_id}.npz",
                         "nodes": 4, "edges": 3, "nodes_pruned": 4, "edges_pruned": 3,
                         "configs": graph.n_configs, "configs_dedup": graph.n_kept})
    write_index(rows, collection_dir(root, SLUG) / "index.csv")
    return root


def lgbm_cfg(pruned_dir: Path):
    """A quick LightGBM configuration over the collection under `pruned_dir`."""
    return compose(["data=programs_ci", f"paths.pruned_dir={pruned_dir}", "lgbm.num_threads=1",
                    "lgbm.num_boost_round=30", "lgbm.max_query_rows=25", "lgbm.min_data_in_leaf=5"])
