"""Arrays with a size-0 dim (`f32[0,4]`): nothing to lay out or tile, said so, instead of NaN costs."""
from __future__ import annotations

import warnings

import numpy as np

from pipeline.hlo.featurize import (layout_program, parse_module, tile_programs, why_no_layout_node,
                                    why_no_tile_kernel)

EMPTY = """HloModule none, entry_computation_layout={(f32[0,4]{1,0}, f32[4,4]{1,0}, f32[3,4]{1,0})->f32[0,2,2]{2,1,0}}

ENTRY main.6 {
  a.1 = f32[0,4]{1,0} parameter(0)
  b.2 = f32[4,4]{1,0} parameter(1)
  c.3 = f32[3,4]{1,0} parameter(2)
  dot.4 = f32[0,4]{1,0} dot(a.1, b.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  dot.5 = f32[3,4]{1,0} dot(c.3, b.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT reshape.6 = f32[0,2,2]{2,1,0} reshape(dot.4)
}
"""

EMPTY_FUSED = """HloModule none, is_scheduled=true

%fused_dot (p.0: f32[0,4], p.1: f32[4,4]) -> f32[0,4] {
  %p.0 = f32[0,4]{1,0} parameter(0)
  %p.1 = f32[4,4]{1,0} parameter(1)
  ROOT %d.1 = f32[0,4]{1,0} dot(%p.0, %p.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_tanh (q.0: f32[0,4]) -> f32[0,4] {
  %q.0 = f32[0,4]{1,0} parameter(0)
  ROOT %t.1 = f32[0,4]{1,0} tanh(%q.0)
}

ENTRY %main.4 (a.1: f32[0,4], b.2: f32[4,4]) -> f32[0,4] {
  %a.1 = f32[0,4]{1,0} parameter(0)
  %b.2 = f32[4,4]{1,0} parameter(1)
  %dot_fusion = f32[0,4]{1,0} fusion(%a.1, %b.2), kind=kOutput, calls=%fused_dot
  ROOT %tanh_fusion = f32[0,4]{1,0} fusion(%dot_fusion), kind=kLoop, calls=%fused_tanh
}
"""


def test_a_dot_or_reshape_of_zero_elements_is_no_configurable_node():
    """A zero-element dot and reshape were configurable: autotune predicted a 1.577x speed-up from their layouts
    on a program that computes nothing. Only the dot with elements is configurable now."""
    program = layout_program(parse_module(EMPTY, "none.hlo.txt"))
    assert [program.graph.nodes[i].name for i in program.config_node_ids] == ["dot.5"]
    alone = layout_program(parse_module(EMPTY.replace("  dot.5 = f32[3,4]{1,0} dot(c.3, b.2), lhs_contracting_dims="
                                                      "{1}, rhs_contracting_dims={0}\n", ""), "none.hlo.txt"))
    assert len(alone.config_node_ids) == 0
    assert why_no_layout_node(alone.graph) == (
        "no configurable node: its 2 convolution, dot or reshape node(s) are none with elements to lay out (an array "
        "with a size-0 dim costs the same in any layout; dot.4: shapes [[0, 4], [0, 4], [4, 4]])")


def test_a_fusion_of_zero_elements_gives_no_tile_graph_and_no_nan():
    """Its tiles were [0, 4]: the tile cost model divided 0 by 0 (`RuntimeWarning: invalid value encountered in
    divide`) choosing the compiler default, and autotune scored NaN-costed tiles."""
    module = parse_module(EMPTY_FUSED, "none_opt.hlo.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tile_programs(module) == []
    assert why_no_tile_kernel(module) == (
        "no fused kernel to tile: its 2 fusion(s) compute arrays with a size-0 dim (dot_fusion), which cost the same "
        "in any tiling")
    text = EMPTY_FUSED.replace("[0,4]", "[2,4]").replace("f32[0,4]", "f32[2,4]")
    kept = tile_programs(parse_module(text, "two_opt.hlo.txt"))
    assert [p.fusion for p in kept] == ["dot_fusion", "tanh_fusion"]
    assert all(np.prod(p.kernel.out_shape) == 8 for p in kept)


def test_a_module_without_fusion_is_told_to_give_optimised_text_unless_it_is_optimised():
    assert why_no_tile_kernel(parse_module(EMPTY, "none.hlo.txt")) == (
        "no fused kernel (tile needs optimised HLO such as .compile().as_text())")
    scheduled = EMPTY.replace("HloModule none,", "HloModule none, is_scheduled=true,")
    assert why_no_tile_kernel(parse_module(scheduled, "none_opt.hlo.txt")) == (
        "no fused kernel (XLA fused nothing in this optimised module)")
