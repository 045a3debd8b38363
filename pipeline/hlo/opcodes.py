"""HLO opcodes by name for the HLO side of the pipeline: the dataset's ids (pipeline/tpugraphs/opcodes.py, the one
table), named constants for the opcodes the templates, the featurizer and the cost models refer to, and the op
categories the cost models need.
"""
from __future__ import annotations

from pipeline.tpugraphs.opcodes import OPCODE_IDS, OPCODE_NAMES, opcode_id

__all__ = ["OPCODE_IDS", "OPCODE_NAMES", "opcode_id"]   # the table, re-exported for `op.OPCODE_IDS[...]`

UNKNOWN_OPCODE = 0      # an opcode outside the dataset's table (newer XLA): the id the official extractor writes
ABS = OPCODE_IDS["abs"]
ADD = OPCODE_IDS["add"]
BITCAST = OPCODE_IDS["bitcast"]
BROADCAST = OPCODE_IDS["broadcast"]
CALL = OPCODE_IDS["call"]
COMPARE = OPCODE_IDS["compare"]
CONCATENATE = OPCODE_IDS["concatenate"]
CONDITIONAL = OPCODE_IDS["conditional"]
CONSTANT = OPCODE_IDS["constant"]
CONVERT = OPCODE_IDS["convert"]
CONVOLUTION = OPCODE_IDS["convolution"]
COPY = OPCODE_IDS["copy"]
CUSTOM_CALL = OPCODE_IDS["custom-call"]
DIVIDE = OPCODE_IDS["divide"]
DOT = OPCODE_IDS["dot"]
DYNAMIC_SLICE = OPCODE_IDS["dynamic-slice"]
EXPONENTIAL = OPCODE_IDS["exponential"]
FUSION = OPCODE_IDS["fusion"]
GATHER = OPCODE_IDS["gather"]
GET_TUPLE_ELEMENT = OPCODE_IDS["get-tuple-element"]
IOTA = OPCODE_IDS["iota"]
LOG = OPCODE_IDS["log"]
MAXIMUM = OPCODE_IDS["maximum"]
MINIMUM = OPCODE_IDS["minimum"]
MULTIPLY = OPCODE_IDS["multiply"]
NEGATE = OPCODE_IDS["negate"]
PAD = OPCODE_IDS["pad"]
PARAMETER = OPCODE_IDS["parameter"]
REDUCE = OPCODE_IDS["reduce"]
REDUCE_WINDOW = OPCODE_IDS["reduce-window"]
RESHAPE = OPCODE_IDS["reshape"]
RSQRT = OPCODE_IDS["rsqrt"]
SELECT = OPCODE_IDS["select"]
SLICE = OPCODE_IDS["slice"]
SQRT = OPCODE_IDS["sqrt"]
SUBTRACT = OPCODE_IDS["subtract"]
TANH = OPCODE_IDS["tanh"]
TRANSPOSE = OPCODE_IDS["transpose"]
TUPLE = OPCODE_IDS["tuple"]
WHILE = OPCODE_IDS["while"]
LOGISTIC = OPCODE_IDS["logistic"]

# Ops whose output takes the layout of their first operand (layout propagates through them).
ELEMENTWISE = frozenset({ABS, ADD, COMPARE, CONVERT, DIVIDE, EXPONENTIAL, LOG, MAXIMUM, MINIMUM, MULTIPLY, NEGATE,
                         RSQRT, SELECT, SQRT, SUBTRACT, TANH, LOGISTIC, COPY})
# Ops the compiler can materialise directly in whatever layout their consumer wants (no transpose copy).
LAYOUT_FLEXIBLE = frozenset({BROADCAST, CONSTANT, IOTA})
# Ops whose layouts the layout collections configure (one 18-d config row per node).
CONFIGURABLE = frozenset({CONVOLUTION, DOT, RESHAPE})
# Ops that move no data and cost nothing at runtime.
FREE = frozenset({PARAMETER, CONSTANT, TUPLE, GET_TUPLE_ELEMENT})
