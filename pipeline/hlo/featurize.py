"""HLO text -> TpuGraphs graphs: one layout program per module, one tile program per fused kernel.

Public API (used by `pipeline.featurizer` and by the built-in dataset generator):
- `parse_module(text, source)`: the parsed, fully checked module (raises `HloParseError` naming the line).
- `layout_program(module)`: the whole module as one graph (every computation's instructions, see
  `pipeline.hlo.lower`) with its 140 node_feat columns and the nodes the compiler may assign layouts to.
- `tile_programs(module)`: one graph per fusion outside fused computations (its fused computation and what that
  calls), with the `TileKernel` the tile cost model needs. A module without fusions (unoptimised text) has none.
- `layout_configs(...)`: candidate node_config_feat rows (tile config_feat rows: `pipeline.featurizer.tile_configs`).

Configurable nodes (layout): convolutions, dots and reshapes (`opcodes.CONFIGURABLE`, the ones the layout cost
model prices) of rank 1..6 whose operands have rank <= 6 (a config block holds 6 dims), in any computation.
Layout graphs are most faithful from unoptimised text (`.lower(...).as_text(dialect="hlo")`,
`*.before_optimizations.txt`), as layout assignment runs before fusion; tile graphs need optimised text.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from pipeline.hlo import opcodes as op
from pipeline.hlo.configs import SearchParams, block_specs, sample_layout_configs
from pipeline.hlo.graph import HloGraph
from pipeline.hlo.kernel import TileKernel, tile_kernel
from pipeline.hlo.lower import build_graph, callees, computation_order, instruction_order
from pipeline.hlo.node_features import node_feat_matrix
from pipeline.hlo.text import HloModule, HloParseError, parse_text

__all__ = ["HloModule", "HloParseError", "LayoutProgram", "TileProgram", "SearchParams",
           "parse_module", "layout_program", "tile_programs", "layout_configs", "configurable_nodes"]

MAX_LAYOUT_RANK = 6


@dataclass(frozen=True)
class LayoutProgram:
    """One layout graph of one HLO module."""

    name: str
    graph: HloGraph              # every node, operands resolved, official node order
    node_feat: np.ndarray        # [nodes, 140] float32, the official columns
    node_opcode: np.ndarray      # [nodes] uint8 official opcode ids
    edge_index: np.ndarray       # [edges, 2] int64 (consumer, producer), operand order, then called roots
    node_splits: np.ndarray      # [splits] int64: 0, ends of cluster/while/cond computations, node count
    config_node_ids: np.ndarray  # [config nodes] int64, sorted: the nodes the compiler may assign layouts to


@dataclass(frozen=True)
class TileProgram:
    """One fused kernel of a (compiled) module."""

    name: str                    # <module>.<fusion instruction>
    fusion: str                  # the fusion instruction's name exactly as in the text (no module, no %)
    graph: HloGraph
    kernel: TileKernel           # the kernel as the tile cost model describes it
    node_feat: np.ndarray        # [nodes, 140] float32
    node_opcode: np.ndarray      # [nodes] uint8
    edge_index: np.ndarray       # [edges, 2] int64


def parse_module(text: str, source: str = "<text>") -> HloModule:
    """Parse HLO module text and check everything the graph needs (names, attributes); opcodes newer than the
    dataset's table become id 0 with one note on stderr.

    Raises:
        HloParseError: one line, `<source>:<line>: expected ..., found ...`.
    """
    module = parse_text(text, source)
    unknown = build_graph(module).unknown_opcodes
    if unknown:
        listed = ", ".join(f"{name} x{count}" for name, count in sorted(unknown.items()))
        print(f"note: {source}: opcodes outside the dataset's table ({listed}) get opcode id 0, as the official "
              f"extractor writes them", file=sys.stderr)
    return module


def configurable_nodes(graph: HloGraph) -> np.ndarray:
    """int64 [NC] sorted ids of the nodes whose layouts a configuration sets (see the module docstring)."""
    ids = [i for i, n in enumerate(graph.nodes)
           if n.opcode in op.CONFIGURABLE and 1 <= n.rank <= MAX_LAYOUT_RANK and n.dtype != "tuple"
           and len(n.operands) >= (2 if n.opcode in (op.CONVOLUTION, op.DOT) else 1)
           and all(graph.nodes[o].rank <= MAX_LAYOUT_RANK for o in n.operands)
           and (n.opcode != op.CONVOLUTION or n.conv is not None)]
    return np.array(ids, dtype=np.int64)


def why_no_layout_node(graph: HloGraph) -> str:
    """Why `configurable_nodes(graph)` is empty, for one-line errors: no convolution, dot or reshape at all, or the
    first one and the rank that keeps it out (a layout block holds at most MAX_LAYOUT_RANK dims)."""
    candidates = [n for n in graph.nodes if n.opcode in op.CONFIGURABLE]
    if not candidates:
        return "no configurable node (convolution, dot, reshape) to lay out"
    first = candidates[0]
    ranks = [first.rank, *(graph.nodes[o].rank for o in first.operands)]
    return (f"no configurable node: its {len(candidates)} convolution, dot or reshape node(s) are none of rank "
            f"1-{MAX_LAYOUT_RANK} with operands of rank <= {MAX_LAYOUT_RANK} (a layout block holds "
            f"{MAX_LAYOUT_RANK} dims; {first.name or 'the first'}: ranks {ranks})")


def layout_program(module: HloModule) -> LayoutProgram:
    graph = build_graph(module)
    return LayoutProgram(module.name, graph, node_feat_matrix(graph), graph.opcodes(), graph.edge_index(),
                         graph.node_splits().reshape(-1), configurable_nodes(graph))   # [1, S] -> [S]


def fusions(module: HloModule) -> list[tuple[str, str]]:
    """(fusion instruction, fused computation) of every fusion outside fused computations, in graph order."""
    order = computation_order(module)
    fused = {name for comp in order for inst in comp.instructions if inst.opcode == "fusion"
             for name in callees(module, inst)}
    found = []
    for comp in order:
        if comp.name in fused:
            continue
        for inst in instruction_order(module, comp):
            if inst.opcode == "fusion":
                called = callees(module, inst)
                if len(called) != 1:
                    raise HloParseError(module.source, inst.line, f"one calls= computation on fusion {inst.name}",
                                        ", ".join(called))
                found.append((inst.name, called[0]))
    return found


def tile_programs(module: HloModule) -> list[TileProgram]:
    """One TileProgram per fusion (see `fusions`), in graph order."""
    programs = []
    for fusion, computation in fusions(module):
        graph = build_graph(module, root=computation)
        programs.append(TileProgram(f"{module.name}.{fusion}", fusion, graph, tile_kernel(graph),
                                    node_feat_matrix(graph), graph.opcodes(), graph.edge_index()))
    return programs


def layout_configs(program: LayoutProgram, search: str, n_configs: int, params: SearchParams,
                   rng: np.random.Generator, max_config_nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(node_config_ids [k], node_config_feat int8 [n_configs, k, 18]) of the `random` or `default` search.

    k = all configurable nodes, or `max_config_nodes` of them drawn at random; -1 blocks mean compiler default.
    Raises ValueError when the program has no configurable node.
    """
    ids = program.config_node_ids
    if len(ids) == 0:
        raise ValueError(f"{program.name}: {why_no_layout_node(program.graph)}")
    if max_config_nodes is not None and len(ids) > max_config_nodes:
        ids = np.sort(rng.choice(ids, size=max_config_nodes, replace=False))
    default_prob = float(rng.uniform(*params.default_block_prob))
    feat = sample_layout_configs(block_specs(program.graph, ids), n_configs, search, params, default_prob, rng)
    return ids, feat
