"""pipeline.gnn.data, plus the tiny hand-built PrunedGraphs the other GNN tests import (`make_layout_graph`, ...)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.gnn.data import (config_batch, graph_tensors, layout_config_batch, runtimes, sample_configs, shard,
                               tile_config_batch)
from pipeline.pruned import PrunedGraph

FEAT_DIM = 6


def make_layout_graph(graph_id: str = "g0", split: str = "train", n_nodes: int = 7, n_configs: int = 12,
                      seed: int = 0, duplicate_last: bool = False) -> PrunedGraph:
    """A random DAG whose runtime is a hand-written function of the layout of 2 configurable nodes.

    Node i consumes node i-1 (and i-2 when i is even). Configurable nodes are 1 and 4 (n_nodes - 1 when smaller). With duplicate_last the
    original file has one more config, a duplicate of config 0 (config_inverse maps it to kept row 0).
    """
    rng = np.random.default_rng(seed)
    edges = [(i, i - 1) for i in range(1, n_nodes)] + [(i, i - 2) for i in range(2, n_nodes, 2)]
    ids = np.array([1, min(4, n_nodes - 1)])
    feat = rng.integers(-1, 6, size=(n_configs, len(ids), 18)).astype(np.int8)  # [configs, config nodes, 18]
    runtime = 100.0 + 10 * feat[:, 0, 0] + 3 * feat[:, 1, 6] + feat[:, :, 12].sum(1)  # [configs]
    inverse = np.arange(n_configs + int(duplicate_last)) % n_configs
    return PrunedGraph(graph_id=graph_id, split=split,
                       node_feat=rng.normal(size=(n_nodes, FEAT_DIM)).astype(np.float32),
                       node_feat_raw=np.zeros((n_nodes, 140), np.float32),
                       node_opcode=rng.integers(0, 121, size=n_nodes).astype(np.int64),
                       edge_index=np.array(edges, np.int64), node_ids=np.arange(n_nodes),
                       config_runtime=runtime.astype(np.float64), config_count=np.ones(n_configs, np.int64),
                       config_inverse=inverse.astype(np.int64), node_config_ids=ids, node_config_feat=feat)


def make_tile_graph(graph_id: str = "t0", split: str = "train", n_nodes: int = 5, n_configs: int = 10,
                    seed: int = 0) -> PrunedGraph:
    """A chain tile graph; normalised runtime grows with output_bounds_0 and shrinks with output_bounds_1."""
    rng = np.random.default_rng(seed)
    config_feat = np.zeros((n_configs, 24), np.float32)
    config_feat[:, 8] = rng.integers(1, 64, n_configs)
    config_feat[:, 9] = rng.integers(1, 512, n_configs)
    runtime = config_feat[:, 8] / np.sqrt(config_feat[:, 9]) + 1.0
    return PrunedGraph(graph_id=graph_id, split=split,
                       node_feat=rng.normal(size=(n_nodes, FEAT_DIM)).astype(np.float32),
                       node_feat_raw=np.zeros((n_nodes, 140), np.float32),
                       node_opcode=rng.integers(0, 121, size=n_nodes).astype(np.int64),
                       edge_index=np.array([(i, i - 1) for i in range(1, n_nodes)], np.int64),
                       node_ids=np.arange(n_nodes), config_runtime=runtime.astype(np.float64),
                       config_count=np.ones(n_configs, np.int64), config_inverse=np.arange(n_configs),
                       config_feat=config_feat)


def test_graph_tensors_degrees_and_columns():
    g = make_layout_graph(n_nodes=5)  # edges (consumer, producer): 1-0 2-1 3-2 4-3 2-0 4-2
    t = graph_tensors(g)
    assert t.consumer.tolist() == [1, 2, 3, 4, 2, 4] and t.producer.tolist() == [0, 1, 2, 3, 0, 2]
    # producers per node: 0:0 1:1 2:2 3:1 4:2 -> 1/max(1, d)
    assert torch.allclose(t.inv_deg_consumer, torch.tensor([1, 1, 0.5, 1, 0.5]))
    # consumers per node: 0:2 1:1 2:2 3:1 4:0
    assert torch.allclose(t.inv_deg_producer, torch.tensor([0.5, 1, 0.5, 1, 1]))
    assert t.node_feat.shape == (5, FEAT_DIM) and t.node_config_ids.tolist() == [1, 4]


def test_operand_dims_output_input_kernel():
    g = make_layout_graph(n_nodes=5)  # configurable 1 and 4; node 4 consumes 3 then 2
    raw = np.zeros((5, 140), np.float32)
    raw[:, 21:27] = -1
    raw[:, 21] = [10, 11, 12, 13, 14]
    g.node_feat_raw = raw
    dims = graph_tensors(g).operand_dims                      # [2, 3, 6]
    assert dims[:, :, 0].tolist() == [[11, 10, 0], [14, 13, 12]]
    assert dims[:, :, 1:].abs().sum() == 0                    # -1 padding -> 0


def test_bad_inputs_name_the_graph():
    g = make_layout_graph()
    g.edge_index = np.array([[0, 99]])
    with pytest.raises(ValueError, match=r"train/g0.*edge_index"):
        graph_tensors(g)
    g = make_layout_graph()
    g.node_config_feat = g.node_config_feat.copy()
    g.node_config_feat[0, 0, 0] = 7
    with pytest.raises(ValueError, match=r"node_config_feat expected values -1..5, found .*7"):
        layout_config_batch(g, np.array([0, 1]))


def test_layout_batch_keeps_row_order_and_shifts_values():
    g = make_layout_graph()
    rows = np.array([5, 2, 9])
    batch = layout_config_batch(g, rows)
    assert batch.shape == (3, 2, 18) and batch.dtype == torch.int64
    assert np.array_equal(batch.numpy(), g.node_config_feat[rows].astype(np.int64) + 1)
    assert batch.min() >= 0 and batch.max() <= 6


def test_tile_batch_is_signed_log():
    g = make_tile_graph()
    batch = tile_config_batch(g, np.array([3]))
    assert batch.shape == (1, 24)
    assert batch[0, 8].item() == pytest.approx(np.log1p(g.config_feat[3, 8]))
    assert batch[0, 0].item() == 0.0
    assert config_batch("tile", g, np.array([0, 1])).shape == (2, 24)


def test_sampling_distinct_and_capped():
    g = make_layout_graph(n_configs=12)
    rng = np.random.default_rng(0)
    rows = sample_configs(g, 5, rng)
    assert len(rows) == 5 and len(set(rows.tolist())) == 5 and rows.max() < 12
    assert sorted(sample_configs(g, 50, rng).tolist()) == list(range(12))
    assert runtimes(g, rows).shape == (5,)


def test_shard_equal_and_covering():
    items = list("abcde")
    parts = [shard(items, r, 2, np.random.default_rng(1)) for r in range(2)]
    assert len(parts[0]) == len(parts[1]) == 3
    assert set(parts[0]) | set(parts[1]) == set(items)
