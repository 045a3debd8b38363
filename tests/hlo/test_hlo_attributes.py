"""Instruction attributes -> the official node_feat columns, hand-checked on one module of many op kinds."""
from __future__ import annotations

import pytest

from pipeline.hlo import attributes as at
from pipeline.hlo.featurize import layout_program, parse_module

OPS = """HloModule ops

cmp {
  p = bf16[] parameter(0)
  q = bf16[] parameter(1)
  ROOT lt = pred[] compare(p, q), direction=LT
}

ENTRY main {
  img = bf16[1,8,8,3]{3,2,1,0} parameter(0)
  k = bf16[3,3,3,16]{3,2,1,0} parameter(1)
  c = bf16[1,4,4,16]{3,2,1,0} convolution(img, k), window={size=3x3 stride=2x2 pad=0_1x0_1 rhs_reversal=1x0}, dim_labels=b01f_01io->b01f
  s = bf16[1,2,4,16]{3,2,1,0} slice(c), slice={[0:1], [1:3], [0:4:1], [0:16]}
  z = bf16[] constant(0)
  pd = bf16[1,3,4,16]{3,2,1,0} pad(s, z), padding=0_0x1_0x0_0_1x0_0
  i0 = s32[] constant(0)
  ds = bf16[1,1,4,16]{3,2,1,0} dynamic-slice(pd, i0, i0, i0, i0), dynamic_slice_sizes={1,1,4,16}
  t = bf16[16,4,1,1]{3,2,1,0} transpose(ds), dimensions={3,2,0,1}
  v = bf16[64]{0} reshape(t)
  so = bf16[64]{0} sort(v), dimensions={0}, is_stable=true, to_apply=cmp
  io = s32[4,16]{0,1} iota(), iota_dimension=1
  ROOT out = (bf16[64]{0}, s32[4,16]{0,1}) tuple(so, io)
}
"""


@pytest.fixture(scope="module")
def program():
    return layout_program(parse_module(OPS, "ops.hlo"))


def row(program, name):
    return program.node_feat[[n.name for n in program.graph.nodes].index(name)].tolist()


def test_convolution_window_and_dimension_numbers(program):
    c = row(program, "c")
    assert c[15] == 1                                                  # bf16
    assert c[37:45] == [3, 3, 0, 0, 0, 0, 6, 9]                        # window size
    assert c[45:53] == [2, 2, 0, 0, 0, 0, 4, 4]                        # stride
    assert c[53:61] == [0, 0, 0, 0, 0, 0, 0, 0]                        # padding low
    assert c[61:69] == [1, 1, 0, 0, 0, 0, 2, 1]                        # padding high
    assert c[69:77] == [1, 1, 0, 0, 0, 0, 2, 1] and c[77:85] == c[69:77]   # window / base dilation
    assert c[85:93] == [1, 0, 0, 0, 0, 0, 1, 1]                        # reversal 1x0: true 1, false 1
    assert c[93:107] == [0, 3, 1, 2, 0, 0, 2, 3, 0, 1, 0, 0, 0, 3]     # b01f_01io->b01f
    assert c[107:109] == [1, 1]                                        # feature / batch group count
    assert c[134:140] == [3, 2, 1, 0, 0, 0]


def test_slice_pad_dynamic_slice_sort_transpose_iota(program):
    s, p, ds = row(program, "s"), row(program, "pd"), row(program, "ds")
    assert s[109:121] == [0, 1, 1, 0, 1, 1, 4, 1, 1, 3, 24, 192]        # start, stride, limit (0, 1, sum, product)
    assert p[125:133] == [0, 1, 1, 0, 0, 0, 0, 0]                      # edge padding low / high
    assert ds[121:125] == [1, 1, 22, 64]
    assert row(program, "so")[133] == 1 and row(program, "so")[31] == 0
    assert row(program, "t")[31:37] == [3, 2, 0, 1, 0, 0]
    io = row(program, "io")
    assert io[31] == 1 and io[6] == 1 and io[134:136] == [0, 1]        # iota_dimension, s32, layout {0,1}
    for name in ("s", "pd", "t"):                                       # not a convolution: zero dim numbers
        assert row(program, name)[93:109] == [0] * 16
    assert s[44] == 1 and s[92] == 0                                   # no window: product 1, no reversal


def test_configurable_nodes_are_the_convolution_and_reshape(program):
    names = [program.graph.nodes[i].name for i in program.config_node_ids]
    assert names == ["c", "v"]


@pytest.mark.parametrize("decode, text", [
    (at.window, "{size=3x3 stride=2}"), (at.window, "{size=3 bogus=1}"), (at.conv_dims, "b01f_01io->b0f1x"),
    (at.slice_dims, "{[0:a]}"), (at.padding, "1_2_3_4"), (at.int_list, "0,1"),
])
def test_malformed_attributes_are_refused(decode, text):
    with pytest.raises(ValueError):
        decode(text)


BIG = "9" * 400          # beyond int64 (and float's range): int() takes it, float() of it raised OverflowError


@pytest.mark.parametrize("decode, text", [
    (at.window, "{size=3x" + BIG + "}"), (at.window, "{size=3x3 pad=0_" + BIG + "x0_1}"), (at.window, "{size=3x٣}"),
    (at.window, "{size=3x0}"), (at.window, "{size=3x3 stride=0x1}"), (at.window, "{size=3x3 rhs_dilate=1x-1}"),
    (at.slice_dims, "{[1:" + BIG + "]}"), (at.slice_dims, "{[1:٣]}"), (at.slice_dims, "{[0:4:0]}"),
    (at.padding, BIG + "_0"), (at.int_list, "{0," + BIG + "}"), (at.int_list, "{1_0}"), (at.integer, BIG),
    (at.integer, "9" * 5000), (at.integer, "1_0"), (at.integer, "١"), (at.integer, "+3"),
])
def test_numbers_xla_refuses_are_refused(decode, text):
    """Integers beyond int64, not ASCII decimal, or a window size / stride / dilation or slice stride below 1 (each
    refused by XLA) are a ValueError, which lowering turns into one line naming the instruction."""
    with pytest.raises(ValueError):
        decode(text)


def test_negative_counts_and_indices_are_refused():
    with pytest.raises(ValueError, match="feature_group_count >= 1"):
        at.integer("0", "feature_group_count", low=1)
    with pytest.raises(ValueError, match="int64s >= 0"):
        at.int_list("{1,-1}", low=0)
    assert at.integer(" 5 ") == 5 and at.integer("-2") == -2 and at.int_list("{}", low=0) == ()


def test_products_beyond_float32_are_refused():
    """node_feat is float32: slice limits whose product passes 3.4e38 were an inf feature (a RuntimeWarning)."""
    e18 = 10 ** 18
    with pytest.raises(ValueError, match="slice limit whose sum and product fit node_feat's float32"):
        at.check_float32({"slice": ((0,) * 3, (1,) * 3, (e18,) * 3)})
    at.check_float32({"slice": ((0,) * 2, (1,) * 2, (e18,) * 2), "window": at.window("{size=3x3}")})


def test_window_defaults_and_dilations():
    w = at.window("{size=2x3 pad=1_0x0_2 lhs_dilate=2x1 rhs_dilate=1x3}")
    assert (w.stride, w.pad_low, w.pad_high, w.base_dilation, w.window_dilation) == \
        ((1, 1), (1, 0), (0, 2), (2, 1), (1, 3))
    assert at.conv_dims("bf0_oi0->bf0").input_spatial == (2,)
