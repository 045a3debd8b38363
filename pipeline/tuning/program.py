"""A program as the models read it: HLO text -> layout graph (and fused kernels) -> pruned graph template.

The template is the program's layout graph written as a one-config test file (the compiler default), pruned
with the settings and train-fitted normaliser stage `prune` saved for the model's collection (`pipeline.predict`
does the same for `predict`); `with_configs` swaps any batch of candidate rows into it, so every model scores
candidates through its own inference path.
"""
from __future__ import annotations

import dataclasses
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from pipeline.hlo.featurize import (LayoutProgram, TileProgram, layout_program, parse_module, tile_programs,
                                    why_no_tile_kernel)
from pipeline.pruned import PrunedGraph
from pipeline.tpugraphs import writer
from pipeline.tpugraphs.dataset import Collection
from pipeline.tpugraphs.schema import NODE_CONFIG_FEAT_DIM
from pipeline.trained import prune_new_graph


@dataclass(frozen=True)
class Program:
    """One program to autotune: its layout graph (unoptimised text) and fused kernels (optimised text)."""

    name: str
    layout: LayoutProgram
    node_feat: np.ndarray        # [nodes, 140] float32 the model reads (the layout program's, or with layouts)
    tiles: tuple[TileProgram, ...]
    no_tiles: str | None = None  # why an optimised text gave no tile (`why_no_tile_kernel`, its source first)


def read_program(name: str, text: str, source: str, optimized: str | None = None,
                 optimized_source: str = "") -> Program:
    """Parse the texts (HloParseError names the line); tiles come from the optimised text when given. A scheduled
    module (the compiler's output) given as the unoptimised text is searched as given, with a warning on stderr; so
    is an optimised text of another module name. One with no fused kernel to tile gives `no_tiles`, which the
    caller prints as a warning or puts in its refusal."""
    module = parse_module(text, source)
    if module.scheduled:
        print(f"warning: {source}: a scheduled (optimised) module where the unoptimised text is expected: its "
              f"layouts are the compiler's own choices; give PROGRAM.hlo.txt (before optimisation) first",
              file=sys.stderr)
    layout = layout_program(module)
    tiles: tuple[TileProgram, ...] = ()
    if optimized is not None:
        compiled = parse_module(optimized, optimized_source)
        if compiled.name != module.name:                 # XLA keeps the module's name through its passes
            print(f"warning: {optimized_source}: module {compiled.name!r}, not {module.name!r} as in {source}: the "
                  f"tiles are searched for that module's kernels; give the optimised text of the same program",
                  file=sys.stderr)
        tiles = tuple(tile_programs(compiled))
        if not tiles:
            return Program(name, layout, layout.node_feat, tiles, f"{optimized_source}: {why_no_tile_kernel(compiled)}")
    return Program(name, layout, layout.node_feat, tiles)


def template_graph(cfg: DictConfig, program: Program, collection: Collection, work_dir: Path) -> PrunedGraph:
    """The pruned layout graph of `program` with one config (the compiler default), pruned for `collection`."""
    layout = program.layout
    ids = layout.config_node_ids
    default = np.full((1, len(ids), NODE_CONFIG_FEAT_DIM), -1, dtype=np.float32)       # [1, NC, 18]
    arrays = {"node_feat": program.node_feat, "node_opcode": layout.node_opcode, "edge_index": layout.edge_index}
    with tempfile.TemporaryDirectory(prefix="autotune-", dir=work_dir) as tmp:
        path = Path(tmp) / f"{program.name}.npz"
        writer.write_layout_file(path, arrays, ids, layout.node_splits, 1, iter([default]), [np.zeros(1)],
                                 test=True)
        graph = prune_new_graph(cfg, path, collection, Path(tmp) / "pruned")
    return graph


def with_configs(template: PrunedGraph, configs: np.ndarray) -> PrunedGraph:
    """The template holding `configs` as its (test) configs: layout node_config_feat [B, NC, 18], or tile
    config_feat [B, 24] (re-padded as stage prune re-pads them)."""
    n = len(configs)
    arrays = ({"config_feat": np.asarray(configs, dtype=np.float32)} if template.config_feat is not None else
              {"node_config_feat": np.asarray(configs, dtype=np.int8)})
    return dataclasses.replace(template, **arrays, config_runtime=np.zeros(n), config_count=np.ones(n, dtype=np.int64),
                               config_inverse=np.arange(n, dtype=np.int64))
