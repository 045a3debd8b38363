"""Layout searches, templates and node features of the synthetic generator."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.hlo import opcodes as op
from pipeline.hlo.configs import SearchParams, block_specs, choose_config_nodes, sample_layout_configs
from pipeline.hlo.graph import HloBuilder
from pipeline.hlo.node_features import node_feat_matrix
from pipeline.templates.graphs import conv_net, transformer

SEARCH = SearchParams(default_block_prob=(0.3, 0.3), perturbed_nodes_mean=1.0, swap_prob=0.5,
                      duplicate_fraction=0.05)


@pytest.fixture(scope="module")
def conv_graph():
    return conv_net(np.random.default_rng(0), 300)[0]


def test_templates_use_their_architecture_ops(conv_graph):
    nlp = transformer(np.random.default_rng(0), 300)[0]
    conv_ops, nlp_ops = set(conv_graph.opcodes().tolist()), set(nlp.opcodes().tolist())
    assert {op.CONVOLUTION, op.REDUCE, op.MAXIMUM} <= conv_ops
    assert {op.DOT, op.GATHER, op.RSQRT, op.EXPONENTIAL, op.TRANSPOSE} <= nlp_ops
    assert op.CONVOLUTION not in nlp_ops


def test_random_search_samples_valid_permutations(conv_graph):
    ids = choose_config_nodes(conv_graph, 50, np.random.default_rng(0))
    specs = block_specs(conv_graph, ids)
    feat = sample_layout_configs(specs, 400, "random", SEARCH, 0.3, np.random.default_rng(1))
    assert feat.shape == (400, len(ids), 18)
    for k, spec in enumerate(specs):
        for block, rank, _ in spec.blocks:
            values = feat[:, k, 6 * block:6 * block + 6]
            explicit = values[(values != -1).any(axis=1)]
            assert (np.sort(explicit[:, :rank], axis=1) == np.arange(rank)).all()
            assert (explicit[:, rank:] == -1).all()
        if not any(b == 2 for b, _, _ in spec.blocks):
            assert (feat[:, k, 12:] == -1).all()        # kernel block only on convolutions
    default_share = (feat[:, :, :6] == -1).all(axis=2).mean()
    assert 0.2 < default_share < 0.45


def test_default_search_changes_few_blocks_and_has_duplicates(conv_graph):
    ids = choose_config_nodes(conv_graph, 50, np.random.default_rng(0))
    feat = sample_layout_configs(block_specs(conv_graph, ids), 300, "default", SEARCH, 0.3,
                                 np.random.default_rng(2))
    explicit_blocks = (feat.reshape(300, -1, 6) != -1).any(axis=2).sum(axis=1)   # [configs, NC*3] -> per config
    assert explicit_blocks.min() >= 1 and np.median(explicit_blocks) <= 3
    assert len(np.unique(feat.reshape(300, -1), axis=0)) < 300


def test_node_features_follow_the_column_table():
    b = HloBuilder("bf16")
    x = b.parameter((4, 8, 16))
    r = b.reduce(x, [2])
    graph = b.finish([r])
    feat = node_feat_matrix(graph)
    assert feat.shape == (len(graph), 140) and feat.dtype == np.float32
    param = feat[x]
    assert param[15] == 1                                      # bf16 one-hot
    assert param[21:29].tolist() == [4, 8, 16, 0, 0, 0, 28, 512]
    assert param[134:140].tolist() == [2, 1, 0, 0, 0, 0]       # row-major minor_to_major, zero padded
    assert param[44] == 1 and param[43] == 0                   # empty window: sum 0, product 1
    assert feat[r][31] == 2                                    # reduce dimensions
    assert feat[-1][0] == 1 and feat[-1][18] == 1              # root tuple


def test_near_default_rows_change_few_blocks_to_any_permutation(conv_graph):
    import dataclasses

    ids = choose_config_nodes(conv_graph, 50, np.random.default_rng(0))
    specs = block_specs(conv_graph, ids)
    plain = sample_layout_configs(specs, 400, "random", SEARCH, 0.0, np.random.default_rng(1))
    assert (plain != -1).any(axis=2).sum(axis=1).min() > 5            # random rows: many explicit blocks
    near = dataclasses.replace(SEARCH, near_default_share=0.5, duplicate_fraction=0.0)
    feat = sample_layout_configs(specs, 400, "random", near, 0.0, np.random.default_rng(1))
    changed = (feat.reshape(400, len(ids), 3, 6) != -1).any(axis=3).sum(axis=(1, 2))    # [C] explicit blocks
    assert (changed <= 10).sum() >= 200 and changed.min() >= 1           # half the rows: 1 + Poisson(1) blocks
    for k, spec in enumerate(specs):                                      # still valid permutations
        for block, rank, _ in spec.blocks:
            values = feat[:, k, 6 * block:6 * block + 6]
            explicit = values[(values != -1).any(axis=1)]
            assert (np.sort(explicit[:, :rank], axis=1) == np.arange(rank)).all()
    unchanged = sample_layout_configs(specs, 400, "random", dataclasses.replace(SEARCH, near_default_share=0.0),
                                      0.0, np.random.default_rng(1))
    assert np.array_equal(unchanged, plain)                               # share 0: the same rows, no draw
