"""Small hand-written HLO modules for the tuning tests (names as XLA writes them), and their spaces."""
from __future__ import annotations

from pipeline.hlo.featurize import layout_program, parse_module
from pipeline.tuning.space import LayoutSpace

DOT_RESHAPE = """HloModule tiny, entry_computation_layout={(f32[8,16]{1,0}, f32[16,32]{1,0})->f32[4,64]{1,0}}

ENTRY main.5 {
  Arg_0.1 = f32[8,16]{1,0} parameter(0)
  Arg_1.2 = f32[16,32]{1,0} parameter(1)
  dot.3 = f32[8,32]{1,0} dot(Arg_0.1, Arg_1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  tanh.4 = f32[8,32]{1,0} tanh(dot.3)
  ROOT reshape.5 = f32[4,64]{1,0} reshape(tanh.4)
}
"""

RESHAPES = """HloModule chain, entry_computation_layout={(f32[2,3,4,5]{3,2,1,0})->f32[5,4,3,2]{3,2,1,0}}

ENTRY main.9 {
  Arg_0.1 = f32[2,3,4,5]{3,2,1,0} parameter(0)
  reshape.2 = f32[3,2,5,4]{3,2,1,0} reshape(Arg_0.1)
  tanh.3 = f32[3,2,5,4]{3,2,1,0} tanh(reshape.2)
  reshape.4 = f32[4,5,2,3]{3,2,1,0} reshape(tanh.3)
  tanh.5 = f32[4,5,2,3]{3,2,1,0} tanh(reshape.4)
  reshape.6 = f32[2,5,3,4]{3,2,1,0} reshape(tanh.5)
  tanh.7 = f32[2,5,3,4]{3,2,1,0} tanh(reshape.6)
  ROOT reshape.8 = f32[5,4,3,2]{3,2,1,0} reshape(tanh.7)
}
"""

NO_CONFIGURABLE = """HloModule plain, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}

ENTRY main.3 {
  Arg_0.1 = f32[8,16]{1,0} parameter(0)
  ROOT tanh.2 = f32[8,16]{1,0} tanh(Arg_0.1)
}
"""


def space_of(text: str) -> LayoutSpace:
    """The configuration space of a module text (RESHAPES: 4 reshapes of rank 4, 8 free blocks of 25 choices)."""
    program = layout_program(parse_module(text, "test"))
    return LayoutSpace.of(program.graph, program.config_node_ids, "test")


NARROW_DOT = """HloModule narrow, entry_computation_layout={(f32[256,64]{1,0}, f32[64,4]{1,0})->f32[256,4]{1,0}}

ENTRY main.5 {
  Arg_0.1 = f32[256,64]{1,0} parameter(0)
  Arg_1.2 = f32[64,4]{1,0} parameter(1)
  dot.3 = f32[256,4]{1,0} dot(Arg_0.1, Arg_1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  tanh.4 = f32[256,4]{1,0} tanh(dot.3)
  ROOT reshape.5 = f32[4,256]{1,0} reshape(tanh.4)
}
"""

KINDS_CHAIN = """HloModule kinds, entry_computation_layout={(f32[4,6]{1,0})->f32[6,4]{1,0}}

ENTRY main.7 {
  Arg_0.1 = f32[4,6]{1,0} parameter(0)
  reshape.2 = f32[2,2,6]{2,1,0} reshape(Arg_0.1)
  tanh.3 = f32[2,2,6]{2,1,0} tanh(reshape.2)
  reshape.4 = f32[4,6]{1,0} reshape(tanh.3)
  tanh.5 = f32[4,6]{1,0} tanh(reshape.4)
  tanh.6 = f32[4,6]{1,0} tanh(tanh.5)
  ROOT reshape.7 = f32[6,4]{1,0} reshape(tanh.6)
}
"""
