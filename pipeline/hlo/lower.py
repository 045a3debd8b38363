"""From parsed HLO text to an `HloGraph` as the official extractor builds it (tpu_graphs `hlo_encoder.cc`).

- Nodes: every instruction of every computation, computations in post order (callees before callers, text order
  otherwise, which is how XLA prints and serialises a module), instructions in text order (a stable topological
  sort fixes any forward reference). Called computations are therefore inlined: a fusion, while, conditional,
  call or reduce is one node of its own, and the instructions of the computations it calls are nodes too.
- Opcodes: the dataset's ids; one newer than its table (`erf`, `topk`) is id 0, as the official extractor writes
  it (`HloGraph.unknown_opcodes` counts them by name).
- Edges: per node, its distinct operands in operand order, then one edge to the root of each computation it calls.
- node_splits: 0, then the running node count after every computation whose name contains "cluster", "while" or
  "cond", then the node count (the official rule).
- Node attributes follow the instruction: shape dims, element type, layout (row-major when the text has none),
  tuple size, parameter number, dimensions (iota_dimension too), window, dim_labels, feature/batch group counts
  (1 on convolutions when not written), slice, dynamic_slice_sizes, padding, is_stable, is_root.
- Dots and convolutions must fit their operands as XLA's verifier requires (two operands; dimension numbers and
  dim_labels within the ranks, a window size per spatial dimension): anything else is an `HloParseError`.
- Numbers as XLA reads them: ASCII int64s; window sizes, strides and dilations, slice strides and group counts >= 1,
  parameter numbers and dimensions >= 0; the sums and products node_feat holds fit its float32.
"""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from pipeline.hlo import attributes as at
from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import HloGraph, HloNode
from pipeline.hlo.text import Computation, HloModule, HloParseError, Instruction, Shape

SPLIT_MARKERS = ("cluster", "while", "cond")
T = TypeVar("T")


def _fail(module: HloModule, inst: Instruction | Computation, expected: str, found: str | None = None):
    return HloParseError(module.source, inst.line, expected, found)


def callees(module: HloModule, inst: Instruction) -> list[str]:
    """Called computation names of `inst`, each checked to exist."""
    try:
        names = at.called_computations(inst)
    except ValueError as err:
        raise _fail(module, inst, str(err)) from None
    for name in names:
        if name not in module.computation_names:
            raise _fail(module, inst, f"a computation defined in the module (called by {inst.name})", name)
    return list(dict.fromkeys(names))


def _post_order(starts: Sequence[T], deps: Callable[[T], list[T]], key: Callable[[T], str],
                cycle: Callable[[T], HloParseError]) -> list[T]:
    """Every item reachable from `starts`, each after its deps, otherwise in start order (iterative DFS)."""
    order: list[T] = []
    state: dict[str, int] = {}                     # 1 on the stack, 2 done
    for start in starts:
        if key(start) in state:
            continue
        state[key(start)] = 1
        stack = [(start, iter(deps(start)))]
        while stack:
            item, pending = stack[-1]
            child = next(pending, None)
            if child is None:
                stack.pop()
                state[key(item)] = 2
                order.append(item)
            elif state.get(key(child)) == 1:
                raise cycle(child)
            elif key(child) not in state:
                state[key(child)] = 1
                stack.append((child, iter(deps(child))))
    return order


def computation_order(module: HloModule, root: str | None = None) -> list[Computation]:
    """Computations callees-first; all of them (root None) or those reachable from `root`."""
    by_name = {c.name: c for c in module.computations}
    return _post_order([by_name[root]] if root is not None else list(module.computations),
                       lambda comp: [by_name[n] for inst in comp.instructions for n in callees(module, inst)],
                       lambda comp: comp.name,
                       lambda comp: _fail(module, comp, f"computations that do not call themselves ({comp.name} "
                                                        f"does, via a cycle)"))


def instruction_order(module: HloModule, comp: Computation) -> list[Instruction]:
    """Text order, moved only where an operand is defined later (stable topological sort)."""
    by_name: dict[str, Instruction] = {}
    for inst in comp.instructions:
        if inst.name in by_name:
            raise _fail(module, inst, f"unique instruction names in computation {comp.name}", inst.name)
        by_name[inst.name] = inst

    def operands(inst: Instruction) -> list[Instruction]:
        missing = [n for n in inst.operands if n not in by_name]
        if missing:
            raise _fail(module, inst, f"operands defined in computation {comp.name}", missing[0])
        return [by_name[n] for n in inst.operands]

    return _post_order(list(comp.instructions), operands, lambda inst: inst.name,
                       lambda inst: _fail(module, inst, f"an acyclic computation ({inst.name} depends on itself)"))


