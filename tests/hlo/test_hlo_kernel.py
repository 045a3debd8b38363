"""Fused kernels -> tile graphs and TileKernels, and their tile configurations."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.costmodel.tile import TileCostParams, tile_runtime_ns
from pipeline.featurizer.tile_configs import TileSearch, default_config, tile_configs
from pipeline.hlo.kernel import TileKernel
from pipeline.hlo import opcodes as op
from pipeline.hlo.featurize import parse_module, tile_programs
from pipeline.hlo.kernel import fold_shape

FUSED = """HloModule kernels

%fused_conv (p0: bf16[8,32,32,64], p1: bf16[3,3,64,128], p2: bf16[128]) -> bf16[8,16,16,128] {
  %p0 = bf16[8,32,32,64]{3,2,1,0} parameter(0)
  %p1 = bf16[3,3,64,128]{3,2,1,0} parameter(1)
  %conv = bf16[8,16,16,128]{3,2,1,0} convolution(%p0, %p1), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f
  %p2 = bf16[128]{0} parameter(2)
  %b = bf16[8,16,16,128]{3,2,1,0} broadcast(%p2), dimensions={3}
  ROOT %add = bf16[8,16,16,128]{3,2,1,0} add(%conv, %b)
}

%fused_dot (q0: f32[4,256,512], q1: f32[4,512,1024]) -> f32[4,256,1024] {
  %q0 = f32[4,256,512]{2,1,0} parameter(0)
  %q1 = f32[4,512,1024]{2,1,0} parameter(1)
  ROOT %dot = f32[4,256,1024]{2,1,0} dot(%q0, %q1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b.1 = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b.1)
}

%fused_reduce (r0: f32[64,128,256]) -> (f32[64,128], f32[64,128,256]) {
  %r0 = f32[64,128,256]{2,1,0} parameter(0)
  %e = f32[64,128,256]{2,1,0} exponential(%r0)
  %zero = f32[] constant(0)
  %red = f32[64,128]{1,0} reduce(%e, %zero), dimensions={2}, to_apply=%sum
  ROOT %t = (f32[64,128]{1,0}, f32[64,128,256]{2,1,0}) tuple(%red, %e)
}

ENTRY %main (x: bf16[8,32,32,64], w: bf16[3,3,64,128], bias: bf16[128], l: f32[4,256,512], r: f32[4,512,1024], u: f32[64,128,256]) -> f32[4,256,1024] {
  %x = bf16[8,32,32,64]{3,2,1,0} parameter(0)
  %w = bf16[3,3,64,128]{3,2,1,0} parameter(1)
  %bias = bf16[128]{0} parameter(2)
  %f1 = bf16[8,16,16,128]{3,2,1,0} fusion(%x, %w, %bias), kind=kOutput, calls=%fused_conv
  %l = f32[4,256,512]{2,1,0} parameter(3)
  %r = f32[4,512,1024]{2,1,0} parameter(4)
  %f2 = f32[4,256,1024]{2,1,0} fusion(%l, %r), kind=kOutput, calls=%fused_dot
  %u = f32[64,128,256]{2,1,0} parameter(5)
  %f3 = (f32[64,128]{1,0}, f32[64,128,256]{2,1,0}) fusion(%u), kind=kInput, calls=%fused_reduce
  ROOT %out = f32[4,256,1024]{2,1,0} copy(%f2)
}
"""

COST = TileCostParams(tile=(8, 128), flops_per_ns=60000.0, f32_slowdown=4.0, bytes_per_ns=450.0,
                      per_tile_overhead_ns=350.0, launch_overhead_ns=3000.0, vmem_bytes=16777216,
                      spill_penalty=4.0, elementwise_flops=4.0, vector_flops_per_ns=4000.0)
SEARCH = TileSearch((8, 32), COST)


@pytest.fixture(scope="module")
def programs():
    return {p.name: p for p in tile_programs(parse_module(FUSED, "kernels.hlo"))}


def test_one_program_per_fusion_holding_its_fused_computation(programs):
    assert list(programs) == ["kernels.f1", "kernels.f2", "kernels.f3"]
    reduce_graph = programs["kernels.f3"].graph
    assert [n.name for n in reduce_graph.nodes] == ["a", "b.1", "s", "r0", "e", "zero", "red", "t"]
    assert programs["kernels.f3"].edge_index.tolist() == [[2, 0], [2, 1], [4, 3], [6, 4], [6, 5], [6, 2],
                                                          [7, 6], [7, 4]]
    assert programs["kernels.f1"].node_opcode.tolist() == [op.PARAMETER, op.PARAMETER, op.CONVOLUTION,
                                                           op.PARAMETER, op.BROADCAST, op.ADD]
    assert programs["kernels.f1"].node_feat.shape == (6, 140)


def test_kernels_describe_the_fusions(programs):
    assert programs["kernels.f1"].kernel == TileKernel("conv", (8, 16, 16, 128), 2, 64, (3, 3, 2), n_inputs=3,
                                                       n_ops=2)
    assert programs["kernels.f2"].kernel == TileKernel("dot", (4, 256, 1024), 4, 512, n_inputs=2, n_ops=1,
                                                       f32=True)
    assert programs["kernels.f3"].kernel == TileKernel("reduce", (64, 128), 4, 256, n_inputs=1, n_ops=3)


def test_fold_shape_bounds_the_rank():
    assert fold_shape(()) == (1,)
    assert fold_shape((2, 3, 4, 5, 6, 7, 8)) == (6, 4, 5, 6, 7, 8)


def test_tile_configs_are_distinct_include_the_default_and_are_costable(programs):
    distinct = {"kernels.f1": 30, "kernels.f2": 30, "kernels.f3": 12}   # f3: (64, 128) has 4 x 3 tilings
    for name, program in programs.items():
        feat = tile_configs(program, 30, SEARCH, np.random.default_rng(0))
        assert feat.shape == (distinct[name], 24) and feat.dtype == np.float32
        assert len(np.unique(feat, axis=0)) == len(feat)
        default = default_config(program.kernel, COST)
        assert (feat == default).all(axis=1).sum() == 1
        rank = len(program.kernel.out_shape)
        assert (feat[:, 8:8 + rank] >= 1).all() and (feat[:, 8 + rank:14] == 0).all()
        assert np.isfinite(tile_runtime_ns(program.kernel, feat, COST)).all()
    again = tile_configs(programs["kernels.f2"], 30, SEARCH, np.random.default_rng(0))
    assert np.array_equal(again, tile_configs(programs["kernels.f2"], 30, SEARCH, np.random.default_rng(0)))


def test_a_kernel_with_one_tiling_gets_one_config():
    text = FUSED.replace("f32[4,512,1024]", "f32[1,8,8]").replace("f32[4,256,512]", "f32[1,8,8]") \
        .replace("f32[4,256,1024]", "f32[1,8,8]")
    program = tile_programs(parse_module(text))[1]
    assert program.kernel.out_shape == (1, 8, 8)
    assert tile_configs(program, 10, SEARCH, np.random.default_rng(0)).shape == (1, 24)


def test_one_and_three_dimensional_convolutions_map_to_two_spatial_dims():
    one = """HloModule c1
