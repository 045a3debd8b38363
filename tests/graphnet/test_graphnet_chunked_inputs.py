"""The node-major config inputs of the chunked CPU path equal the config encoder's own (`config_parts`, `forward`)
within float rounding, and the mismatch features from the config-dependent edges equal `mismatch_features`."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from pruned_graphs import layout_model, long_graph, make_layout_graph

from pipeline.graphnet.chunked_inputs import ConfigInputs, MismatchEdges, repeat_configs, sparse_csr
from pipeline.graphnet.data import graph_tensors, layout_config_batch
from pipeline.graphnet.layout_inputs import effective_configs, mismatch_features
from pipeline.tpugraphs import layouts
from pipeline.tpugraphs.schema import CONVOLUTION_OPCODE


def test_sparse_csr_adds_repeated_entries():
    matrix = sparse_csr(torch.tensor([0, 1, 1]), torch.tensor([2, 0, 0]), torch.tensor([1.0, 2.0, 3.0]), (2, 3))
    assert matrix.to_dense().tolist() == [[0, 0, 1], [5, 0, 0]]


def _codes(configs: torch.Tensor, graph) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes of the effective blocks and default flags, [configs, configurable * 3]."""
    effective, is_default = effective_configs(configs, graph.default_blocks)     # [configs, configurable, 18]
    blocks = effective.reshape(configs.shape[0], -1, 6)                          # [configs, configurable * 3, 6]
    codes = (blocks * torch.as_tensor(layouts.BLOCK_CODE_WEIGHTS)).sum(-1)
    return codes, is_default.reshape(configs.shape[0], -1)


@pytest.mark.parametrize("make", [lambda: long_graph(n_nodes=40, n_configs=10),
                                  lambda: make_layout_graph(n_configs=10)])
def test_mismatch_edges_equal_mismatch_features(make):
    graph = make()
    g = graph_tensors(graph)
    configs = layout_config_batch(graph, np.arange(10))
    effective, is_default = effective_configs(configs, g.default_blocks)
    expected = mismatch_features(effective, is_default, g)                      # [configs, nodes, 4]
    edges = MismatchEdges(g)
    fast = edges.features(edges.mismatched(*(t.t() for t in _codes(configs, g))))   # [nodes, configs, 4]
    assert expected[..., 0].sum() > 0                                            # some edges do mismatch
    torch.testing.assert_close(fast.transpose(0, 1), expected, rtol=1e-6, atol=1e-6)
    assert torch.equal(fast.transpose(0, 1)[..., ::2], expected[..., ::2])       # counts exactly


def test_mismatch_edges_keep_only_config_dependent_edges():
    # make_layout_graph(7): node i consumes i-1 (operand 0), even i also i-2 (operand 1); nodes 1 and 4 are
    # configurable. Kept: edges fed into 1's / 4's input and kernel blocks (1<-0, 4<-3, 4<-2) and edges leaving 1
    # or 4 (2<-1, 5<-4, 6<-4); 3<-2, 6<-5 and 2<-0 read an unconfigurable producer as the HLO layout: never a copy.
    n = 7
    sums = MismatchEdges(graph_tensors(make_layout_graph(n_nodes=n))).sums.to_dense()   # [4 x nodes, kept edges]
    consumers, producers = sums[:n].argmax(dim=0), sums[2 * n:3 * n].argmax(dim=0)
    assert sorted(zip(consumers.tolist(), producers.tolist())) == [(1, 0), (2, 1), (4, 2), (4, 3), (5, 4), (6, 4)]
    assert sums[:n].sum().item() == sums[2 * n:3 * n].sum().item() == 6          # each kept edge counted once


@pytest.mark.parametrize("effective,mismatch", [(True, True), (False, False), (True, False), (False, True)])
def test_config_inputs_equal_the_encoders_config_parts(effective, mismatch):
    """The embedding_bag form of the config encoder (ConfigInputs) against the encoder itself, node-major."""
    graph = long_graph(n_nodes=40, n_configs=10)
    encoder = layout_model(effective_layout=effective, edge_mismatch=mismatch).eval().configs
    g = graph_tensors(graph)
    configs = layout_config_batch(graph, np.arange(10))
    with torch.no_grad():
        delta, copies = encoder.config_parts(g, configs, torch.float32)       # [configs, configurable, hidden]
        fast_delta, fast_copies = ConfigInputs(encoder, g, configs).parts(slice(2, 9), torch.float32)
    assert delta.abs().max() > 1.0
    torch.testing.assert_close(fast_delta.transpose(0, 1), delta[2:9], rtol=1e-5, atol=1e-5 * float(delta.abs().max()))
    assert (copies is None) == (fast_copies is None) == (not mismatch)
    if mismatch:
        torch.testing.assert_close(fast_copies.transpose(0, 1), copies[2:9], rtol=1e-6, atol=1e-6)


