"""Tiny hand-built PrunedGraphs and models shared by the GNN tests (graphnet/, test_gnn.py)."""
from __future__ import annotations

import numpy as np
import torch
from omegaconf import OmegaConf

from pipeline.graphnet.model import ModelSpec, build_model
from pipeline.graphnet.train_loop import TrainSettings
from pipeline.pruned import PrunedGraph
from pipeline.graphnet.settings import GnnSettings
from pipeline.settings.gnn import gnn_settings, infer_settings, model_spec, train_settings
from pipeline.tpugraphs.dataset import Collection

FEAT_DIM = 6
LAYOUT = Collection.parse("layout:xla:random")    # the collection whose settings the tests' gnn groups give
TILE = Collection.parse("tile:xla")


def spec_of(gnn, kind: str = "layout", node_feat_dim: int = FEAT_DIM) -> ModelSpec:
    """The model spec a (partial) `gnn` group gives a layout (random search) or tile collection."""
    return model_spec(gnn, LAYOUT if kind == "layout" else TILE, node_feat_dim)


def settings_of(gnn, seed: int = 0) -> GnnSettings:
    """The GnnSettings a `gnn` group (with global `seed`) gives a layout collection of the random search."""
    return gnn_settings(OmegaConf.create({"gnn": gnn, "seed": seed, "prune": {"hops": 1}}), LAYOUT)


def train_of(gnn) -> TrainSettings:
    """The training settings a (partial) `gnn` group gives a layout collection of the random search."""
    return train_settings(gnn, LAYOUT, infer_settings(gnn))


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
                       edge_index=np.array([(i, i - 1) for i in range(1, n_nodes)], np.int64).reshape(-1, 2),
                       node_ids=np.arange(n_nodes), config_runtime=runtime.astype(np.float64),
                       config_count=np.ones(n_configs, np.int64), config_inverse=np.arange(n_configs),
                       config_feat=config_feat)


def long_graph(n_nodes: int = 40, n_configs: int = 10, seed: int = 0, graph_id: str = "long",
               split: str = "train") -> PrunedGraph:
    """A chain with skip edges (node i consumes i-1, odd i also i-3); every 6th node from 2 is configurable.

    Raw features carry shape dims and an HLO layout, so effective layouts and mismatched edges are exercised.
    """
    rng = np.random.default_rng(seed)
    edges = [(i, i - 1) for i in range(1, n_nodes)] + [(i, i - 3) for i in range(3, n_nodes, 2)]
    ids = np.arange(2, n_nodes, 6)
    feat = rng.integers(-1, 6, size=(n_configs, len(ids), 18)).astype(np.int8)    # [configs, config nodes, 18]
    raw = np.full((n_nodes, 140), -1, np.float32)
    raw[:, 21:24] = rng.choice([3, 8, 128], size=(n_nodes, 3))                      # shape_dimensions_0..2
    raw[:, 134:137] = [2, 1, 0]                                                     # layout_minor_to_major_0..2
    runtime = 50.0 + 4 * feat[:, :, 0].sum(1) + feat[:, -1, 7] + rng.random(n_configs)
    return PrunedGraph(graph_id=graph_id, split=split, node_feat=rng.normal(size=(n_nodes, FEAT_DIM)).astype(np.float32),
                       node_feat_raw=raw, node_opcode=rng.integers(0, 121, n_nodes).astype(np.int64),
                       edge_index=np.array(edges, np.int64), node_ids=np.arange(n_nodes),
                       config_runtime=runtime.astype(np.float64), config_count=np.ones(n_configs, np.int64),
                       config_inverse=np.arange(n_configs), node_config_ids=ids, node_config_feat=feat)


def layout_model(norm: str = "layer", seed: int = 0, **overrides):
    """A small layout model with every weight perturbed (the zero-initialised heads would score all configs 0)."""
    gnn = OmegaConf.create(dict(hidden=8, opcode_dim=4, config_value_dim=2, layers=2, dropout=0.0, norm=norm,
                                residual=True, cross_attention=True, attention_heads=2, effective_layout=True,
                                edge_mismatch=True, node_reduce="sum", cross_mixer="center", cross_pooled=True,
                                pooled_head=True, tile_geometry=False, layout_roles=False, layout_padding=False) | overrides)
    torch.manual_seed(seed)
    model = build_model(spec_of(gnn))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def gnn_cfg(**overrides):
    base = dict(hidden=8, opcode_dim=4, config_value_dim=2, layers=2, dropout=0.1, norm="instance", residual=True,
                cross_attention=True, attention_heads=2, cross_mixer="gate", cross_pooled=True, effective_layout=False,
                edge_mismatch=False, node_reduce="mean", joint_sources=False, pooled_head=True,
                tile_geometry=False, layout_roles=False, layout_padding=False, loss="pairwise_hinge",
                margin=0.1,
                min_gap=0.0, lr=3e-3, weight_decay=1e-5, warmup_frac=0.1, schedule="cosine", lr_patience=2, lr_decay=0.5,
                epochs=4, patience=10, min_delta=0.0, seeds=[0], steps_per_epoch=None,
                graphs_per_step=2, configs_per_graph=6, grad_clip=1.0, tta=2, infer_batch=5, valid_max_configs=6,
                valid_tta=None, ema_epochs=None, valid_metric="score",
                device="cpu", amp=False, resume=False, mode="pruned", num_threads=1, member_workers=1, infer_chunk_mb=None,
                min_gap_quantile=None)
    return OmegaConf.create(base | overrides)
