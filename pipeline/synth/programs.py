"""Build the dataset from the program zoo: real JAX training steps, featurised, costed by the TPU cost model.

Per program of `pipeline.zoo.registry.programs` (source, split, family, size):
- layout (both searches of its source): the lowered module's layout graph (`pipeline.hlo.featurize`), configs of
  the `random` / `default` search, runtimes = layout cost model x measurement noise;
- tile (`tiled_programs`: the first `tile_programs[split]` xla programs of a split, drawn from `sizes` updated by
  `tile_sizes`, so they may be programs of their own): `tile_kernels_per_program` distinct fused
  kernels of the CPU-compiled module (the largest of a random draw of fusions), tile
  configs, runtimes = tile cost model x noise, normalizers = the compiler default's runtime re-measured per row.
Every graph also gets its ceiling: the official metric of ranking its configs by the noise-free cost model
against the measured runtimes (Kendall tau for layout, the tile score for tile); the collection's ceiling per
split is the mean over its graphs, stored in stats.json. Randomness is keyed per (what, collection, split,
program) as in `pipeline.templates.dataset`, so a seed gives a byte-identical dataset.
"""
from __future__ import annotations

from math import prod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from pipeline.files import atomic_path
from pipeline.parallel import ordered_map
from pipeline.costmodel.layout import LayoutCostModel, LayoutCostParams
from pipeline.costmodel.noise import measure
from pipeline.costmodel.tile import tile_runtime_ns
from pipeline.hlo.configs import SearchParams, block_specs, sample_layout_configs
from pipeline.hlo.featurize import HloModule, LayoutProgram, TileProgram, fusions, layout_program, parse_module
from pipeline.hlo.kernel import tile_kernel
from pipeline.hlo.lower import build_graph
from pipeline.hlo.node_features import node_feat_matrix, with_layouts
from pipeline.scoring.metrics import kendall_tau, tile_score
from pipeline.featurizer.tile_configs import TileSearch, default_config, tile_configs
from pipeline.seeds import graph_rng
from pipeline.synth.common import finish, log_uniform, stats_row
from pipeline.synth.worlds import WorldSpread, graph_world
from pipeline.tpugraphs import writer
from pipeline.tpugraphs.dataset import SPLITS, Collection
from pipeline.zoo.common import compiled_text, lowered_text
from pipeline.zoo.registry import ZooProgram, extra_programs, programs
from pipeline.tpugraphs.schema import NPZ_SUBDIR, TRUTH_SUBDIR

MIN_TILE_CONFIGS = 2          # a kernel with fewer distinct tilings has nothing to rank
KERNEL_CANDIDATES = 4         # fusions built per kernel kept (the largest distinct ones are kept)


@dataclass(frozen=True)
class ProgramSettings:
    """The preset (`data.generator`, builder `programs`) and the model constants (`synthesize`)."""

    seed: int
    programs: Mapping          # {source: {split: count}}
    sizes: Mapping             # {"train"|"test": size grid}
    tile_sizes: Mapping        # grids replacing `sizes`' for the programs compiled for tile kernels ({}: the same)
    layout_configs: tuple[int, int]
    test_configs: tuple[int, int]
    max_config_nodes: int
    tile_configs: tuple[int, int]
    tile_programs: Mapping     # {split: count}: the first xla programs of a split compiled for tile kernels
    tile_kernels_per_program: int
    noise: float
    normalizer_noise: float
    chunk_configs: int
    search: SearchParams
    layout_cost: LayoutCostParams
    tile_search: TileSearch
    extra_programs: Mapping = field(default_factory=dict)   # {source: {split: count}}: families outside the rotation
    world: WorldSpread = field(default_factory=WorldSpread)  # constants drawn per program (`synthesize.world`)


def layout_graph_of(program: ZooProgram) -> LayoutProgram:
    return layout_program(parse_module(lowered_text(program.spec, program.size), f"{program.name} (lowered)"))


def layout_programs(s: ProgramSettings) -> list[ZooProgram]:
    """The programs whose layout graphs the dataset holds: the core draw, then the extra programs."""
    return programs(s.programs, s.sizes, s.seed) + extra_programs(s.extra_programs, s.sizes, s.seed)


def tiled_programs(s: ProgramSettings) -> list[ZooProgram]:
    """The programs compiled for tile kernels: the first `tile_programs[split]` xla programs of each split, drawn as
    the layout programs are but from `sizes` updated by `tile_sizes` (the same programs when `tile_sizes` is empty,
    so a wider layout grid need not change the tile kernels: docs/decisions.md, issue 27)."""
    drawn = programs(s.programs, {**s.sizes, **s.tile_sizes}, s.seed)
    return [p for split in SPLITS for p in [q for q in drawn if q.source == "xla" and q.split == split]
            [:int(s.tile_programs.get(split, 0))]]


