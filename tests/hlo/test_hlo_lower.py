"""HLO text -> HloGraph on hand-written modules: node order, edges, node_splits, roots, features, errors."""
from __future__ import annotations

import dataclasses
import re
import time

import numpy as np
import pytest

from pipeline.hlo import opcodes as op
from pipeline.hlo.featurize import layout_program, parse_module
from pipeline.hlo.node_features import node_row, with_layouts
from pipeline.tpugraphs.schema import NODE_FEAT_NAMES
from pipeline.hlo.text import HloParseError

# The style `jax.jit(f).lower(...).as_text(dialect="hlo")` prints: bare names, no signatures.
LOWERED = """HloModule tiny, entry_computation_layout={(f32[2,4]{1,0}, f32[4,3]{1,0})->f32[2]{0}}

add_region {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[2,4]{1,0} parameter(0)
  w = f32[4,3]{1,0} parameter(1)
  d = f32[2,3]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  m = f32[2,3]{1,0} multiply(d, d)
  zero = f32[] constant(0)
  ROOT r = f32[2]{0} reduce(m, zero), dimensions={1}, to_apply=add_region
}
"""

# The style `.compile().as_text()` prints: % names, operand shapes, tiled layouts, metadata blocks, comments.
COMPILED = """HloModule jit_g, is_scheduled=true, entry_computation_layout={(f32[8,16]{1,0})->(f32[8,16]{0,1}, s32[])}

FileNames
1 "/tmp/g.py"

FunctionNames
1 "g"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=0}

%fused_computation (param_0: f32[8,16]) -> f32[8,16] {
  %param_0 = f32[8,16]{1,0} parameter(0)
  %constant.1 = f32[] constant(2)
  %broadcast.1 = f32[8,16]{1,0} broadcast(f32[] %constant.1), dimensions={}
  ROOT %multiply.1 = f32[8,16]{1,0} multiply(f32[8,16]{1,0} %param_0, f32[8,16]{1,0} %broadcast.1), metadata={op_name="jit(g)/mul, \\"x\\"" stack_frame_id=1}
}

%while_body (state: (s32[], f32[8,16])) -> (s32[], f32[8,16]) {
  %state = (s32[], f32[8,16]{1,0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[8,16]{1,0}) %state), index=0
  %v = f32[8,16]{1,0} get-tuple-element(%state), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %fusion = f32[8,16]{1,0} fusion(%v), kind=kLoop, calls=%fused_computation
  ROOT %out = (s32[], f32[8,16]{1,0}) tuple(%next, %fusion)
}

%cond_computation (state.1: (s32[], f32[8,16])) -> pred[] {
  %state.1 = (s32[], f32[8,16]{1,0}) parameter(0)
  %i.1 = s32[] get-tuple-element(%state.1), index=0
  %three = s32[] constant(3)
  ROOT %lt = pred[] compare(%i.1, %three), direction=LT
}

ENTRY %main.9 (x: f32[8,16]) -> (f32[8,16], s32[]) {
  %x = f32[8,16]{1,0:T(8,128)} parameter(0), metadata={op_name="x"}
  %zero = s32[] constant(0)
  %init = (s32[], f32[8,16]{1,0}) tuple(%zero, %x)
  %loop = (s32[], f32[8,16]{1,0}) while(%init), condition=%cond_computation, body=%while_body,
      backend_config={"known_trip_count":{"n":"3"}}
  %v.1 = f32[8,16]{0,1} get-tuple-element(%loop), index=1
  %n = s32[] get-tuple-element(%loop), index=0
  ROOT %res = (f32[8,16]{0,1}, /*index=1*/s32[]) tuple(%v.1, /*index=1*/%n)
}
"""


def names(graph):
    return [n.name for n in graph.nodes]