def _shape_fields(shape: Shape) -> dict:
    if shape.is_tuple:
        return {"shape": (), "dtype": "tuple", "tuple_size": len(shape.tuple_shapes), "layout": ()}
    return {"shape": shape.dims, "dtype": shape.element_type, "layout": shape.layout}


def _node_fields(module: HloModule, inst: Instruction, operands: list[Instruction]) -> dict:
    """HloNode keyword arguments decoded from the instruction's attributes."""
    a = inst.attrs
    fields: dict = {}
    try:
        if inst.opcode == "parameter":
            fields["parameter_number"] = at.integer(inst.payload, "a parameter number", low=0)
        if "dimensions" in a:
            fields["dimensions"] = at.int_list(a["dimensions"], low=0)
        if "iota_dimension" in a:
            fields["dimensions"] = (at.integer(a["iota_dimension"], "iota_dimension", low=0),)
        if "window" in a:
            fields["window"] = at.window(a["window"])
        if inst.opcode in ("convolution", "dot"):
            if len(operands) < 2:
                raise ValueError(f"two operands (lhs, rhs) on a {inst.opcode}, found {len(operands)}")
            ranks = [len(o.shape.dims) for o in operands[:2]]
        if inst.opcode == "convolution":
            if "dim_labels" not in a:
                raise ValueError("dim_labels= on a convolution")
            fields["conv"] = at.conv_dims(a["dim_labels"])
            at.check_conv_ranks(fields["conv"], len(fields["window"].size) if "window" in fields else None,
                                (ranks[0], ranks[1], len(inst.shape.dims)))
            fields["feature_group_count"] = at.integer(a.get("feature_group_count", "1"), "feature_group_count", 1)
            fields["batch_group_count"] = at.integer(a.get("batch_group_count", "1"), "batch_group_count", 1)
        if inst.opcode == "dot":
            fields["dot"] = at.dot_dims(a, ranks[0])
            at.check_dot_ranks(fields["dot"], ranks[0], ranks[1])
        if "slice" in a:
            fields["slice"] = at.slice_dims(a["slice"])
        if "dynamic_slice_sizes" in a:
            fields["dynamic_slice_sizes"] = at.int_list(a["dynamic_slice_sizes"], low=0)
        if "padding" in a and inst.opcode == "pad":
            fields["padding"] = at.padding(a["padding"])
        fields["is_stable"] = a.get("is_stable", "false") == "true"
        at.check_float32(fields)
    except ValueError as err:
        raise _fail(module, inst, f"{err} (in {inst.name})") from None
    return fields


def build_graph(module: HloModule, root: str | None = None) -> HloGraph:
    """The module (or the computations reachable from `root`) as an HloGraph; see the module docstring.

    Built once per (module, root) and shared: treat the graph as read-only.
    """
    if root not in module.graphs:
        module.graphs[root] = _build_graph(module, root)
    return module.graphs[root]


def _build_graph(module: HloModule, root: str | None) -> HloGraph:
    comps = computation_order(module, root)
    ordered = [(comp, instruction_order(module, comp)) for comp in comps]
    ids: dict[tuple[str, str], int] = {}
    for comp, insts in ordered:
        for inst in insts:
            ids[comp.name, inst.name] = len(ids)
    root_ids = {comp.name: ids[comp.name, comp.root.name] for comp, _ in ordered}
    nodes, splits, unknown = [], [0], {}
    for comp, insts in ordered:
        by_name = {i.name: i for i in insts}
        root_name = comp.root.name
        for inst in insts:
            if inst.opcode not in op.OPCODE_IDS:         # newer than the dataset (erf, topk, ...): id 0, as the
                unknown[inst.opcode] = unknown.get(inst.opcode, 0) + 1      # official extractor writes it
            operands = [by_name[n] for n in inst.operands]
            called = tuple(root_ids[name] for name in callees(module, inst))
            nodes.append(HloNode(opcode=op.OPCODE_IDS.get(inst.opcode, op.UNKNOWN_OPCODE),
                                 operands=tuple(ids[comp.name, n] for n in inst.operands),
                                 is_root=inst.name == root_name, called_roots=called, name=inst.name,
                                 computation=comp.name,
                                 **_shape_fields(inst.shape), **_node_fields(module, inst, operands)))
        if any(marker in comp.name for marker in SPLIT_MARKERS):
            splits.append(len(nodes))
    return HloGraph(nodes, splits, unknown)