def write_layout(s: ProgramSettings, collection: Collection, program: ZooProgram, layout: LayoutProgram,
                 out: Path) -> tuple[dict, float]:
    """Configs, runtimes and the npz (and truth on test) of one program; returns (stats row, ceiling)."""
    split = program.split
    rng = graph_rng(s.seed, "layout-configs", collection.slug, split, program.name)
    ids = layout.config_node_ids
    if len(ids) > s.max_config_nodes:
        ids = np.sort(rng.choice(ids, size=s.max_config_nodes, replace=False))
    specs = block_specs(layout.graph, ids)
    world = graph_world(s.layout_cost, s.world, split, graph_rng(s.seed, "layout-world", split, program.name))
    model = LayoutCostModel(layout.graph, ids, world)
    n_configs = log_uniform(rng, s.test_configs if split == "test" else s.layout_configs)
    default_prob = float(rng.uniform(*s.search.default_block_prob))
    stem = writer.hex_stem(rng, 32) if split == "test" else program.name
    runtimes: list[np.ndarray] = []
    clean: list[np.ndarray] = []

    def chunks():
        for start in range(0, n_configs, s.chunk_configs):
            rows = min(s.chunk_configs, n_configs - start)
            feat = sample_layout_configs(specs, rows, collection.search, s.search, default_prob, rng)
            clean.append(model.runtime_ns(feat))
            runtimes.append(measure(clean[-1], s.noise, rng))
            yield feat.astype(np.float32)   # [rows, NC, 18]

    # the layout columns record the module as the default configuration compiles it (docs/cost-model.md)
    node_feat = with_layouts(layout.node_feat, model.default_minor_to_major())
    arrays = {"node_feat": node_feat, "node_opcode": layout.node_opcode, "edge_index": layout.edge_index}
    path = out / NPZ_SUBDIR / collection.subdir / split / f"{stem}.npz"
    runtime = writer.write_layout_file(path, arrays, ids, layout.node_splits, n_configs, chunks(), runtimes,
                                       test=split == "test")
    if split == "test":
        writer.write_truth(out / TRUTH_SUBDIR / collection.slug / f"{stem}.npz", runtime)
    ceiling = kendall_tau(np.concatenate(clean), runtime)
    return stats_row(len(layout.graph), len(layout.edge_index), n_configs), ceiling


def largest_kernels(kernels: list[TileProgram], count: int) -> list[TileProgram]:
    """The `count` distinct kernels (by TileKernel) with the largest outputs (most tilings), in given order."""
    first: dict = {}
    for i, program in enumerate(kernels):
        first.setdefault(program.kernel, i)
    by_size = sorted(first.values(), key=lambda i: (-prod(kernels[i].kernel.out_shape), i))
    return [kernels[i] for i in sorted(by_size[:count])]


def sample_kernels(module: HloModule, count: int, rng: np.random.Generator) -> list[TileProgram]:
    """`count` kernels: KERNEL_CANDIDATES x count fusions drawn at random, the largest distinct ones kept."""
    found = fusions(module)
    drawn = np.sort(rng.choice(len(found), size=min(len(found), KERNEL_CANDIDATES * count), replace=False))
    kernels = []
    for fusion, computation in (found[int(i)] for i in drawn):
        graph = build_graph(module, root=computation)
        kernels.append(TileProgram(f"{module.name}.{fusion}", fusion, graph, tile_kernel(graph),
                                   node_feat_matrix(graph), graph.opcodes(), graph.edge_index()))
    return largest_kernels(kernels, count)


def kept_kernels(s: ProgramSettings, program: ZooProgram):
    """Yield (kernel, its drawn tile configs [C, 24], the generator that drew them) of every kernel of the compiled
    program that the dataset holds: the sampled largest kernels with at least MIN_TILE_CONFIGS tilings drawn."""
    module = parse_module(compiled_text(program.spec, program.size), f"{program.name} (compiled)")
    rng = graph_rng(s.seed, "tile-kernels", program.split, program.name)
    for k, kernel in enumerate(sample_kernels(module, s.tile_kernels_per_program, rng)):
        drawn = graph_rng(s.seed, "tile-configs", program.split, program.name, int(k))
        config_feat = tile_configs(kernel, log_uniform(drawn, s.tile_configs), s.tile_search, drawn)
        if len(config_feat) >= MIN_TILE_CONFIGS:
            yield kernel, config_feat, drawn