def test_lowered_module_nodes_edges_and_configurable_nodes():
    program = layout_program(parse_module(LOWERED, "tiny.hlo"))
    assert names(program.graph) == ["a", "b", "s", "x", "w", "d", "m", "zero", "r"]   # callees first
    assert program.node_opcode.tolist() == [op.PARAMETER, op.PARAMETER, op.ADD, op.PARAMETER, op.PARAMETER, op.DOT,
                                            op.MULTIPLY, op.CONSTANT, op.REDUCE]
    # distinct operands in operand order, then the root of the called computation (reduce -> s)
    assert program.edge_index.tolist() == [[2, 0], [2, 1], [5, 3], [5, 4], [6, 5], [8, 6], [8, 7], [8, 2]]
    assert program.node_splits.tolist() == [0, 9]
    assert program.config_node_ids.tolist() == [5]                                 # the dot
    feat = program.node_feat
    assert np.flatnonzero(feat[:, 0]).tolist() == [2, 8]                           # root of each computation
    x, w, zero, r = feat[3], feat[4], feat[7], feat[8]
    assert x[13] == 1 and x[2:21].sum() == 1                                       # f32 one-hot
    assert x[21:29].tolist() == [2, 4, 0, 0, 0, 0, 6, 8] and x[30] == 0 and w[30] == 1
    assert x[134:140].tolist() == [1, 0, 0, 0, 0, 0]
    assert zero[21:29].tolist() == [0] * 6 + [0, 1]                                # scalar: sum 0, product 1
    assert r[31:37].tolist() == [1, 0, 0, 0, 0, 0]                                 # reduce dimensions={1}
    assert feat[5][44] == 1 and feat[5][43] == 0                                   # no window: product 1


def test_with_layouts_rewrites_only_the_layout_columns_zero_padded():
    feat = layout_program(parse_module(LOWERED, "tiny.hlo")).node_feat
    recorded = [(0, 1) if i == 3 else tuple(range(int((feat[i, 21:27] > 0).sum()) - 1, -1, -1))
                for i in range(len(feat))]
    out = with_layouts(feat, recorded)
    assert out[3, 134:140].tolist() == [0, 1, 0, 0, 0, 0]                       # x transposed: dim 0 minor
    assert out[7, 134:140].tolist() == [0] * 6                                   # scalar: no dims
    assert np.array_equal(np.delete(out, np.s_[134:140], 1), np.delete(feat, np.s_[134:140], 1))
    assert feat[3, 134:136].tolist() == [1, 0]                                   # the input is not modified
    with pytest.raises(ValueError, match="2 layouts for 9 nodes"):
        with_layouts(feat, recorded[:2])


def test_compiled_module_inlines_called_computations():
    program = layout_program(parse_module(COMPILED, "g.hlo"))
    assert names(program.graph) == ["param_0", "constant.1", "broadcast.1", "multiply.1",
                                    "state", "i", "v", "one", "next", "fusion", "out",
                                    "state.1", "i.1", "three", "lt",
                                    "x", "zero", "init", "loop", "v.1", "n", "res"]
    edges = [tuple(e) for e in program.edge_index.tolist()]
    assert (9, 6) in edges and (9, 3) in edges                                     # fusion -> operand, fused root
    assert edges[edges.index((18, 17)):edges.index((18, 17)) + 3] == [(18, 17), (18, 10), (18, 14)]  # body, cond
    assert edges[-2:] == [(21, 19), (21, 20)]
    assert len(edges) == len(set(edges))
    # official rule: a split after every computation named *cluster*/*while*/*cond*, then the node count
    assert program.node_splits.tolist() == [0, 11, 15, 22]
    feat = program.node_feat
    assert np.flatnonzero(feat[:, 0]).tolist() == [3, 10, 14, 21]
    res, loop, v1, x = feat[21], feat[18], feat[19], feat[15]
    assert res[18] == 1 and res[29] == 2 and res[21:29].tolist() == [0] * 6 + [0, 1]   # tuple of 2
    assert loop[18] == 1 and loop[29] == 2
    assert v1[134:136].tolist() == [0, 1] and x[134:136].tolist() == [1, 0]       # layouts as written
    assert feat[14][3] == 1                                                        # pred one-hot
    assert program.config_node_ids.tolist() == []


