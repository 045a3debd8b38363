"""The template generator (`data=synthetic_full`, the benchmarks): the whole synthetic dataset (every collection and
split) from graph templates, into a folder.

Randomness: every graph gets its own generator seeded from (seed, what, source/collection, split, index), so
output is byte-identical for a seed and one graph does not depend on how many others are generated. The two
layout searches of one source share their graphs (as the real random/default collections do) and differ only in
their configurations.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
from tqdm import tqdm

from pipeline.files import atomic_path
from pipeline.seeds import graph_rng
from pipeline.synth.common import finish, log_uniform, stats_row
from pipeline.tpugraphs import writer
from pipeline.hlo.configs import SearchParams, block_specs, choose_config_nodes, sample_layout_configs
from pipeline.costmodel.layout import LayoutCostModel, LayoutCostParams
from pipeline.costmodel.noise import measure
from pipeline.hlo.node_features import node_feat_matrix, with_layouts
from pipeline.templates.graphs import TEMPLATES
from pipeline.costmodel.tile import TileCostParams, tile_runtime_ns
from pipeline.featurizer.tile_configs import default_config, sample_tile_configs
from pipeline.templates.tiles import benchmark_name, tile_graph
from pipeline.tpugraphs.dataset import SPLITS, Collection
from pipeline.tpugraphs.schema import NPZ_SUBDIR, TRUTH_SUBDIR

TILE_GRAPHS_PER_BENCHMARK = 6


@dataclass(frozen=True)
class Settings:
    """Everything the generator reads: the preset (`data.generator`) and the model constants (`synthesize`)."""

    seed: int
    graphs: Mapping            # {"tile"|"layout": {split: count}}
    layout_nodes: tuple[int, int]
    layout_configs: tuple[int, int]
    test_configs: tuple[int, int]
    max_config_nodes: int
    tile_configs: tuple[int, int]
    noise: float
    normalizer_noise: float
    chunk_configs: int
    search: SearchParams
    layout_cost: LayoutCostParams
    tile_cost: TileCostParams
    min_tile: tuple[int, int]
    default_share: float


def layout_graph(s: Settings, source: str, split: str, index: int):
    """(HloGraph, benchmark name) of the index-th graph of a layout source/split (shared by both searches)."""
    rng = graph_rng(s.seed, "layout-graph", source, split, index)
    return TEMPLATES[source](rng, int(rng.integers(s.layout_nodes[0], s.layout_nodes[1] + 1)))


def write_layout_graph(s: Settings, collection: Collection, split: str, index: int, name: str, graph,
                       out: Path) -> dict:
    """Sample configs, cost them, write the npz (and the truth on test); returns its stats row."""
    rng = graph_rng(s.seed, "layout-configs", collection.slug, split, index)
    ids = choose_config_nodes(graph, s.max_config_nodes, rng)
    specs = block_specs(graph, ids)
    model = LayoutCostModel(graph, ids, s.layout_cost)
    n_configs = log_uniform(rng, s.test_configs if split == "test" else s.layout_configs)
    default_prob = float(rng.uniform(*s.search.default_block_prob))
    stem = writer.hex_stem(rng, 32) if split == "test" else name
    runtimes: list[np.ndarray] = []

    def chunks():
        for start in range(0, n_configs, s.chunk_configs):
            rows = min(s.chunk_configs, n_configs - start)
            feat = sample_layout_configs(specs, rows, collection.search, s.search, default_prob, rng)
            runtimes.append(measure(model.runtime_ns(feat), s.noise, rng))
            yield feat.astype(np.float32)   # [rows, NC, 18]

    # the layout columns record the module as the default configuration compiles it (docs/cost-model.md)
    node_feat = with_layouts(node_feat_matrix(graph), model.default_minor_to_major())
    arrays = {"node_feat": node_feat, "node_opcode": graph.opcodes(), "edge_index": graph.edge_index()}
    path = out / NPZ_SUBDIR / collection.subdir / split / f"{stem}.npz"
    runtime = writer.write_layout_file(path, arrays, ids, graph.node_splits(), n_configs, chunks(), runtimes,
                                       test=split == "test")
    if split == "test":
        writer.write_truth(out / TRUTH_SUBDIR / collection.slug / f"{stem}.npz", runtime)
    return stats_row(len(graph), len(arrays["edge_index"]), n_configs)


@dataclass
class TileExample:
    """One generated tile graph with its configs, runtimes and normalizers (before anything is hidden)."""

    stem: str
    graph: object
    kernel: object
    default_row: np.ndarray     # float32 [24]: the compiler default config
    config_feat: np.ndarray     # float32 [C, 24]
    runtime: np.ndarray         # int64 [C]
    normalizers: np.ndarray     # int64 [C]: the default config's runtime, re-measured per row


def tile_example(s: Settings, split: str, index: int) -> TileExample:
    bench_rng = graph_rng(s.seed, "tile-benchmark", split, index // TILE_GRAPHS_PER_BENCHMARK)
    benchmark, conv_family = benchmark_name(bench_rng, index // TILE_GRAPHS_PER_BENCHMARK)
    rng = graph_rng(s.seed, "tile-graph", split, index)
    graph, kernel = tile_graph(rng, conv_family)
    default_row = default_config(kernel, s.tile_cost)
    n_configs = log_uniform(rng, s.tile_configs)
    config_feat = sample_tile_configs(kernel, n_configs, default_row, s.default_share, rng, s.min_tile)
    runtime = writer.to_runtime_ns(measure(tile_runtime_ns(kernel, config_feat, s.tile_cost), s.noise, rng))
    default_ns = tile_runtime_ns(kernel, default_row.reshape(1, -1), s.tile_cost)   # [1]
    normalizers = writer.to_runtime_ns(measure(np.repeat(default_ns, n_configs), s.normalizer_noise, rng))
    stem = writer.hex_stem(rng, 32) if split == "test" else f"{benchmark}_{writer.hex_stem(rng, 16)}"
    return TileExample(stem, graph, kernel, default_row, config_feat, runtime, normalizers)


def write_tile_graph(s: Settings, collection: Collection, split: str, index: int, out: Path) -> dict:
    """Generate and write one tile graph (and its truth on test); returns its stats row."""
    ex = tile_example(s, split, index)
    graph = ex.graph   # a fused kernel: its layouts are fixed by the tile collection, written as the graph holds them
    arrays = {"node_feat": node_feat_matrix(graph), "node_opcode": graph.opcodes(), "edge_index": graph.edge_index()}
    path = out / NPZ_SUBDIR / collection.subdir / split / f"{ex.stem}.npz"
    writer.write_tile_file(path, arrays, ex.config_feat, ex.runtime, ex.normalizers, test=split == "test")
    if split == "test":
        writer.write_truth(out / TRUTH_SUBDIR / collection.slug / f"{ex.stem}.npz", ex.runtime,
                           ex.normalizers)
    return stats_row(len(graph), len(arrays["edge_index"]), len(ex.runtime))


def _unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return unique


def synthesize(s: Settings, collections: list[str], out_dir: str | Path, progress: bool = True) -> dict:
    """Write every collection/split into `out_dir` (replaced atomically); returns the stats dict."""
    out = Path(out_dir)
    with atomic_path(out) as tmp:          # replaces out_dir when complete
        parsed = [Collection.parse(c) for c in collections]
        jobs = [(c, split, i) for c in parsed for split in SPLITS for i in range(int(s.graphs[c.kind][split]))]
        stats: dict = {c.slug: {split: stats_row(0, 0, 0) | {"graphs": 0} for split in SPLITS} for c in parsed}
        names: dict[tuple[str, str], list[str]] = {}
        for c in parsed:   # layout names: unique per source and split, shared by the two searches
            for split in SPLITS:
                if c.kind == "layout" and (c.source, split) not in names:
                    count = int(s.graphs["layout"][split])
                    names[c.source, split] = _unique_names([layout_graph(s, c.source, split, i)[1]
                                                            for i in range(count)])
        for c, split, i in tqdm(jobs, desc="synthesize", unit="graph", disable=not progress):
            if c.kind == "tile":
                row = write_tile_graph(s, c, split, i, tmp)
            else:
                graph, _ = layout_graph(s, c.source, split, i)
                row = write_layout_graph(s, c, split, i, names[c.source, split][i], graph, tmp)
            for key, value in row.items():
                stats[c.slug][split][key] += value
        summary = {"kind": "synthetic", "builder": "templates", "synthesized": True, "seed": s.seed,
                   "collections": stats}
        finish(tmp, parsed, summary)
    return summary
