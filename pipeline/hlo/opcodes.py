"""HLO opcode ids used by the synthetic templates, from the official `LEARNED_HLO_OPCODE_LIST`.

The ids are the dataset's own (tpu_graphs `process_data/xla/hlo_opcode.h`), not XLA's enum; 0 means unknown.
Only the opcodes the templates emit are named here, plus the op categories the cost models need.
"""
from __future__ import annotations

ABS = 1
ADD = 2
BROADCAST = 13
COMPARE = 20
CONCATENATE = 22
CONSTANT = 24
CONVERT = 25
CONVOLUTION = 26
COPY = 27
DIVIDE = 32
DOT = 34
EXPONENTIAL = 37
FUSION = 41
GATHER = 42
GET_TUPLE_ELEMENT = 45
IOTA = 48
LOG = 50
MAXIMUM = 57
MINIMUM = 58
MULTIPLY = 59
NEGATE = 60
PAD = 62
PARAMETER = 63
REDUCE = 70
REDUCE_WINDOW = 72
RESHAPE = 75
RSQRT = 81
SELECT = 83
SLICE = 92
SQRT = 94
SUBTRACT = 95
TANH = 96
TRANSPOSE = 98
TUPLE = 100
LOGISTIC = 107

# Ops whose output takes the layout of their first operand (layout propagates through them).
ELEMENTWISE = frozenset({ABS, ADD, COMPARE, CONVERT, DIVIDE, EXPONENTIAL, LOG, MAXIMUM, MINIMUM, MULTIPLY, NEGATE,
                         RSQRT, SELECT, SQRT, SUBTRACT, TANH, LOGISTIC, COPY})
# Ops the compiler can materialise directly in whatever layout their consumer wants (no transpose copy).
LAYOUT_FLEXIBLE = frozenset({BROADCAST, CONSTANT, IOTA})
# Ops whose layouts the layout collections configure (one 18-d config row per node).
CONFIGURABLE = frozenset({CONVOLUTION, DOT, RESHAPE})
# Ops that move no data and cost nothing at runtime.
FREE = frozenset({PARAMETER, CONSTANT, TUPLE, GET_TUPLE_ELEMENT})