%f (a: f32[2,100,8], k: f32[5,8,16]) -> f32[2,50,16] {
  %a = f32[2,100,8]{2,1,0} parameter(0)
  %k = f32[5,8,16]{2,1,0} parameter(1)
  ROOT %c = f32[2,50,16]{2,1,0} convolution(%a, %k), window={size=5 stride=2 pad=2_1}, dim_labels=b0f_0io->b0f
}
ENTRY %m (x: f32[2,100,8], y: f32[5,8,16]) -> f32[2,50,16] {
  %x = f32[2,100,8]{2,1,0} parameter(0)
  %y = f32[5,8,16]{2,1,0} parameter(1)
  ROOT %z = f32[2,50,16]{2,1,0} fusion(%x, %y), kind=kOutput, calls=%f
}
"""
    assert tile_programs(parse_module(one))[0].kernel == TileKernel("conv", (2, 1, 50, 16), 4, 8, (1, 5, 2),
                                                                    n_inputs=2, n_ops=1, f32=True)
    three = one.replace("f32[2,100,8]", "f32[2,4,6,100,8]").replace("f32[5,8,16]", "f32[3,3,5,8,16]") \
        .replace("f32[2,50,16]", "f32[2,4,6,50,16]").replace("{2,1,0}", "{4,3,2,1,0}") \
        .replace("size=5 stride=2 pad=2_1", "size=3x3x5 stride=1x1x2 pad=1_1x1_1x2_1") \
        .replace("b0f_0io->b0f", "b012f_012io->b012f")
    assert tile_programs(parse_module(three))[0].kernel.out_shape == (2, 24, 50, 16)
    assert tile_programs(parse_module(three))[0].kernel.window == (3, 5, 2)


def test_a_large_fused_kernel_is_described_in_linear_time(monkeypatch):
    """The kernel's output was looked up again for every node (each lookup scans every node): a compiled 120-layer
    MLP gradient (3124 fusions, 745k instructions) spent minutes in `tile_kernel` alone."""
    import pipeline.hlo.kernel as kernel
    n = 400
    body = [f"  %n{i} = f32[8]{{0}} negate(%n{i - 1})" for i in range(1, n)]
    text = "\n".join(["HloModule chain", "%f (p: f32[8]) -> f32[8] {", "  %n0 = f32[8]{0} parameter(0)", *body,
                      f"  ROOT %r = f32[8]{{0}} exponential(%n{n - 1})", "}", "ENTRY %e (x: f32[8]) -> f32[8] {",
                      "  %x = f32[8]{0} parameter(0)", "  ROOT %z = f32[8]{0} fusion(%x), kind=kLoop, calls=%f", "}"])
    calls = []
    real = kernel.kernel_output
    monkeypatch.setattr(kernel, "kernel_output", lambda graph: calls.append(1) or real(graph))
    (program,) = tile_programs(parse_module(text))
    assert program.kernel == TileKernel("elementwise", (8,), 4, n_inputs=1, n_ops=n)
    assert len(calls) <= 2
