"""Tabular features for LightGBM: one row per configuration of a pruned graph.

A row is the graph-level features of its graph (the same for every configuration of that graph, so trees can
condition the configuration effects on the graph) followed by the configuration features of the collection's kind
(`pipeline.features.tile` or `pipeline.features.layout`). Feature groups, switched on and off with
`lgbm.features.<group>`:

- `graph_counts`: nodes, edges, configurable nodes, configurations of the original file;
- `opcodes`: opcode histogram (ids 0..MAX_OPCODE);
- `node_stats`: per column of the normalised `node_feat`, the statistics `lgbm.node_stats` (mean/std/min/max)
  over all nodes and, for layout graphs, the mean over the configurable nodes;
- tile: `tile_config`, `tile_derived`, `tile_relative`; layout: `layout_default`, `layout_perm`, `layout_disagree`,
  `layout_minor`, `layout_top_nodes`.

`lgbm.layout_reference` (layout): the configuration features as they are (`none`), minus the same features of the
graph's compiler-default configuration (every block -1; `default`, names suffixed `_vs_default`), or both side by
side (`both`). The difference is what a configuration changes from the compiler's choice, 0 for the default in
every graph, so a tree's split means the same on a small train graph and on a larger test one; `both` carried over
to the larger test programs best (docs/decisions.md, issue 27).

`GraphFeaturizer.iter_chunks` computes configuration rows `lgbm.feature_chunk` at a time, so memory stays bounded
by the chunk whatever the number of configurations.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from pipeline.choices import LGBM_FEATURE_GROUPS, LGBM_GRAPH_GROUPS, LGBM_NODE_STATS
from pipeline.features import layout as features_layout, tile as features_tile
from pipeline.pruned import PrunedGraph
from pipeline.tpugraphs.schema import LAYOUT_VALUE_MIN, MAX_OPCODE, OPCODE_COUNT
GRAPH_GROUPS = LGBM_GRAPH_GROUPS
ALL_GROUPS = LGBM_FEATURE_GROUPS
NODE_STATS = dict(zip(LGBM_NODE_STATS, (np.mean, np.std, np.min, np.max)))


@dataclass(frozen=True)
class FeatureSpec:
    """Which features to compute and how (from the `lgbm` config group: `pipeline.settings.lgbm.feature_spec`)."""

    groups: frozenset[str]            # enabled feature groups (names in ALL_GROUPS)
    node_stats: tuple[str, ...]       # statistics of node_feat columns (names in NODE_STATS)
    max_perm_rank: int                # layout_perm: largest rank with its own permutation columns
    feature_chunk: int                # configurations featurised at once
    top_nodes: int = 0                # layout_top_nodes: slots (the largest configurable nodes)
    layout_reference: str = "none"    # layout configuration features: none | default | both (see GraphFeaturizer)



def graph_feature_names(kind: str, n_node_feat: int, spec: FeatureSpec) -> list[str]:
    """Column names of `graph_features` for a graph with `n_node_feat` normalised node feature columns."""
    names = []
    if "graph_counts" in spec.groups:
        names += ["nodes", "edges", "configurable_nodes", "configs"]
    if "opcodes" in spec.groups:
        names += [f"opcode_{i}" for i in range(OPCODE_COUNT)]
    if "node_stats" in spec.groups:
        names += [f"node_{stat}_{j}" for stat in spec.node_stats for j in range(n_node_feat)]
        if kind == "layout":
            names += [f"config_node_mean_{j}" for j in range(n_node_feat)]
    return names


def graph_features(graph: PrunedGraph, kind: str, spec: FeatureSpec) -> np.ndarray:
    """float32 [len(graph_feature_names(...))]: the graph-level features of one graph."""
    node_feat = np.asarray(graph.node_feat, dtype=np.float64)                 # [nodes, features]
    opcode = np.asarray(graph.node_opcode, dtype=np.int64)
    if opcode.size and (opcode.min() < 0 or opcode.max() > MAX_OPCODE):
        raise ValueError(f"graph {graph.graph_id!r}: node_opcode outside 0..{MAX_OPCODE} "
                         f"(found {opcode.min()}..{opcode.max()})")
    parts = []
    if "graph_counts" in spec.groups:
        n_configurable = 0 if graph.node_config_ids is None else len(graph.node_config_ids)
        parts.append([graph.n_nodes, len(graph.edge_index), n_configurable, graph.n_configs])
    if "opcodes" in spec.groups:
        parts.append(np.bincount(opcode, minlength=OPCODE_COUNT))
    if "node_stats" in spec.groups:
        parts += [NODE_STATS[stat](node_feat, axis=0) for stat in spec.node_stats]
        if kind == "layout":
            parts.append(node_feat[np.sort(graph.node_config_ids)].mean(axis=0))    # id order: same sum
    if not parts:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1) for p in parts]).astype(np.float32)


class GraphFeaturizer:
    """Feature rows for the configurations of one pruned graph.

    Args:
        graph: the pruned graph (train/valid: de-duplicated config rows; test: all configs).
        kind: "tile" or "layout".
        spec: which features.
    """

    def __init__(self, graph: PrunedGraph, kind: str, spec: FeatureSpec):
        if kind not in ("tile", "layout"):
            raise ValueError(f"unknown collection kind {kind!r}; expected 'tile' or 'layout'")
        self.graph, self.kind, self.spec = graph, kind, spec
        self.graph_row = graph_features(graph, kind, spec)                    # [graph features]
        n_node_feat = np.asarray(graph.node_feat).shape[1]
        if kind == "tile":
            if graph.config_feat is None:
                raise ValueError(f"graph {graph.graph_id!r}: config_feat missing; tile features need it")
            self.shape = features_tile.output_shape(graph)
            config_names = features_tile.tile_feature_names(spec.groups)
        else:
            if graph.node_config_feat is None:
                raise ValueError(f"graph {graph.graph_id!r}: node_config_feat missing; layout features need it")
            self.context = features_layout.layout_context(graph)
            config_names = features_layout.layout_feature_names(spec.groups, spec.max_perm_rank, spec.top_nodes)
            if spec.layout_reference != "none":                               # the compiler default's row
                default = np.full((1, *np.asarray(graph.node_config_feat).shape[1:]), LAYOUT_VALUE_MIN, np.int8)
                self.reference = self._layout_rows(default)[0]                # [config features]
            if spec.layout_reference == "both":
                config_names = config_names + [f"{name}_vs_default" for name in config_names]
            elif spec.layout_reference == "default":
                config_names = [f"{name}_vs_default" for name in config_names]
        self.names = graph_feature_names(kind, n_node_feat, spec) + config_names
        if len(self.names) != len(self.graph_row) + len(config_names):
            raise AssertionError("graph feature names and values disagree")

    def config_rows(self, rows: np.ndarray) -> np.ndarray:
        """float32 [len(rows), config features] for kept config rows `rows` (one chunk)."""
        if self.kind == "tile":
            return features_tile.tile_features(self.shape, self.graph.config_feat[rows], self.spec.groups)
        config = self._layout_rows(self.graph.node_config_feat[rows])          # [chunk, layout features]
        if self.spec.layout_reference == "none":
            return config
        relative = config - self.reference[None]                              # [chunk, layout features]
        return relative if self.spec.layout_reference == "default" else np.concatenate([config, relative], axis=1)

    def _layout_rows(self, node_config_feat: np.ndarray) -> np.ndarray:
        """float32 [configs, layout features] of rows [configs, NC, 18], as they are."""
        return features_layout.layout_features(self.context, node_config_feat, self.spec.groups,
                                               self.spec.max_perm_rank, self.spec.top_nodes)

    def iter_chunks(self, rows: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (offset into rows, float32 [chunk, features]) for `rows` (default: every kept config row)."""
        rows = np.arange(self.graph.n_kept) if rows is None else np.asarray(rows, dtype=np.int64)
        for start in range(0, len(rows), self.spec.feature_chunk):
            chunk = rows[start:start + self.spec.feature_chunk]
            config = self.config_rows(chunk)                                  # [chunk, config features]
            graph = np.broadcast_to(self.graph_row, (len(chunk), len(self.graph_row)))
            yield start, np.concatenate([graph, config], axis=1)

    def matrix(self, rows: np.ndarray | None = None) -> np.ndarray:
        """float32 [len(rows), features]: every chunk of `iter_chunks(rows)` stacked."""
        chunks = [x for _, x in self.iter_chunks(rows)]
        return np.concatenate(chunks) if chunks else np.zeros((0, len(self.names)), dtype=np.float32)
