"""Shapes through every layer, hand-checked message passing, and permutation equivariance over configs."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from pruned_graphs import FEAT_DIM, make_layout_graph, make_tile_graph, spec_of

from pipeline.graphnet.attention import ConfigCenter, ConfigGate, ConfigSelfAttention
from pipeline.graphnet.data import graph_tensors, layout_config_batch, tile_config_batch
from pipeline.graphnet.embeddings import (LayoutConfigEncoder, NodeEncoder, TileConfigEncoder, layout_dim_features,
                                          layout_padding_features, ordered_sizes, padding_waste,
                                          layout_role_features)
from pipeline.graphnet.layers import NodeNorm, SAGEBlock, SAGEConv, SharedDropout, mean_aggregate
from pipeline.graphnet.model import ModelSpec, build_model

HIDDEN = 8


def spec(kind: str = "layout", **overrides) -> ModelSpec:
    gnn = OmegaConf.create(dict(hidden=HIDDEN, opcode_dim=4, config_value_dim=2, layers=2, dropout=0.0, norm="instance",
                                residual=True, cross_attention=True, attention_heads=2, cross_mixer="gate",
                                cross_pooled=True, effective_layout=False, edge_mismatch=False, node_reduce="mean",
                                pooled_head=True, tile_geometry=False, layout_roles=False, layout_padding=False) | overrides)
    return spec_of(gnn, kind)


def test_mean_aggregate_by_hand():
    x = torch.tensor([[[1.0], [2.0], [4.0]]])             # [1 config, 3 nodes, 1]
    src, dst = torch.tensor([0, 1]), torch.tensor([2, 2])  # nodes 0 and 1 both send to node 2
    inv = torch.tensor([1.0, 1.0, 0.5])
    assert mean_aggregate(x, src, dst, inv)[0, :, 0].tolist() == [0.0, 0.0, 1.5]


def test_mean_aggregate_adds_into_out_in_place():
    x = torch.tensor([[[1.0], [2.0], [4.0]]])             # [1 config, 3 nodes, 1]
    src, dst = torch.tensor([0, 1]), torch.tensor([2, 2])
    out = torch.tensor([[[10.0], [20.0], [30.0]]])
    result = mean_aggregate(x, src, dst, torch.tensor([1.0, 1.0, 0.5]), out)
    assert result is out and out[0, :, 0].tolist() == [10.0, 20.0, 31.5]


def test_instance_norm_by_hand_per_config_and_channel():
    norm = NodeNorm("instance", 2, eps=0.0)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([2.0, 1.0]))
        norm.bias.copy_(torch.tensor([1.0, 0.0]))
    # config 0: channel 0 over nodes [1, 2, 6] (mean 3, var 14/3), channel 1 over [5, 5, 8] (mean 6, var 2);
    # config 1: channel 0 scaled by 10 (same normalised values)
    c0 = torch.tensor([[1.0, 5.0], [2.0, 5.0], [6.0, 8.0]])
    x = torch.stack([c0, c0 * torch.tensor([10.0, 1.0])])  # [2 configs, 3 nodes, 2]
    out = norm(x)
    sd0, sd1 = (14 / 3) ** 0.5, 2 ** 0.5
    expected = [2 * -2 / sd0 + 1, -1 / sd1, 2 * -1 / sd0 + 1, -1 / sd1, 2 * 3 / sd0 + 1, 2 / sd1]  # node-major
    assert out[0].flatten().tolist() == pytest.approx(expected, abs=1e-5)
    assert out[1].flatten().tolist() == pytest.approx(expected, abs=1e-5)


def test_instance_norm_of_one_node_is_the_bias_in_training():
    norm = NodeNorm("instance", 2).train()
    with torch.no_grad():
        norm.bias.copy_(torch.tensor([0.5, -1.0]))
    x = torch.tensor([[[3.0, 4.0]], [[5.0, 6.0]]], requires_grad=True)    # [2 configs, 1 node, 2]
    out = norm(x)
    assert out.tolist() == [[[0.5, -1.0]], [[0.5, -1.0]]]
    out.sum().backward()
    assert x.grad.tolist() == [[[0.0, 0.0]], [[0.0, 0.0]]]


def test_instance_norm_gradients_match_the_formula():
    torch.manual_seed(0)
    norm = NodeNorm("instance", 4)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2.0)
        norm.bias.uniform_(-1.0, 1.0)
    x = torch.randn(3, 6, 4, dtype=torch.float64, requires_grad=True)
    target = torch.randn(3, 6, 4, dtype=torch.float64)
    weight, bias = norm.weight.double(), norm.bias.double()
    mean, var = x.mean(dim=1, keepdim=True), x.var(dim=1, keepdim=True, unbiased=False)
    formula = (x - mean) * torch.rsqrt(var + norm.eps) * weight + bias
    (grad_formula,) = torch.autograd.grad((formula * target).sum(), x)
    fast = norm.double()(x)
    (grad_fast,) = torch.autograd.grad((fast * target).sum(), x)
    assert torch.allclose(fast, formula, atol=1e-10) and torch.allclose(grad_fast, grad_formula, atol=1e-10)


def test_sage_conv_directions_use_separate_weights():
    g = graph_tensors(make_layout_graph(n_nodes=3))       # edges: 1<-0, 2<-1, 2<-0
    conv = SAGEConv(1, 1)
    with torch.no_grad():
        conv.lin.weight.copy_(torch.tensor([[1.0], [10.0], [100.0]]))  # self, from producers, from consumers
        conv.lin.bias.zero_()
    x = torch.tensor([[[1.0], [2.0], [3.0]]])
    out = conv(x, g)[0, :, 0]
    # node 0: self 1 + consumers {1, 2} mean 2.5 * 100; node 1: 2 + producer 1 * 10 + consumer 3 * 100;
    # node 2: 3 + producers {1, 2} mean 1.5 * 10
    assert out.tolist() == pytest.approx([251.0, 312.0, 18.0])


@pytest.mark.parametrize("norm", ["instance", "layer", "none"])
def test_shapes_through_every_layer(norm):
    graph = make_layout_graph(n_nodes=7, n_configs=5)
    g = graph_tensors(graph)
    configs = layout_config_batch(graph, np.arange(5))                      # [5, 2, 18]
    node_h = NodeEncoder(FEAT_DIM, HIDDEN, 4)(g.node_feat, g.node_opcode)
    assert node_h.shape == (7, HIDDEN)
    x = LayoutConfigEncoder(HIDDEN, 2, effective=False, mismatch=False)(node_h, g, configs)
    assert x.shape == (5, 7, HIDDEN)
    x = LayoutConfigEncoder(HIDDEN, 2, effective=True, mismatch=True)(node_h, g, configs)
    assert x.shape == (5, 7, HIDDEN)
    assert NodeNorm(norm, HIDDEN)(x).shape == (5, 7, HIDDEN)
    assert SAGEConv(HIDDEN, 3)(x, g).shape == (5, 7, 3)
    assert SAGEBlock(HIDDEN, norm, 0.1, True, ConfigGate(HIDDEN))(x, g).shape == (5, 7, HIDDEN)
    assert ConfigGate(HIDDEN)(x).shape == (5, 7, HIDDEN)
    assert ConfigCenter(HIDDEN)(x).shape == (5, 7, HIDDEN)
    assert ConfigSelfAttention(HIDDEN, 2, 0.0)(x[:, 0]).shape == (5, HIDDEN)
    assert TileConfigEncoder(HIDDEN, geometry=False)(torch.zeros(4, 24)).shape == (4, HIDDEN)
    for cross in (True, False):
        assert build_model(spec(norm=norm, cross_attention=cross))(g, configs).shape == (5,)
        for mixer in ("gate", "center"):
            for reduce, pooled in (("sum", False), ("mean", True)):
                model = build_model(spec(norm=norm, cross_attention=cross, cross_mixer=mixer, effective_layout=True,
                                         edge_mismatch=True, node_reduce=reduce, pooled_head=pooled))
                assert model(g, configs).shape == (5,)
    tile = make_tile_graph()
    tile_model = build_model(spec("tile", norm=norm))
    assert tile_model.encode_graph(graph_tensors(tile)).shape == (2 * HIDDEN,)
    assert tile_model(graph_tensors(tile), tile_config_batch(tile, np.arange(6))).shape == (6,)
    geometry_model = build_model(spec("tile", norm=norm, tile_geometry=True))
    assert geometry_model(graph_tensors(tile), tile_config_batch(tile, np.arange(6))).shape == (6,)


def test_non_configurable_nodes_ignore_configs():
    graph = make_layout_graph(n_nodes=7, n_configs=3)
    g = graph_tensors(graph)
    enc = LayoutConfigEncoder(HIDDEN, 2, effective=False, mismatch=False)
    x = enc(torch.randn(7, HIDDEN), g, layout_config_batch(graph, np.arange(3)))
    others = [i for i in range(7) if i not in (1, 4)]
    assert torch.allclose(x[0, others], x[2, others])       # same for every config
    assert not torch.allclose(x[0, [1, 4]], x[2, [1, 4]])   # configurable nodes differ


def test_cross_config_layers_are_permutation_equivariant():
    torch.manual_seed(0)
    x = torch.randn(6, 5, HIDDEN)                            # [configs, nodes, dim]
    perm = torch.randperm(6)
    gate, attn = ConfigGate(HIDDEN).eval(), ConfigSelfAttention(HIDDEN, 2, 0.0).eval()
    center = ConfigCenter(HIDDEN).eval()
    assert torch.allclose(gate(x)[perm], gate(x[perm]), atol=1e-6)
    assert torch.allclose(center(x)[perm], center(x[perm]), atol=1e-6)
    assert torch.allclose(attn(x[:, 0])[perm], attn(x[perm, 0]), atol=1e-6)
    # ...and they really mix configs: changing config 0 changes the others' outputs
    y = x.clone()
    y[0] = torch.randn(5, HIDDEN)  # (a constant shift would be undone by the LayerNorm)
    assert not torch.allclose(gate(x)[1:], gate(y)[1:])
    assert not torch.allclose(center(x)[1:], center(y)[1:])
    assert not torch.allclose(attn(x[:, 0])[1:], attn(y[:, 0])[1:])


def test_config_center_by_hand():
    center = ConfigCenter(1)
    with torch.no_grad():
        center.mix_self.weight.fill_(0.0)
        center.mix_self.bias.fill_(0.0)
        center.mix_diff.weight.fill_(1.0)
    x = torch.tensor([[[1.0]], [[2.0]], [[6.0]]])           # 3 configs, mean 3
    assert center(x).flatten().tolist() == pytest.approx([-2.0, -1.0, 3.0])
    with torch.no_grad():                                    # W_self x + b + W_diff (x - mean): 2x + 1 + (x - 3)
        center.mix_self.weight.fill_(2.0)
        center.mix_self.bias.fill_(1.0)
    assert center(x).flatten().tolist() == pytest.approx([1.0, 4.0, 16.0])


def test_shared_dropout_uses_one_mask_for_every_config():
    torch.manual_seed(0)
    drop = SharedDropout(0.5).train()
    out = drop(torch.ones(4, 10, 6))
    assert torch.equal(out[0], out[3]) and (out == 0).any() and (out == 2).any()
    assert torch.equal(drop.eval()(torch.ones(2, 3, 1)), torch.ones(2, 3, 1))


def test_sum_head_starts_at_zero():
    graph = make_layout_graph(n_configs=4)
    model = build_model(spec(node_reduce="sum", pooled_head=False))
    assert torch.equal(model(graph_tensors(graph), layout_config_batch(graph, np.arange(4))), torch.zeros(4))


@pytest.mark.parametrize("kind,mixer", [("layout", "gate"), ("layout", "center"), ("tile", "gate")])
def test_whole_model_is_permutation_equivariant(kind, mixer):
    torch.manual_seed(0)
    graph = make_layout_graph(n_configs=8) if kind == "layout" else make_tile_graph(n_configs=8)
    g = graph_tensors(graph)
    model = build_model(spec(kind, cross_mixer=mixer, effective_layout=True, edge_mismatch=True)).eval()
    for p in model.parameters():                          # zero-initialised heads would make every score equal
        torch.nn.init.normal_(p, std=0.3)
    batch = layout_config_batch if kind == "layout" else tile_config_batch
    perm = np.random.default_rng(3).permutation(8)
    with torch.no_grad():
        base = model(g, batch(graph, np.arange(8)))
        permuted = model(g, batch(graph, perm))
    assert torch.allclose(base[torch.from_numpy(perm)], permuted, atol=1e-5)


def test_layout_dim_features_by_hand():
    dims = torch.zeros(1, 3, 6)
    dims[0, 0, :3] = torch.tensor([4.0, 130.0, 9.0])         # output shape (4, 130, 9)
    configs = torch.zeros(1, 1, 18, dtype=torch.int64)       # all -1 (index 0)
    configs[0, 0, :3] = torch.tensor([1, 2, 0]) + 1          # output layout minor-to-major {1, 2, 0}
    f = layout_dim_features(ordered_sizes(configs, dims))    # [1, 1, 3, 8]
    assert f.shape == (1, 1, 3, 8)
    assert torch.allclose(f[0, 0, 0, :3], torch.log1p(torch.tensor([130.0, 9.0, 4.0])))
    assert f[0, 0, 0, 3:6].abs().sum() == 0                 # padding -> size 0
    assert f[0, 0, 0, 6].item() == pytest.approx(2 / 128) and f[0, 0, 0, 7].item() == pytest.approx(1 / 8)
    assert f[0, 0, 1].abs().sum() == 0                      # input block all -1


def test_padding_waste_by_hand():
    sizes = torch.tensor([0, 1, 100, 128, 129, 256])
    expected = [0.0, math.log(128), math.log(128 / 100), 0.0, math.log(256 / 129), 0.0]
    assert padding_waste(sizes, 128).tolist() == pytest.approx(expected)
    assert padding_waste(torch.tensor([3, 8, 9]), 8).tolist() == pytest.approx([math.log(8 / 3), 0.0, math.log(16 / 9)])


def test_layout_padding_features_by_hand():
    dims = torch.zeros(1, 3, 6)
    dims[0, 0, :3] = torch.tensor([4.0, 130.0, 9.0])         # output shape (4, 130, 9)
    configs = torch.zeros(2, 1, 18, dtype=torch.int64)       # all -1 (index 0)
    configs[0, 0, :3] = torch.tensor([1, 2, 0]) + 1          # 130 minor, 9 second-minor
    configs[1, 0, :3] = torch.tensor([2, 0, 1]) + 1          # 9 minor, 4 second-minor
    f = layout_padding_features(ordered_sizes(configs, dims))  # [2, 1, 3, 2]
    assert f.shape == (2, 1, 3, 2)
    assert f[0, 0, 0].tolist() == pytest.approx([math.log(256 / 130), math.log(16 / 9)])
    assert f[1, 0, 0].tolist() == pytest.approx([math.log(128 / 9), math.log(8 / 4)])
    assert f[:, 0, 1:].abs().sum() == 0                     # input / kernel blocks name no dim


def test_layout_role_features_by_hand():
    roles = torch.zeros(1, 3, 6, 2)
    roles[0, 0, 3, 0] = roles[0, 0, 0, 1] = 1                # output: feature dim 3, batch dim 0
    configs = torch.zeros(1, 2, 18, dtype=torch.int64)       # all -1 (index 0)
    configs[0, 0, :4] = torch.tensor([3, 1, 2, 0]) + 1       # output minor-to-major {3, 1, 2, 0}: feature minor
    configs[0, 0, 6:10] = torch.tensor([0, 3, 1, 2]) + 1     # input {0, 3, ...}: no roles on the input block
    configs[0, 1, :2] = torch.tensor([1, 0]) + 1             # the second node has no roles at all
    f = layout_role_features(configs, torch.cat([roles, torch.zeros(1, 3, 6, 2)]))   # [1, 2, 3, 4]
    assert f.shape == (1, 2, 3, 4)
    assert f[0, 0, 0].tolist() == [1, 0, 0, 0]               # minor: feature; second-minor (dim 1): none
    configs[0, 0, :2] = torch.tensor([0, 3]) + 1             # {0, 3, ...}: batch minor, feature second-minor
    f = layout_role_features(configs, torch.cat([roles, torch.zeros(1, 3, 6, 2)]))
    assert f[0, 0, 0].tolist() == [0, 1, 1, 0]
    assert f[0, 0, 1:].abs().sum() == 0 and f[0, 1].abs().sum() == 0