def conv_graph():
    """long_graph with its configurable nodes as convolutions whose dimension numbers differ node by node."""
    graph = long_graph(n_nodes=40, n_configs=10)
    ids = graph.node_config_ids
    graph.node_opcode = graph.node_opcode.copy()
    graph.node_opcode[ids] = CONVOLUTION_OPCODE
    graph.node_feat_raw = graph.node_feat_raw.copy()
    for column in (93, 94, 99, 100, 105, 106):
        graph.node_feat_raw[ids, column] = np.arange(len(ids)) % 3 + column % 2
    return graph


@pytest.mark.parametrize("effective", [True, False])
def test_config_inputs_with_roles_equal_the_encoder(effective):
    graph = conv_graph()
    encoder = layout_model(effective_layout=effective, edge_mismatch=False, layout_roles=True).eval().configs
    g = graph_tensors(graph)
    assert g.operand_roles.sum() > 0
    configs = layout_config_batch(graph, np.arange(10))
    with torch.no_grad():
        delta, _ = encoder.config_parts(g, configs, torch.float32)            # [configs, configurable, hidden]
        fast_delta, _ = ConfigInputs(encoder, g, configs).parts(slice(None), torch.float32)
        blind = layout_model(effective_layout=effective, edge_mismatch=False, layout_roles=True).eval().configs
        g.operand_roles = torch.zeros_like(g.operand_roles)
        without, _ = blind.config_parts(g, configs, torch.float32)
    torch.testing.assert_close(fast_delta.transpose(0, 1), delta, rtol=1e-5, atol=1e-5 * float(delta.abs().max()))
    assert (delta - without).abs().max() > 1e-3                              # the roles do reach the encoder


@pytest.mark.parametrize("roles", [True, False])
def test_config_inputs_with_padding_equal_the_encoder(roles):
    graph = conv_graph()
    encoder = layout_model(edge_mismatch=False, layout_roles=roles, layout_padding=True).eval().configs
    g = graph_tensors(graph)
    configs = layout_config_batch(graph, np.arange(10))
    with torch.no_grad():
        delta, _ = encoder.config_parts(g, configs, torch.float32)            # [configs, configurable, hidden]
        fast_delta, _ = ConfigInputs(encoder, g, configs).parts(slice(None), torch.float32)
        at = encoder.roles_at - 2                                             # the padding columns of block 0
        encoder.proj[0].weight[:, 18 * encoder.value.embedding_dim + at:][:, :2] = 0   # blind to output padding
        blind, _ = encoder.config_parts(g, configs, torch.float32)
    torch.testing.assert_close(fast_delta.transpose(0, 1), delta, rtol=1e-5, atol=1e-5 * float(delta.abs().max()))
    assert (delta - blind).abs().max() > 1e-3                                # the padding does reach the encoder


@pytest.mark.parametrize("effective,mismatch", [(True, True), (False, False)])
def test_config_inputs_node_states_equal_the_encoder(effective, mismatch):
    graph = long_graph(n_nodes=40, n_configs=10)
    encoder = layout_model(effective_layout=effective, edge_mismatch=mismatch).eval().configs
    g = graph_tensors(graph)
    configs = layout_config_batch(graph, np.arange(10))
    node_h = torch.randn(g.n_nodes, encoder.not_configurable.shape[0])
    with torch.no_grad():
        plain = encoder(node_h, g, configs)                                       # [configs, nodes, hidden]
        inputs = ConfigInputs(encoder, g, configs)
        fast = inputs.node_states(inputs.base(node_h), slice(None))
    torch.testing.assert_close(fast.transpose(0, 1), plain, rtol=1e-5, atol=1e-5 * float(plain.abs().max()))


def test_repeat_configs_is_a_new_tensor_even_for_one_config():
    rows = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    one, three = repeat_configs(rows, 1), repeat_configs(rows.unsqueeze(1), 3)
    one += 10                                                                    # the caller's buffer, not rows
    assert rows.tolist() == [[1, 2], [3, 4]] and one.tolist() == [[[11, 12]], [[13, 14]]]
    assert three.shape == (2, 3, 2) and three[1].tolist() == [[3, 4]] * 3
