"""pipeline.graphnet.data: graph tensors, config batches, sampling and sharding."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.graphnet.data import (config_batch, graph_tensors, layout_config_batch, runtimes, sample_configs, shard,
                               tile_config_batch)
from pipeline.tpugraphs.schema import CONVOLUTION_OPCODE, DOT_OPCODE
from pipeline.tpugraphs.tiles import TILE_INPUT_DIM, tile_inputs
from pruned_graphs import FEAT_DIM, make_layout_graph, make_tile_graph

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


def test_operand_roles_mark_a_convolutions_feature_and_batch_dims():
    g = make_layout_graph(n_nodes=5)  # configurable 1 and 4
    g.node_opcode = np.array([0, CONVOLUTION_OPCODE, 0, 0, DOT_OPCODE])
    raw = np.zeros((5, 140), np.float32)
    # node 1, an NHWC convolution with an HWIO kernel: input batch 0 / feature 3, kernel input feature 2 / output
    # feature 3, output batch 0 / feature 3; node 4 (a dot) carries numbers too, which mean nothing for a dot
    raw[1, 93:95], raw[1, 99:101], raw[1, 105:107] = [0, 3], [2, 3], [0, 3]
    raw[4, 93:95] = [1, 2]
    g.node_feat_raw = raw
    roles = graph_tensors(g).operand_roles                    # [2, 3, 6, 2]
    assert roles.shape == (2, 3, 6, 2)
    # blocks output, input, kernel: (feature dim, batch dim) of node 1
    assert [roles[0, b, :, 0].argmax().item() for b in range(3)] == [3, 3, 2]
    assert [roles[0, b, :, 1].argmax().item() for b in range(3)] == [0, 0, 3]
    assert roles[0].sum().item() == 6 and roles[1].abs().sum().item() == 0


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


def test_tile_batch_is_signed_log_then_the_tile_inputs():
    g = make_tile_graph()
    g.node_feat_raw = np.full((g.n_nodes, 140), -1, np.float32)
    g.node_feat_raw[-1, 21:23] = [64, 1024]                  # the output (last node): 64 x 1024
    batch = tile_config_batch(g, np.array([3]))
    assert batch.shape == (1, 24 + TILE_INPUT_DIM)
    assert batch[0, 8].item() == pytest.approx(np.log1p(g.config_feat[3, 8]))
    assert batch[0, 0].item() == 0.0
    shape = np.array([64, 1024, -1, -1, -1, -1])
    assert np.allclose(batch[0, 24:].numpy(), tile_inputs(shape, g.config_feat[[3]]))
    assert config_batch("tile", g, np.array([0, 1])).shape == (2, 24 + TILE_INPUT_DIM)


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