def write_tiles(s: ProgramSettings, collection: Collection, program: ZooProgram, out: Path) -> list[tuple[dict, float]]:
    """The dataset's kernels of the compiled program (`kept_kernels`); a (stats row, ceiling) per kernel written."""
    rows = []
    for kernel, config_feat, rng in kept_kernels(s, program):
        cost = s.tile_search.cost
        clean = tile_runtime_ns(kernel.kernel, config_feat, cost)
        runtime = writer.to_runtime_ns(measure(clean, s.noise, rng))
        default_ns = tile_runtime_ns(kernel.kernel, default_config(kernel.kernel, cost).reshape(1, -1), cost)  # [1]
        normalizers = writer.to_runtime_ns(measure(np.repeat(default_ns, len(runtime)), s.normalizer_noise, rng))
        split = program.split
        stem = writer.hex_stem(rng, 32) if split == "test" else f"{program.name}_{writer.hex_stem(rng, 16)}"
        arrays = {"node_feat": kernel.node_feat, "node_opcode": kernel.node_opcode, "edge_index": kernel.edge_index}
        path = out / NPZ_SUBDIR / collection.subdir / split / f"{stem}.npz"
        writer.write_tile_file(path, arrays, config_feat, runtime, normalizers, test=split == "test")
        if split == "test":
            writer.write_truth(out / TRUTH_SUBDIR / collection.slug / f"{stem}.npz", runtime, normalizers)
        rows.append((stats_row(len(kernel.graph), len(kernel.edge_index), len(runtime)),
                     tile_score(clean, runtime / normalizers)))
    return rows


def program_graphs(s: ProgramSettings, collections: Sequence[Collection], laid_out: bool, tiled: bool, out: Path,
                   program: ZooProgram) -> list[tuple[str, dict, float]]:
    """Write every graph of one program under `out`: one per layout collection of its source when `laid_out`, and
    its tile kernels when `tiled`. Returns (collection slug, stats row, ceiling) per graph written, in writing order.
    Everything it draws is keyed by the program (`graph_rng`), so the graphs do not depend on which process writes
    them."""
    wanted = {"layout": laid_out, "tile": tiled}
    mine = [c for c in collections if c.source == program.source and wanted[c.kind]]
    layout = layout_graph_of(program) if any(c.kind == "layout" for c in mine) else None
    written = []
    for c in mine:
        if c.kind == "layout":
            written.append((c.slug, *write_layout(s, c, program, layout, out)))
        else:
            written += [(c.slug, row, ceiling) for row, ceiling in write_tiles(s, c, program, out)]
    return written


def build(s: ProgramSettings, collections: list[str], out_dir: str | Path, progress: bool = True,
          workers: int = 1) -> dict:
    """Write every collection/split into `out_dir` (replaced atomically); returns the stats dict. `workers` > 1
    builds the programs in that many spawned processes (a program at a time each); the dataset is byte-identical
    for any number (the results are gathered in program order)."""
    out = Path(out_dir)
    with atomic_path(out) as tmp:          # replaces out_dir when complete
        parsed = [Collection.parse(c) for c in collections]
        laid_out = layout_programs(s)
        tiled = tiled_programs(s)
        listed = laid_out + [p for p in tiled if p not in laid_out]      # tile-only programs last
        stats = {c.slug: {split: stats_row(0, 0, 0) | {"graphs": 0} for split in SPLITS} for c in parsed}
        scores: dict[str, dict[str, list[float]]] = {c.slug: {split: [] for split in SPLITS} for c in parsed}
        jobs = [(s, parsed, program in laid_out, program in tiled, tmp, program) for program in listed]
        per_program = ordered_map(program_graphs, jobs, min(int(workers), len(jobs)), "synthesize", "program",
                                  progress=progress)
        for program, written in zip(listed, per_program):
            for slug, row, ceiling in written:
                for key, value in row.items():
                    stats[slug][program.split][key] += value
                scores[slug][program.split].append(ceiling)
        ceiling = {slug: {split: float(np.mean(v)) for split, v in per.items() if v} for slug, per in scores.items()}
        summary = {"kind": "synthetic", "builder": "programs", "synthesized": True, "seed": s.seed,
                   "collections": stats, "ceiling": ceiling,
                   "programs": [{"name": p.name, "source": p.source, "family": p.family, "split": p.split,
                                 "graphs": [kind for kind, made in (("layout", p in laid_out), ("tile", p in tiled))
                                            if made]} for p in listed]}
        finish(tmp, parsed, summary)
    return summary

