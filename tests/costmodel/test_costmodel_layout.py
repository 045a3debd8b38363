"""Layout cost model on tiny hand-built graphs with hand-computed runtimes."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import NCHW, HloBuilder, Window
from pipeline.costmodel.layout import LayoutCostModel, LayoutCostParams
from pipeline.hlo.layout_ids import default_layouts, layout_id, permutations

# 1 byte/ns, no launch cost, op overhead 100 ns, copy overhead 10 ns: runtimes are byte counts plus overheads.
PARAMS = LayoutCostParams(tile=(8, 128), flops_per_ns=1.0, f32_slowdown=1.0, bytes_per_ns=1.0, op_overhead_ns=100.0,
                          copy_overhead_ns=10.0, launch_overhead_ns=0.0, placement=(1.0, 0.5, 0.25),
                          offpair_penalty=0.5)
ROW_MAJOR, COL_MAJOR = 8192.0, 65536.0   # f32 [16, 128]: padded bytes with minor dim 128 / minor dim 16


def reshape_graph():
    """parameter [16,128] f32 -> reshape [16,128] (configurable, node 1) -> negate -> tuple."""
    b = HloBuilder("f32")
    x = b.parameter((16, 128))
    y = b.unary(op.NEGATE, b.reshape(x, (16, 128)))
    return b.finish([y])


def config(output=None, input=None):
    row = np.full((1, 1, 18), -1)   # [configs, config nodes, 18]
    if output:
        row[0, 0, 0:2] = output
    if input:
        row[0, 0, 6:8] = input
    return row


def test_padded_bytes_follow_the_8x128_tiling():
    model = LayoutCostModel(reshape_graph(), [1], PARAMS)
    pb = model.padded_bytes(0)
    assert pb[layout_id((1, 0))] == ROW_MAJOR and pb[layout_id((0, 1))] == COL_MAJOR


def test_default_config_is_a_free_bitcast_plus_elementwise():
    model = LayoutCostModel(reshape_graph(), [1], PARAMS)
    # negate reads and writes 2048 f32 elements row-major: 2 * 8192 bytes + op overhead; reshape is free
    assert model.runtime_ns(config())[0] == pytest.approx(2 * ROW_MAJOR + 100)


def test_input_layout_mismatch_costs_a_transpose_copy():
    model = LayoutCostModel(reshape_graph(), [1], PARAMS)
    base = model.runtime_ns(config())[0]
    mismatch = model.runtime_ns(config(input=(0, 1)))[0]
    copy = ROW_MAJOR + COL_MAJOR + 10   # parameter -> column-major copy
    relayout = COL_MAJOR + ROW_MAJOR + 10   # the reshape is no longer a bitcast
    assert mismatch - base == pytest.approx(copy + relayout)


def test_output_layout_propagates_through_elementwise_until_the_root():
    model = LayoutCostModel(reshape_graph(), [1], PARAMS)
    base = model.runtime_ns(config())[0]
    changed = model.runtime_ns(config(output=(0, 1)))[0]
    relayout = ROW_MAJOR + COL_MAJOR + 10        # reshape writes column-major
    negate = 2 * COL_MAJOR - 2 * ROW_MAJOR       # negate now streams the padded column-major tensor
    root_copy = COL_MAJOR + ROW_MAJOR + 10       # the tuple (entry result) wants row-major back
    assert changed - base == pytest.approx(relayout + negate + root_copy)


def test_explicit_default_equals_all_minus_one_and_batches_are_rowwise():
    model = LayoutCostModel(reshape_graph(), [1], PARAMS)
    rows = np.concatenate([config(), config(output=(1, 0), input=(1, 0)), config(input=(0, 1))])
    runtime = model.runtime_ns(rows)
    assert runtime[0] == runtime[1] < runtime[2]


def test_convolution_prefers_its_feature_dimension_minor():
    b = HloBuilder("bf16")
    x, w = b.parameter((8, 128, 16, 16)), b.parameter((128, 128, 3, 3))            # NCHW input, OIHW kernel
    y = b.conv(x, w, (8, 128, 16, 16), Window((3, 3), (1, 1), (1, 1), (1, 1)), NCHW)
    graph = b.finish([y])
    out_id, in_id, kernel_id = default_layouts(graph.nodes[y], [graph.nodes[x], graph.nodes[w]])
    assert tuple(permutations(4)[in_id]) == (1, 3, 2, 0)    # feature minor, then W, H, batch
    assert tuple(permutations(4)[kernel_id]) == (0, 1, 3, 2)
    model = LayoutCostModel(graph, [y], PARAMS)
    assert model.placement(y, 1)[out_id] == 1.0                 # 128 features fill the 128 lanes
    assert model.placement(y, 1)[layout_id((3, 2, 1, 0))] == 0.25
    feature_minor, width_minor = np.full((2, 1, 18), -1), np.full((2, 1, 18), -1)
    width_minor[:, 0, 6:10] = (3, 2, 1, 0)
    runtime = model.runtime_ns(np.concatenate([feature_minor, width_minor]))
    assert runtime[0] < runtime[2]


def test_default_compilation_layouts_are_what_the_all_default_config_runs_with():
    b = HloBuilder("bf16")
    x, w = b.parameter((8, 128, 16, 16)), b.parameter((128, 128, 3, 3))            # NCHW input, OIHW kernel
    y = b.conv(x, w, (8, 128, 16, 16), Window((3, 3), (1, 1), (1, 1), (1, 1)), NCHW)
    z = b.unary(op.NEGATE, y)
    graph = b.finish([z])
    recorded = LayoutCostModel(graph, [y], PARAMS).default_minor_to_major()
    # parameters row-major; the convolution feature-minor (C, then W, H, N); the negate follows its operand;
    # the tuple root is rank 0
    assert recorded[x] == (3, 2, 1, 0) and recorded[w] == (3, 2, 1, 0)
    assert recorded[y] == (1, 3, 2, 0) == recorded[z]
    assert recorded[-1] == ()
    # the reshape graph's default is row-major everywhere
    assert LayoutCostModel(reshape_graph(), [1], PARAMS).default_minor_to_major()[:3] == [(1, 0)] * 3


def test_invalid_block_is_rejected_with_the_node_named():
    model = LayoutCostModel(reshape_graph(), [1], PARAMS)
    with pytest.raises(ValueError, match=r"node 1"):
        model.runtime_ns(config(output=(0, 0)))
