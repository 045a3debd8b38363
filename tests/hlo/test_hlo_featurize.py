"""The featurizer on real JAX HLO text (lowered and compiled): graphs, configurations, files the data layer loads."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from pipeline.hlo import opcodes as op
from pipeline.hlo.configs import SearchParams
from pipeline.hlo.featurize import layout_configs, layout_program, parse_module, tile_programs
from pipeline.tpugraphs import writer
from pipeline.tpugraphs.dataset import load_graph, validate_node_config_feat

SEARCH = SearchParams(default_block_prob=(0.2, 0.6), perturbed_nodes_mean=1.0, swap_prob=0.5,
                      duplicate_fraction=0.03)


@pytest.fixture(scope="module")
def modules(jax_hlo):
    return {style: parse_module(text, f"jax_{style}.hlo.txt") for style, text in jax_hlo.items()}


def test_layout_graphs_of_both_styles(modules):
    for style, module in modules.items():
        program = layout_program(module)
        n = len(program.graph)
        assert program.node_feat.shape == (n, 140) and program.node_opcode.min() >= 1
        assert program.node_splits[0] == 0 and program.node_splits[-1] == n
        consumers, producers = program.edge_index.T
        assert (producers < consumers).all(), f"{style}: an edge points forward"   # topological order
        assert program.node_feat[:, 0].sum() == len(module.computations)          # one root per computation
        kinds = {int(program.node_opcode[i]) for i in program.config_node_ids}
        assert op.CONVOLUTION in kinds, style
        assert op.WHILE in program.node_opcode.tolist()
    lowered = layout_program(modules["lowered"])
    assert {op.CONDITIONAL, op.CALL, op.GET_TUPLE_ELEMENT, op.TUPLE, op.REDUCE, op.CONSTANT} <= set(
        lowered.node_opcode.tolist())
    dtypes = {n.dtype for n in lowered.graph.nodes}
    assert {"f32", "bf16", "s32", "pred", "tuple"} <= dtypes
    assert {op.DOT, op.RESHAPE} <= {int(lowered.node_opcode[i]) for i in lowered.config_node_ids}


def test_tile_graphs_need_fusions(modules):
    assert tile_programs(modules["lowered"]) == []
    programs = tile_programs(modules["compiled"])
    assert programs and all(p.node_feat.shape == (len(p.graph), 140) for p in programs)
    assert len({p.name for p in programs}) == len(programs)
    assert {p.kernel.kind for p in programs} >= {"dot", "elementwise", "reduce"}


@pytest.mark.parametrize("search", ["random", "default"])
def test_written_files_pass_the_data_layer(modules, tmp_path, search):
    program = layout_program(modules["lowered"])
    ids, feat = layout_configs(program, search, 50, SEARCH, np.random.default_rng(0))
    assert np.array_equal(ids, program.config_node_ids) and feat.shape == (50, len(ids), 18)
    capped, _ = layout_configs(program, search, 5, SEARCH, np.random.default_rng(0), max_config_nodes=2)
    assert len(capped) == 2 and set(capped) <= set(ids)
    path = tmp_path / "layout.npz"
    arrays = {"node_feat": program.node_feat, "node_opcode": program.node_opcode, "edge_index": program.edge_index}
    writer.write_layout_file(path, arrays, ids, program.node_splits, len(feat), [feat.astype(np.float32)],
                             [np.zeros(len(feat))], test=True)
    graph = load_graph(path, f"layout:xla:{search}", "test")
    validate_node_config_feat(graph)
    assert np.array_equal(graph.read_node_config_feat(), feat) and graph.node_splits.tolist()[-1] == len(graph.node_feat)
    assert (graph.config_runtime == 0).all()


def test_xla_dump_files_parse(tmp_path):
    """`XLA_FLAGS=--xla_dump_to=DIR` dumps (what PyTorch/XLA and TensorFlow users have) before and after optimisation."""
    script = ("import jax, jax.numpy as jnp\n"
              "f = jax.jit(lambda x, w: jax.nn.relu(x @ w).sum(axis=0))\n"
              "f(jnp.ones((8, 16)), jnp.ones((16, 4))).block_until_ready()\n")
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={tmp_path}", "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
    before = sorted(tmp_path.glob("*jit__lambda*.before_optimizations.txt"))
    after = sorted(tmp_path.glob("*jit__lambda*after_optimizations.txt"))
    assert len(before) == 1 and len(after) == 1
    program = layout_program(parse_module(before[0].read_text(), str(before[0])))
    assert op.DOT in {int(program.node_opcode[i]) for i in program.config_node_ids}
    assert tile_programs(parse_module(after[0].read_text(), str(after[0])))
