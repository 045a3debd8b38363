"""HLO text -> TpuGraphs graphs: one layout program per module, one tile program per fused kernel.

Public API (used by `pipeline.featurizer` and by the built-in dataset generator):
- `parse_module(text, source)`: the parsed, fully checked module (raises `HloParseError` naming the line).
- `layout_program(module)`: the whole module as one graph (every computation's instructions, see
  `pipeline.hlo.lower`) with its 140 node_feat columns and the nodes the compiler may assign layouts to.
- `tile_programs(module)`: one graph per fusion outside fused computations (its fused computation and what that
  calls), with the `TileKernel` the tile cost model needs. A module without fusions (unoptimised text) has none.
- `layout_configs(...)`: candidate node_config_feat rows (tile config_feat rows: `pipeline.featurizer.tile_configs`).

Configurable nodes (layout): convolutions, dots and reshapes (`opcodes.CONFIGURABLE`, the ones the layout cost
model prices) of rank 1..6 whose operands have rank <= 6 (a config block holds 6 dims), in any computation, with no
array of a size-0 dim among them; a fusion of zero output elements gives no tile program (nothing to tile).
Layout graphs are most faithful from unoptimised text (`.lower(...).as_text(dialect="hlo")`,
`*.before_optimizations.txt`), as layout assignment runs before fusion; tile graphs need optimised text.
"""
from __future__ import annotations

import os
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import PipelineError
from pipeline.hlo import opcodes as op
from pipeline.hlo.configs import SearchParams, block_specs, sample_layout_configs
from pipeline.hlo.graph import HloGraph
from pipeline.hlo.kernel import TileKernel, tile_kernel
from pipeline.hlo.lower import build_graph, callees, computation_order, instruction_order
from pipeline.hlo.node_features import node_feat_matrix
from pipeline.hlo.text import HloModule, HloParseError, parse_text

__all__ = ["HloModule", "HloParseError", "LayoutProgram", "TileProgram", "SearchParams",
           "read_hlo_text", "parse_module", "layout_program", "tile_programs", "layout_configs", "configurable_nodes",
           "why_no_layout_node", "why_no_tile_kernel"]

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


FIFO_WAIT_S = 30.0      # how long a named pipe may stay without a writer before it is refused
FIFO_POLL_S = 0.1       # how often an unconnected pipe is looked at again meanwhile


def _read_fifo(path: Path) -> bytes:
    """The bytes of a pipe (`mkfifo`, `<(...)`): opened without blocking; once a program holds its other end, read
    to the end however long that program takes; refused when none does within FIFO_WAIT_S (a plain open waited for
    a writer forever)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        waited = 0.0
        while True:
            try:
                first = os.read(fd, 1 << 16)
            except BlockingIOError:              # a writer holds the pipe, nothing written yet
                first = None
            if first != b"":                     # data, or a live writer: read to its end
                break
            if waited >= FIFO_WAIT_S:            # end of file: no writer (yet, or any more)
                raise PipelineError(f"{path}: cannot read HLO text (a pipe no program wrote to in {FIFO_WAIT_S:g} "
                                    f"s); expected a file, or a pipe a program writes")
            time.sleep(FIFO_POLL_S)
            waited += FIFO_POLL_S
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as pipe:
            return (first or b"") + pipe.read()
    finally:
        os.close(fd)


def read_hlo_text(path: Path) -> str:
    """The UTF-8 text of an HLO file (a pipe, `<(...)`, too); PipelineError naming the file when it cannot be read,
    is a device (`/dev/zero` and `/dev/urandom` never end: reading one would not stop before the memory ran out) or
    is not UTF-8 (the line of the first bad byte)."""
    try:
        mode = Path(path).stat().st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise PipelineError(f"{path}: cannot read HLO text (a device, not a file)")
        data = _read_fifo(path) if stat.S_ISFIFO(mode) else Path(path).read_bytes()
    except OSError as err:
        raise PipelineError(f"{path}: cannot read HLO text ({err.strerror or err})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise PipelineError(f"{path}:{line}: cannot read HLO text (not UTF-8: byte 0x{data[err.start]:02x})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")       # line ends as a text-mode read gives them


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


def _not_configurable(graph: HloGraph, node) -> str | None:
    """Why a convolution, dot or reshape is no configurable node (None when it is one)."""
    ranks = [node.rank, *(graph.nodes[o].rank for o in node.operands)]
    if not 1 <= node.rank <= MAX_LAYOUT_RANK or node.dtype == "tuple" or max(ranks) > MAX_LAYOUT_RANK:
        return (f"none of rank 1-{MAX_LAYOUT_RANK} with operands of rank <= {MAX_LAYOUT_RANK} (a layout block "
                f"holds {MAX_LAYOUT_RANK} dims; {node.name or 'the first'}: ranks {ranks})")
    if len(node.operands) < (2 if node.opcode in (op.CONVOLUTION, op.DOT) else 1) \
            or (node.opcode == op.CONVOLUTION and node.conv is None):
        return f"none with its operands and dimension numbers ({node.name or 'the first'})"
    arrays = [node, *(graph.nodes[o] for o in node.operands)]
    if any(a.empty for a in arrays):
        return (f"none with elements to lay out (an array with a size-0 dim costs the same in any layout; "
                f"{node.name or 'the first'}: shapes {[list(a.shape) for a in arrays]})")
    return None


def configurable_nodes(graph: HloGraph) -> np.ndarray:
    """int64 [NC] sorted ids of the nodes whose layouts a configuration sets (see the module docstring): the
    convolutions, dots and reshapes of rank 1-6 with operands of rank <= 6 and no array of zero elements among
    them (an `f32[0,4]` costs nothing in any layout)."""
    ids = [i for i, n in enumerate(graph.nodes)
           if n.opcode in op.CONFIGURABLE and _not_configurable(graph, n) is None]
    return np.array(ids, dtype=np.int64)


def why_no_layout_node(graph: HloGraph) -> str:
    """Why `configurable_nodes(graph)` is empty, for one-line errors: no convolution, dot or reshape at all, or why
    the first one is none (its rank: a layout block holds MAX_LAYOUT_RANK dims; zero elements)."""
    candidates = [n for n in graph.nodes if n.opcode in op.CONFIGURABLE]
    if not candidates:
        return "no configurable node (convolution, dot, reshape) to lay out"
    return (f"no configurable node: its {len(candidates)} convolution, dot or reshape node(s) are "
            f"{_not_configurable(graph, candidates[0])}")


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
    """One TileProgram per fusion (see `fusions`), in graph order; a fusion whose output has a size-0 dim has
    nothing to tile and gives none (`why_no_tile_kernel`)."""
    programs = []
    for fusion, computation in fusions(module):
        graph = build_graph(module, root=computation)
        kernel = tile_kernel(graph)
        if 0 in kernel.out_shape:
            continue
        programs.append(TileProgram(f"{module.name}.{fusion}", fusion, graph, kernel,
                                    node_feat_matrix(graph), graph.opcodes(), graph.edge_index()))
    return programs


def why_no_tile_kernel(module: HloModule) -> str:
    """Why `tile_programs(module)` is empty, for one-line messages: no fusion (unoptimised text, or an optimised one
    where XLA fused nothing), or only fusions of zero elements."""
    found = fusions(module)
    if not found and module.scheduled:
        return "no fused kernel (XLA fused nothing in this optimised module)"
    if not found:
        return "no fused kernel (tile needs optimised HLO such as .compile().as_text())"
    return (f"no fused kernel to tile: its {len(found)} fusion(s) compute arrays with a size-0 dim "
            f"({found[0][0]}), which cost the same in any tiling")


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
