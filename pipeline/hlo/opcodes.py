"""HLO opcode ids of the TpuGraphs dataset (the official `LEARNED_HLO_OPCODE_LIST`), by HLO text name.

The ids are the dataset's own (tpu_graphs `process_data/xla/hlo_opcode.h`), not XLA's enum: 118 learned opcodes
with ids 1..120 plus the two removed ("tombstone") ones, 97 trace and 101 tuple-select. The official extractor
writes 0 for any other opcode; `opcode_id` refuses one instead. Named constants below are the opcodes the
templates, the featurizer and the cost models refer to, plus the op categories the cost models need.
"""
from __future__ import annotations

OPCODE_IDS: dict[str, int] = {
    "abs": 1, "add": 2, "add-dependency": 3, "after-all": 4, "all-reduce": 5, "all-to-all": 6, "atan2": 7,
    "batch-norm-grad": 8, "batch-norm-inference": 9, "batch-norm-training": 10, "bitcast": 11,
    "bitcast-convert": 12, "broadcast": 13, "call": 14, "ceil": 15, "cholesky": 16, "clamp": 17,
    "collective-permute": 18, "count-leading-zeros": 19, "compare": 20, "complex": 21, "concatenate": 22,
    "conditional": 23, "constant": 24, "convert": 25, "convolution": 26, "copy": 27, "copy-done": 28,
    "copy-start": 29, "cosine": 30, "custom-call": 31, "divide": 32, "domain": 33, "dot": 34, "dynamic-slice": 35,
    "dynamic-update-slice": 36, "exponential": 37, "exponential-minus-one": 38, "fft": 39, "floor": 40,
    "fusion": 41, "gather": 42, "get-dimension-size": 43, "set-dimension-size": 44, "get-tuple-element": 45,
    "imag": 46, "infeed": 47, "iota": 48, "is-finite": 49, "log": 50, "log-plus-one": 51, "and": 52, "not": 53,
    "or": 54, "xor": 55, "map": 56, "maximum": 57, "minimum": 58, "multiply": 59, "negate": 60, "outfeed": 61,
    "pad": 62, "parameter": 63, "partition-id": 64, "popcnt": 65, "power": 66, "real": 67, "recv": 68,
    "recv-done": 69, "reduce": 70, "reduce-precision": 71, "reduce-window": 72, "remainder": 73, "replica-id": 74,
    "reshape": 75, "reverse": 76, "rng": 77, "rng-get-and-update-state": 78, "rng-bit-generator": 79,
    "round-nearest-afz": 80, "rsqrt": 81, "scatter": 82, "select": 83, "select-and-scatter": 84, "send": 85,
    "send-done": 86, "shift-left": 87, "shift-right-arithmetic": 88, "shift-right-logical": 89, "sign": 90,
    "sine": 91, "slice": 92, "sort": 93, "sqrt": 94, "subtract": 95, "tanh": 96, "trace": 97, "transpose": 98,
    "triangular-solve": 99, "tuple": 100, "tuple-select": 101, "while": 102, "cbrt": 103, "all-gather": 104,
    "collective-permute-start": 105, "collective-permute-done": 106, "logistic": 107, "dynamic-reshape": 108,
    "all-reduce-start": 109, "all-reduce-done": 110, "reduce-scatter": 111, "all-gather-start": 112,
    "all-gather-done": 113, "opt-barrier": 114, "async-start": 115, "async-update": 116, "async-done": 117,
    "round-nearest-even": 118, "stochastic-convert": 119, "tan": 120,
}
OPCODE_NAMES: dict[int, str] = {i: name for name, i in OPCODE_IDS.items()}


def opcode_id(name: str) -> int:
    """The dataset id of an HLO opcode name, e.g. "dot" -> 34; KeyError for a name outside the official list."""
    return OPCODE_IDS[name]


ABS = 1
ADD = 2
BITCAST = 11
BROADCAST = 13
CALL = 14
COMPARE = 20
CONCATENATE = 22
CONDITIONAL = 23
CONSTANT = 24
CONVERT = 25
CONVOLUTION = 26
COPY = 27
CUSTOM_CALL = 31
DIVIDE = 32
DOT = 34
DYNAMIC_SLICE = 35
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
WHILE = 102
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
