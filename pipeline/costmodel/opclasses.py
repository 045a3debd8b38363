"""How the cost models treat each HLO opcode of a real program (ids from `pipeline.hlo.opcodes`).

Every opcode falls in exactly one class, checked in this order:
- CONFIGURABLE (`op.CONFIGURABLE`: convolution, dot, reshape): layouts come from the configuration.
- FREE: moves no data (parameter, constant, tuple, get-tuple-element, bitcast, tokens, ids, barriers).
- CONTROL: calls other computations (call, while, conditional, fusion, async); the called instructions are
  nodes of the graph and carry the work, the control node pays only layout hand-over copies.
- ELEMENTWISE: same-shape in, same-shape out; the output takes the layout of its first array operand.
- anything else (reduce, transpose, gather, scatter, slice, pad, concatenate, custom-call, sort, unknown
  opcodes ...): reads and writes row-major and costs its memory traffic.
Instructions of computations applied per element by a reduce-like op (the `to_apply` of reduce, reduce-window,
scatter, select-and-scatter, sort, all-reduce, map) are priced with their caller and cost nothing themselves.
"""
from __future__ import annotations

from pipeline.hlo import opcodes as op


def _ids(*names: str) -> frozenset[int]:
    return frozenset(op.OPCODE_IDS[n] for n in names)


FREE = op.FREE | _ids("bitcast", "after-all", "add-dependency", "opt-barrier", "partition-id", "replica-id",
                      "domain", "get-dimension-size")
CONTROL = _ids("call", "while", "conditional", "fusion", "async-start", "async-update", "async-done")
ELEMENTWISE = op.ELEMENTWISE | _ids(
    "and", "or", "not", "xor", "power", "remainder", "sign", "floor", "ceil", "clamp", "cosine", "sine", "tan",
    "atan2", "cbrt", "exponential-minus-one", "log-plus-one", "is-finite", "round-nearest-afz",
    "round-nearest-even", "reduce-precision", "shift-left", "shift-right-arithmetic", "shift-right-logical",
    "popcnt", "count-leading-zeros", "real", "imag", "complex", "stochastic-convert")
APPLIERS = _ids("reduce", "reduce-window", "scatter", "select-and-scatter", "sort", "all-reduce", "map",
                "reduce-scatter", "all-reduce-start")