def test_forward_references_are_reordered_topologically():
    text = LOWERED.replace("  d = f32[2,3]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n", "")
    text = text.replace("  ROOT r =", "  d = f32[2,3]{1,0} dot(x, w), lhs_contracting_dims={1}, "
                                     "rhs_contracting_dims={0}\n  ROOT r =")
    assert names(layout_program(parse_module(text)).graph) == ["a", "b", "s", "x", "w", "d", "m", "zero", "r"]


def test_entry_first_still_orders_callees_first():
    entry = LOWERED[LOWERED.index("ENTRY"):]
    region = LOWERED[LOWERED.index("add_region"):LOWERED.index("ENTRY")]
    text = LOWERED[:LOWERED.index("add_region")] + entry + "\n" + region
    assert names(layout_program(parse_module(text)).graph)[:3] == ["a", "b", "s"]


@pytest.mark.parametrize("old, new, line, expected", [
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[?,3]{1,0} multiply(d, d)", 13, "static or bounded dimension sizes"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[2,3]{1,0} multiply(d, q)", 13, "operands defined in computation"),
    ("to_apply=add_region", "to_apply=nowhere", 15, "a computation defined in the module"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[2,3]{1,0} multiply(d, d", 13, "a complete instruction"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[2,3]{1,0}", 13, "an opcode followed by '('"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = q32[2,3]{1,0} multiply(d, d)", 13, "a shape"),
    ("dimensions={1}", "dimensions={one}", 15, "a list of integers"),
    ("HloModule tiny", "Module tiny", 1, "'HloModule NAME, ...' as the first line"),
    ("parameter(1)\n  d", "parameter(1\x00)\n  d", 11,                     # not int()'s words
     "a parameter number >= 0 (within int64), found '1\\x00' (in w)"),
    ("parameter(1)\n  d", "parameter(" + "9" * 400 + ")\n  d", 11,            # was an OverflowError in node_row
     "a parameter number >= 0 (within int64), found '99999"),
    ("parameter(1)\n  d", "parameter(-1)\n  d", 11, "a parameter number >= 0"),
    ("dimensions={1}", "dimensions={" + "9" * 400 + "}", 15, "a list of integers {0,1,...} (int64s >= 0) (in r)"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[2,٣]{1,0} multiply(d, d)", 13,     # was read as 3
     "a dimension size (a non-negative integer), found '٣'"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[2,³]{1,0} multiply(d, d)", 13,     # was int()'s ValueError
     "a dimension size (a non-negative integer), found '³'"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[2," + "9" * 5000 + "]{1,0} multiply(d, d)", 13,   # int() raised
     "a shape of at most 9223372036854775807 elements"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[2,3]{٣,0} multiply(d, d)", 13, "a layout {minor-to-major dims}"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[2,3]{1,-0} multiply(d, d)", 13, "a layout {minor-to-major dims}"),
    ("to_apply=add_region", "to_apply=add_region, window={size=1x1x1 pad=" + "x".join(["0_" + "1" * 19] * 3) + "}",
     15, "window pad_high whose sum and product fit node_feat's float32"),   # was an inf feature, a RuntimeWarning
    ("lhs_contracting_dims={1}", "lhs_contracting_dims={2}", 12,       # was an IndexError in a fused kernel
     "lhs contracting and batch dimensions distinct and below the lhs operand's rank 2, found 2 (in d)"),
    ("dot(x, w)", "dot(x)", 12, "two operands (lhs, rhs) on a dot, found 1 (in d)"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[9999999999999999999,3]{1,0} multiply(d, d)", 13,   # > int64
     "a shape of at most 9223372036854775807 elements (XLA's int64 sizes), found 'f32[9999999999999999999,3]'"),
    ("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[4294967296,4294967296]{1,0} multiply(d, d)", 13,   # 2^64 elements
     "a shape of at most 9223372036854775807 elements"),
])
def test_errors_name_the_source_and_line(old, new, line, expected):
    assert old in LOWERED
    with pytest.raises(HloParseError) as err:
        parse_module(LOWERED.replace(old, new), "prog.hlo.txt")
    message = str(err.value)
    assert message.startswith(f"prog.hlo.txt:{line}: expected {expected}") and "\n" not in message
    assert err.value.line == line


def test_a_byte_order_mark_and_windows_line_ends_are_not_part_of_the_text():
    assert parse_module("\ufeff" + LOWERED, "bom.hlo.txt") == parse_module(LOWERED, "bom.hlo.txt")
    assert parse_module(LOWERED.replace("\n", "\r\n"), "bom.hlo.txt") == parse_module(LOWERED, "bom.hlo.txt")


def test_line_comments_before_the_module_header_are_skipped_as_xla_skips_them():
    commented = "// dumped by jax 0.4 for model x\n\n  // RUN: hlo-opt %s\n" + LOWERED
    assert parse_module(commented, "c.hlo.txt") == parse_module("\n" * 3 + LOWERED, "c.hlo.txt")   # same lines
    with pytest.raises(HloParseError, match=r"^c.hlo.txt:2: expected 'HloModule NAME, ...' as the first line"):
        parse_module("// only a comment\nENTRY main {\n}\n", "c.hlo.txt")


def test_an_opcode_newer_than_the_dataset_gets_id_0_as_the_official_extractor_writes(capsys):
    """`erf` (JAX's exact gelu) is not in the dataset's table: the node keeps its place, shape and edges with opcode
    id 0, and parse_module says so on stderr, once, naming the source and the opcodes."""
    text = LOWERED.replace("m = f32[2,3]{1,0} multiply(d, d)", "m = f32[2,3]{1,0} erf(d)")
    module = parse_module(text, "prog.hlo.txt")
    assert capsys.readouterr().err == ("note: prog.hlo.txt: opcodes outside the dataset's table (erf x1) get opcode "
                                       "id 0, as the official extractor writes them\n")
    graph, static = layout_program(module).graph, layout_program(parse_module(LOWERED)).graph
    assert graph.unknown_opcodes == {"erf": 1} and static.unknown_opcodes == {}
    at = names(graph).index("m")
    assert graph.nodes[at].opcode == 0 and static.nodes[at].opcode == op.MULTIPLY
    assert [n.shape for n in graph.nodes] == [n.shape for n in static.nodes]
    assert graph.nodes[at].operands == static.nodes[at].operands[:1]


def test_a_bounded_dynamic_dimension_is_its_bound():
    """`f32[<=2,3]` lowers as `f32[2,3]`: same shape, node features and configurable nodes."""
    bounded = layout_program(parse_module(LOWERED.replace("m = f32[2,3]{1,0} multiply(d, d)",
                                                          "m = f32[<=2,3]{1,0} multiply(d, d)"), "prog.hlo.txt"))
    static = layout_program(parse_module(LOWERED, "prog.hlo.txt"))
    assert names(bounded.graph) == names(static.graph)
    assert bounded.graph.nodes == static.graph.nodes and bounded.config_node_ids == static.config_node_ids


def test_truncated_text_is_refused_at_its_end():
    cut = COMPILED[:COMPILED.index("  %v.1 =")]
    with pytest.raises(HloParseError, match=r"^g.hlo:\d+: expected '}' closing computation main.9") as err:
        parse_module(cut, "g.hlo")
    assert err.value.line == len(cut.splitlines())
    with pytest.raises(HloParseError, match="a complete instruction"):
        parse_module(COMPILED[:COMPILED.index("backend_config") + 20], "g.hlo")


def test_long_chains_and_cycles():
    lines = ["HloModule deep", "ENTRY main {", "  x0 = f32[8]{0} parameter(0)"]
    lines += [f"  x{i} = f32[8]{{0}} negate(x{i - 1})" for i in range(1, 3000)]   # deeper than Python's recursion
    program = layout_program(parse_module("\n".join(lines + ["}"])))
    assert len(program.graph) == 3000 and program.edge_index[-1].tolist() == [2999, 2998]
    assert program.node_feat[-1, 0] == 1                                        # no ROOT: the last instruction
    with pytest.raises(HloParseError, match=r"^cyc:3: expected an acyclic computation \(a depends on itself\)"):
        parse_module("HloModule c\nENTRY m {\n  a = f32[] negate(b)\n  ROOT b = f32[] negate(a)\n}\n", "cyc")


class _CountingTuple(tuple):
    """A tuple that counts the full passes over it (how often the computations are scanned)."""

    passes = 0

    def __iter__(self):
        type(self).passes += 1
        return super().__iter__()


def test_called_names_are_checked_without_rescanning_every_computation():
    """A module of N chained calls took O(N^2) (every called name checked against a fresh set of all computation
    names: 3000 computations, half a minute); the names are now collected once per module."""
    n = 300
    lines = ["HloModule chain", "c0 {", "  p = f32[] parameter(0)", "  ROOT n = f32[] negate(p)", "}"]
    for i in range(1, n):
        lines += [f"c{i} {{", "  p = f32[] parameter(0)", f"  ROOT n = f32[] call(p), to_apply=c{i - 1}", "}"]
    lines += ["ENTRY e {", "  x = f32[] parameter(0)", f"  ROOT r = f32[] call(x), to_apply=c{n - 1}", "}"]
    parsed = parse_module("\n".join(lines), "chain.hlo.txt")
    module = dataclasses.replace(parsed, computations=_CountingTuple(parsed.computations), graphs={})
    _CountingTuple.passes = 0
    program = layout_program(module)
    assert len(program.graph) == 2 * n + 2 and program.edge_index[-1].tolist() == [2 * n + 1, 2 * n - 1]
    assert _CountingTuple.passes < 10


CONV = """HloModule conv
fused {
  p = f32[1,8,8,4]{3,2,1,0} parameter(0)
  k = f32[3,3,4,8]{3,2,1,0} parameter(1)
  ROOT c = f32[1,8,8,8]{3,2,1,0} convolution(p, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
ENTRY e {
  x = f32[1,8,8,4]{3,2,1,0} parameter(0)
  y = f32[3,3,4,8]{3,2,1,0} parameter(1)
  ROOT r = f32[1,8,8,8]{3,2,1,0} fusion(x, y), kind=kOutput, calls=fused
}
"""


@pytest.mark.parametrize("old, new, expected", [
    ("dim_labels=b01f_01io->b01f", "dim_labels=b012f_012io->b012f",     # was an IndexError in block_specs
     "dim_labels with one label per input dimension (4), found 5 (in c)"),
    ("k = f32[3,3,4,8]{3,2,1,0}", "k = f32[3,3]{1,0}",                  # was an IndexError in the tile kernel
     "dim_labels with one label per kernel dimension (2), found 4 (in c)"),
    ("size=3x3 pad=1_1x1_1", "size=3 pad=1_1", "a window with one size per spatial dimension (2), found 1 (in c)"),
    ("convolution(p, k)", "convolution(p)", "two operands (lhs, rhs) on a convolution, found 1 (in c)"),
])
def test_convolutions_whose_dimension_numbers_do_not_fit_their_tensors_are_refused(old, new, expected):
    program = layout_program(parse_module(CONV, "conv.hlo.txt"))
    assert program.config_node_ids.tolist() == [2]                   # the convolution
    assert old in CONV
    with pytest.raises(HloParseError, match=rf"^conv.hlo.txt:5: expected {re.escape(expected)}$"):
        parse_module(CONV.replace(old, new), "conv.hlo.txt")


@pytest.mark.parametrize("text, line, expected", [
    (LOWERED.replace("ENTRY main {", "add_region {"), 9,                 # the second was silently dropped
     "a computation name not used before (add_region is on line 3), found 'add_region'"),
    (LOWERED.replace("add_region {", "ENTRY first {").replace("to_apply=add_region", "to_apply=first"), 9,
     "one ENTRY computation (first is on line 3), found 'main'"),
    (LOWERED.replace("  zero = f32[]", "  ROOT zero = f32[]"), 15,
     "one ROOT instruction in computation main (the first is zero on line 14), found 'r'"),
    (LOWERED.replace("m = f32[2,3]{1,0}", "m = f32[2,3]{1,1}"), 13,         # features held a made-up layout
     "a layout listing each of the 2 dimensions once, found 'f32[2,3]{1,1}'"),
    (LOWERED.replace("m = f32[2,3]{1,0}", "m = f32[2,3]{0}"), 13,
     "a layout listing each of the 2 dimensions once, found 'f32[2,3]{0}'"),
])
def test_what_xla_refuses_in_a_module_is_refused_not_silently_dropped(text, line, expected):
    """Two computations of one name, two ENTRY computations, two ROOTs and a layout that is not a permutation of
    the shape's dimensions were accepted (one computation or root silently ignored); XLA's parser refuses them."""
    with pytest.raises(HloParseError, match=rf"^prog.hlo.txt:{line}: expected {re.escape(expected)}$"):
        parse_module(text, "prog.hlo.txt")


def test_comments_are_skipped_anywhere_and_keep_the_line_numbers():
    """XLA's lexer skips /* ... */ anywhere and // to the end of a line: a dump opening with a note (`/* Filename is
    kept stale ... */`, XLA's own benchmark files) was refused as 'expected HloModule', an instruction ending with
    `// why` as a bad attribute; a note over lines keeps later lines' numbers, and a `//` line or a string holding
    `/*` or `//` opens no comment."""
    commented = "m = f32[2,3]{1,0} /* sq */ multiply(d, /* again */ d)"
    noted = "/* kept for\n   benchmark tracking */\n" + LOWERED.replace("m = f32[2,3]{1,0} multiply(d, d)", commented)
    assert parse_module(noted, "n.hlo.txt") == parse_module("\n\n" + LOWERED, "n.hlo.txt")
    with pytest.raises(HloParseError, match=r"^n.hlo.txt:15: expected an opcode"):     # line 13 + the note's 2
        parse_module(noted.replace("multiply(d, /* again */ d)", "/* no opcode */"), "n.hlo.txt")
    quoted = LOWERED.replace("  zero = f32[] constant(0)", '  // see /* here\n  zero = f32[] constant(0), '
                                                           'metadata={op_name="a/*b//c"}  // why: the init')
    assert parse_module(quoted).entry.instructions[-2].attrs == {"metadata": '{op_name="a/*b//c"}'}


def test_a_backend_config_over_lines_may_close_its_braces_on_lines_of_their_own():
    """XLA's GPU tests print `backend_config={` then one key per line and `}` alone on a line: the lone `}` was read
    as the computation's end ('a complete instruction ... never closed'); it closes the brace, while a `}` that
    meets an unclosed '(' still ends the computation and the instruction is refused."""
    split = ('dot(x, w),\n    lhs_contracting_dims={1}, backend_config={\n      cfg:{\n        sizes:[16]\n'
             '      }\n    }')
    text = LOWERED.replace("dot(x, w), lhs_contracting_dims={1}", split)
    d = parse_module(text, "b.hlo.txt").entry.instructions[2]
    assert d.name == "d" and d.attrs["backend_config"] == "{ cfg:{ sizes:[16] } }" and d.attrs["rhs_contracting_dims"]
    with pytest.raises(HloParseError, match=r"^b.hlo.txt:12: expected a complete instruction"):
        parse_module(text.replace("sizes:[16]", "sizes:(16"), "b.hlo.txt")


def test_a_damaged_computation_header_is_refused_not_read_as_another_name():
    """`EN\x00TRY main {` read as a computation named EN (the rest taken for its signature), so the module had no
    ENTRY; a header's text after the name is a signature opening with '(' or nothing."""
    with pytest.raises(HloParseError, match=r"^prog.hlo.txt:9: expected a computation header .*, found "
                                            r"'EN\\x00TRY main \{'$"):
        parse_module(LOWERED.replace("ENTRY main {", "EN\x00TRY main {"), "prog.hlo.txt")
    signed = LOWERED.replace("ENTRY main {", "ENTRY %main.9 (x: f32[2,4], w: f32[4,3]) -> f32[2] {")
    assert parse_module(signed).entry.name == "main.9"


@pytest.mark.parametrize("dtype", ["s1", "u1", "s4", "u2", "f6e2m3fn", "f8e4m3fn", "f4e2m1fn", "f8e5m3fnu"])
def test_narrow_element_types_parse_and_get_no_one_hot_as_in_the_official_features(dtype):
    """XLA's 1- to 6-bit integer and float types (and float formats it adds later, by their family's pattern)
    were refused as 'expected a shape'; the node keeps its shape with an all-zero element-type one-hot."""
    text = LOWERED.replace("m = f32[2,3]{1,0} multiply(d, d)", f"m = {dtype}[2,3]{{1,0}} convert(d)")
    graph = layout_program(parse_module(text, "prog.hlo.txt")).graph
    node = graph.nodes[names(graph).index("m")]
    assert node.dtype == dtype and node.shape == (2, 3)
    one_hot = [k for k, name in enumerate(NODE_FEAT_NAMES) if name.startswith("shape_element_type_is_")]
    assert len(one_hot) == 19 and not node_row(node)[one_hot[0]:one_hot[-1] + 1].count(1.0)
    assert node_row(graph.nodes[names(graph).index("d")])[one_hot[0]:one_hot[-1] + 1].count(1.0) == 1   # f32
    with pytest.raises(HloParseError, match="expected a shape"):
        parse_module(LOWERED.replace("m = f32[2,3]", "m = x4[2,3]"), "prog.hlo.txt")


def test_a_statement_over_many_lines_is_read_in_linear_time():
    """Joining a statement's lines re-scanned the whole statement at every line (16000 lines: 17.5 s); now each
    line is scanned once, carrying the bracket depth and an open string across lines."""
    n = 20000
    shapes, operands = ",\n".join(["f32[4]{0}"] * n), ",\n".join(["p"] * n)
    text = f"HloModule m\nENTRY main {{\n  p = f32[4]{{0}} parameter(0)\n  ROOT t = ({shapes}) tuple({operands})\n}}\n"
    start = time.process_time()
    module = parse_module(text, "long.hlo.txt")
    assert len(module.entry.root.operands) == n and time.process_time() - start < 10    # was minutes at this n
    split = 'x = f32[2]{0} custom-call(p), custom_call_target="a(b\n[c", backend_config="{\n}"'
    body = f"HloModule s\nENTRY main {{\n  p = f32[2]{{0}} parameter(0)\n  ROOT {split}\n}}\n"
    root = parse_module(body, "s.hlo.txt").entry.root
    assert root.attrs["custom_call_target"] == '"a(b [c"' and root.attrs["backend_config"] == '"{ }"'


@pytest.mark.parametrize("text, kind", [
    ("module @jit_f attributes {mhlo.num_partitions = 1 : i32} {\n  func.func public @main() {\n  }\n}\n",
     "StableHLO/MLIR text: module @jit_f"),
    ('name: "jit_f"\nentry_computation_name: "main.4"\ncomputations {\n}\n',
     "an HloModuleProto in protobuf text format: name: "),
])
def test_mlir_or_proto_text_passed_by_mistake_is_named(text, kind):
    with pytest.raises(HloParseError, match=r"^f.txt:1: expected 'HloModule NAME, ...' as the first line \(HLO text: "
                                            rf".*\), found '{re.escape(kind)}") as err:
        parse_module(text, "f.txt")
    assert "\n" not in str(err.value)
