"""pipeline.graphnet.layout_inputs: effective layouts and mismatched (copy) edges, on a hand-built 4-node graph."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pipeline.graphnet.data import graph_tensors
from pipeline.graphnet.layout_inputs import (index_block_codes, effective_configs, hlo_layout_indices, log_elements,
                                             mismatch_features)
from pipeline.pruned import PrunedGraph


def raw_features(layouts: list[tuple[int, ...]], shape=(4, 8)) -> np.ndarray:
    """node_feat_raw [nodes, 140] with shape_dimensions (4, 8) and the given HLO layouts, -1 padded."""
    raw = np.full((len(layouts), 140), -1.0, np.float32)
    raw[:, 21:21 + len(shape)] = shape
    for i, layout in enumerate(layouts):
        raw[i, 134:134 + len(layout)] = layout
    return raw


def four_node_graph() -> PrunedGraph:
    """0 -> 1 <- 2, 1 -> 3; node 1 (a dot: operand 0 = node 0, operand 1 = node 2) is the only configurable node."""
    raw = raw_features([(1, 0), (1, 0), (0, 1), (1, 0)])
    feat = np.full((2, 1, 18), -1, np.int8)                   # config 0: all default
    feat[1, 0, 0:2] = (0, 1)                                  # config 1: output (0, 1) (HLO layout is (1, 0))
    feat[1, 0, 6:8] = (0, 1)                                  # input (0, 1): node 0 produces (1, 0) -> copy
    feat[1, 0, 12:14] = (0, 1)                                # kernel (0, 1) = node 2's own layout: no copy
    return PrunedGraph(graph_id="g", split="train", node_feat=np.zeros((4, 3), np.float32), node_feat_raw=raw,
                       node_opcode=np.zeros(4, np.int64), edge_index=np.array([(1, 0), (1, 2), (3, 1)], np.int64),
                       node_ids=np.arange(4), config_runtime=np.array([1.0, 2.0]), config_count=np.ones(2, np.int64),
                       config_inverse=np.arange(2), node_config_ids=np.array([1]), node_config_feat=feat)


def test_hlo_layouts_are_stored_plus_one_with_the_row_major_fallback():
    raw = raw_features([(1, 0), (0, 0), (0, 1)])
    raw[1, 134:140] = 0.0                                     # the original zero padding: not a permutation
    assert hlo_layout_indices(raw)[:, :3].tolist() == [[2, 1, 0], [2, 1, 0], [1, 2, 0]]


def test_log_elements():
    g = four_node_graph()
    assert log_elements(g.node_feat_raw) == pytest.approx([math.log1p(32)] * 4)


def test_effective_configs_replace_default_blocks():
    t = graph_tensors(four_node_graph())
    assert t.default_blocks[0, :, :2].tolist() == [[2, 1], [2, 1], [1, 2]]   # own, operand 0, operand 1 layouts
    configs = torch.full((1, 1, 18), 0, dtype=torch.int64)  # all -1
    eff, is_default = effective_configs(configs, t.default_blocks)
    assert is_default.tolist() == [[[True, True, True]]]
    assert eff[0, 0, :2].tolist() == [2, 1] and eff[0, 0, 12:14].tolist() == [1, 2]
    assert index_block_codes(torch.tensor([[0] * 6, [2, 1, 0, 0, 0, 0]])).tolist() == [0, 2 + 7]


def test_mismatch_features_by_hand():
    graph = four_node_graph()
    t = graph_tensors(graph)
    configs = torch.from_numpy(graph.node_config_feat.astype(np.int64) + 1)  # [2, 1, 18]
    eff, is_default = effective_configs(configs, t.default_blocks)
    m = mismatch_features(eff, is_default, t)                 # [2 configs, 4 nodes, 4]
    assert m[0].abs().sum() == 0                              # the default config needs no copy
    size = math.log1p(32)
    # copies: edge 0 -> 1 (input layout changed) and edge 1 -> 3 (node 1's output layout changed)
    assert m[1, :, 0].tolist() == [0, 1, 0, 1]                # mismatched in-edges per node
    assert m[1, :, 2].tolist() == [1, 1, 0, 0]                # mismatched out-edges per node
    assert m[1, :, 1].tolist() == pytest.approx([0, size, 0, size])
    assert m[1, :, 3].tolist() == pytest.approx([size, size, 0, 0])


def test_an_explicit_block_equal_to_the_recorded_layout_is_no_layout_change():
    """parameter 0 (recorded row-major 3210) -> conv 1 (recorded feature-minor 1320, configurable) -> negate 2.

    Configs: 0 all default; 1 conv output set explicitly to its recorded 1320; 2 output row-major 3210;
    3 input set to 1320 while the parameter produces 3210."""
    raw = raw_features([(3, 2, 1, 0), (1, 3, 2, 0), (1, 3, 2, 0)], shape=(8, 128, 16, 16))
    feat = np.full((4, 1, 18), -1, np.int8)
    feat[1, 0, 0:4], feat[2, 0, 0:4], feat[3, 0, 6:10] = (1, 3, 2, 0), (3, 2, 1, 0), (1, 3, 2, 0)
    graph = PrunedGraph(graph_id="g", split="train", node_feat=np.zeros((3, 3), np.float32), node_feat_raw=raw,
                        node_opcode=np.zeros(3, np.int64), edge_index=np.array([(1, 0), (2, 1)], np.int64),
                        node_ids=np.arange(3), config_runtime=np.arange(4.0), config_count=np.ones(4, np.int64),
                        config_inverse=np.arange(4), node_config_ids=np.array([1]), node_config_feat=feat)
    t = graph_tensors(graph)
    eff, is_default = effective_configs(torch.from_numpy(feat.astype(np.int64) + 1), t.default_blocks)
    assert torch.equal(eff[0], eff[1]) and is_default[:2, 0, 0].tolist() == [True, False]   # only the flag differs
    assert eff[0, 0, :4].tolist() == [2, 4, 3, 1]                               # 1320 stored +1
    m = mismatch_features(eff, is_default, t)                                  # [4 configs, 3 nodes, 4]
    assert m[0].abs().sum() == 0 and m[1].abs().sum() == 0                     # no false copy
    assert m[2, :, 0].tolist() == [0, 0, 1] and m[2, :, 2].tolist() == [0, 1, 0]   # negate reads a copy
    assert m[3, :, 0].tolist() == [0, 1, 0] and m[3, :, 2].tolist() == [1, 0, 0]   # conv reads a copy
