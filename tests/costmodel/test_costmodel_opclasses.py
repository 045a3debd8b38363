"""The layout cost model on the opcodes of real programs: hand-built graphs with hand-computed runtimes."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.costmodel.layout import LayoutCostModel, LayoutCostParams
from pipeline.hlo.layout_ids import layout_id
from pipeline.costmodel.noise import measure
from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import DotDims, HloBuilder

# 1 byte/ns, no launch cost, op overhead 100 ns, copy overhead 10 ns: runtimes are byte counts plus overheads.
PARAMS = LayoutCostParams(tile=(8, 128), flops_per_ns=1.0, f32_slowdown=1.0, bytes_per_ns=1.0, op_overhead_ns=100.0,
                          copy_overhead_ns=10.0, launch_overhead_ns=0.0, placement=(1.0, 0.5, 0.25),
                          offpair_penalty=0.5)
ROW_MAJOR, COL_MAJOR = 8192.0, 65536.0   # f32 [16, 128] padded bytes, minor dim 128 / minor dim 16
NO_CONFIG = np.full((1, 0, 18), -1)      # [configs, config nodes, 18]


def one_config(output=None):
    row = np.full((1, 1, 18), -1)
    if output:
        row[0, 0, 0:2] = output
    return row


def test_unknown_opcode_costs_its_memory_traffic():
    for opcode in (op.OPCODE_IDS["custom-call"], op.OPCODE_IDS["sort"], 0):
        b = HloBuilder("f32")
        x = b.parameter((16, 128))
        b.add(opcode, (16, 128), (x,))
        model = LayoutCostModel(b.finish([1]), [], PARAMS)
        assert model.runtime_ns(NO_CONFIG)[0] == pytest.approx(ROW_MAJOR + ROW_MAJOR + 100), opcode


def test_layout_mismatch_into_a_call_costs_the_copy_formula():
    """parameter -> reshape (configured column-major) -> call: the call takes its operand row-major."""
    b = HloBuilder("f32")
    x = b.parameter((16, 128))
    y = b.reshape(x, (16, 128))
    b.add(op.OPCODE_IDS["call"], (16, 128), (y,))
    graph = b.finish([2])
    model = LayoutCostModel(graph, [1], PARAMS)
    base = model.runtime_ns(one_config())[0]
    assert base == 0.0                                 # bitcast reshape; call and tuple hand over row-major
    changed = model.runtime_ns(one_config(output=(0, 1)))[0]
    relayout = ROW_MAJOR + COL_MAJOR + 10              # the reshape now moves data into column-major
    copy = COL_MAJOR + ROW_MAJOR + 10                  # (have + want) / bandwidth + copy overhead, into the call
    assert changed == pytest.approx(relayout + copy)
    assert model.copy_cost(1, layout_id((0, 1)), layout_id((1, 0))) == pytest.approx(copy)


def test_free_ops_and_applied_computations_cost_nothing():
    b = HloBuilder("f32")
    a = b.parameter((), dtype="f32")
    b.nodes[a].computation = "region"
    add = b.add(op.ADD, (), (a, a))
    b.nodes[add].computation = "region"
    x = b.parameter((16, 128))
    gte = b.add(op.GET_TUPLE_ELEMENT, (16, 128), (x,))
    init = b.constant()
    b.add(op.REDUCE, (16,), (gte, init), called_roots=(add,), dimensions=(1,))
    model = LayoutCostModel(b.finish([5]), [], PARAMS)
    # only the reduce: reads [16, 128] row-major (8192 bytes) and writes [16] (padded to 128 f32 = 512 bytes)
    assert model.runtime_ns(NO_CONFIG)[0] == pytest.approx(ROW_MAJOR + 512 + 100)


def test_clamp_with_scalar_bounds_takes_the_array_layout():
    b = HloBuilder("f32")
    x = b.parameter((16, 128))
    y = b.reshape(x, (16, 128))
    lo, hi = b.constant(), b.constant()
    b.add(op.OPCODE_IDS["clamp"], (16, 128), (lo, y, hi))
    model = LayoutCostModel(b.finish([4]), [1], PARAMS)
    # row-major: clamp reads and writes [16, 128] (2 x 8192) + overhead
    assert model.runtime_ns(one_config())[0] == pytest.approx(2 * ROW_MAJOR + 100)
    col = model.runtime_ns(one_config(output=(0, 1)))[0]
    # column-major: reshape relayout, clamp on the padded column-major tensor, copy back for the root tuple
    assert col == pytest.approx((ROW_MAJOR + COL_MAJOR + 10) + 2 * COL_MAJOR + 100 + (COL_MAJOR + ROW_MAJOR + 10))


def test_dot_flops_multiply_every_contracting_dimension():
    b = HloBuilder("f32")
    lhs, rhs = b.parameter((128, 4, 8)), b.parameter((4, 8, 128))
    dims = DotDims(1, 0, 0, lhs_contracting_dims=(1, 2), rhs_contracting_dims=(0, 1))
    b.add(op.DOT, (128, 128), (lhs, rhs), dot=dims)
    fast = LayoutCostParams(**{**PARAMS.__dict__, "bytes_per_ns": 1e9, "op_overhead_ns": 0.0})
    model = LayoutCostModel(b.finish([2]), [2], fast)
    flops = 2.0 * 128 * 128 * 32
    # efficiency: lhs contracting dim 1 (size 4) is second-minor: 0.5 * 4/8; output feature minor: 1.0;
    # rhs n-dim 2 minor (1.0) with contracting dim 0 off the minor pair (0.5)
    expected = flops / (0.5 * 0.5 * 1.0 * 1.0 * 0.5)
    got = model.runtime_ns(one_config())[0]   # flops-bound; the row-major output needs no copy into the root
    assert got == pytest.approx(expected, rel=1e-6)


def test_duplicates_differ_only_by_noise():
    b = HloBuilder("f32")
    x = b.parameter((16, 128))
    b.unary(op.NEGATE, b.reshape(x, (16, 128)))
    model = LayoutCostModel(b.finish([2]), [1], PARAMS)
    rows = np.concatenate([one_config(output=(0, 1))] * 3 + [one_config()])   # three identical configs
    clean = model.runtime_ns(rows)
    assert clean[0] == clean[1] == clean[2] != clean[3]
    noisy = measure(clean, 0.005, np.random.default_rng(0))
    assert len(set(noisy[:3].tolist())) == 3
    np.testing.assert_allclose(noisy, clean, rtol=0.05)
    assert (measure(clean, 0.0, np.random.default_rng(0)) == clean).all()
