"""LayoutSpace: choices per block, node_config_feat encoding, JSON layouts, and the bad-input errors."""
from __future__ import annotations

import numpy as np
import pytest
from tuning_hlo import DOT_RESHAPE, KINDS_CHAIN, NO_CONFIGURABLE, RESHAPES, space_of

from pipeline.hlo.featurize import layout_program, parse_module
from pipeline.tuning.space import LayoutSpace, SpaceError


def test_blocks_choices_and_defaults_of_a_dot_and_a_reshape():
    space = space_of(DOT_RESHAPE)
    assert space.node_config_ids.tolist() == [2, 4]                 # dot.3, reshape.5
    assert space.ranks.tolist() == [[2, 2, 0], [2, 2, 0]]          # no kernel block outside convolutions
    assert space.n_choices.tolist() == [[3, 3, 1], [3, 3, 1]]      # default + 2 permutations of rank 2
    assert space.defaults[0] == ((1, 0), (1, 0), None)             # row-major


def test_encode_writes_official_blocks_and_decode_inverts_it():
    space = space_of(DOT_RESHAPE)
    cand = space.default(2)
    cand[1, 1, 0], cand[1, 1, 1] = 1, 2                            # reshape output (0, 1), input (1, 0)
    feat = space.encode(cand)
    assert feat.shape == (2, 2, 18) and feat.dtype == np.int8
    assert (feat[0] == -1).all()
    assert feat[1, 1, :6].tolist() == [0, 1, -1, -1, -1, -1]
    assert feat[1, 1, 6:12].tolist() == [1, 0, -1, -1, -1, -1]
    assert (feat[1, 0] == -1).all() and (feat[1, 1, 12:] == -1).all()
    assert np.array_equal(space.decode(feat), cand)


def test_layouts_name_instructions_and_read_back():
    space = space_of(RESHAPES)
    cand = space.random(1, 0.3, np.random.default_rng(1))[0]
    objects = space.layouts(cand)
    assert [o["instruction"] for o in objects] == ["reshape.2", "reshape.4", "reshape.6", "reshape.8"]
    assert {o["computation"] for o in objects} == {"main.9"} and all(o["kernel"] is None for o in objects)
    assert np.array_equal(space.from_layouts(objects, "x.json"), cand)
    with pytest.raises(SpaceError, match="x.json: instruction 'tanh.3' of computation 'main.9' is not configurable"):
        space.from_layouts([{"computation": "main.9", "instruction": "tanh.3", "output": [0, 1]}], "x.json")


def test_mutations_change_blocks_and_neighbours_cover_every_single_change():
    space = space_of(RESHAPES)
    rng = np.random.default_rng(0)
    children = space.mutate(space.default(50), 0.0, rng)
    assert ((children != 0).sum(axis=(1, 2)) == 1).all()           # exactly one block changed
    moves = space.moves(space.default()[0])
    rows = space.apply_moves(space.default()[0], moves)
    assert len(rows) == 8 * 24 and len(moves) == len(rows)         # 8 free blocks x 24 other choices
    assert len(np.unique(rows.reshape(len(rows), -1), axis=0)) == len(rows)
    assert ((rows != 0).sum(axis=(1, 2)) == 1).all()                # each a single change of the default
    k, b, choice = moves[5]
    assert rows[5, k, b] == choice and choice != 0


def test_a_program_without_configurable_nodes_is_refused_in_one_line():
    program = layout_program(parse_module(NO_CONFIGURABLE, "plain.hlo.txt"))
    with pytest.raises(SpaceError, match=r"^plain.hlo.txt: no configurable node \(convolution, dot, reshape\)"):
        LayoutSpace.of(program.graph, program.config_node_ids, "plain.hlo.txt")


def test_a_long_program_is_searched_in_linear_time(monkeypatch):
    """The choices per block are computed once, not per block read: `random` over a program of 600 configurable
    nodes reads the table 1200 times (it took minutes at 12k nodes when every read rebuilt it)."""
    space = space_of(DOT_RESHAPE)
    assert space.n_choices is space.n_choices
    free = space.free_blocks()
    free[:] = -1                                            # a caller's copy: the space keeps its own
    assert space.free_blocks().tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    body = "\n".join(f"  r{i} = f32[4,8]{{1,0}} reshape(f32[8,4]{{1,0}} {'p' if i == 0 else f'q{i - 1}'})\n"
                     f"  q{i} = f32[8,4]{{1,0}} reshape(f32[4,8]{{1,0}} r{i})" for i in range(300))
    long = space_of(f"HloModule long\n\nENTRY main {{\n  p = f32[8,4]{{1,0}} parameter(0)\n{body}\n"
                    f"  ROOT out = f32[8,4]{{1,0}} copy(q299)\n}}\n")
    assert long.n_nodes == 600 and len(long.free_blocks()) == 1200
    calls = []
    original = np.ndenumerate
    monkeypatch.setattr(np, "ndenumerate", lambda a: calls.append(1) or original(a))
    draws = long.random(8, 0.5, np.random.default_rng(0))
    assert draws.shape == (8, 600, 3) and len(calls) <= 1


def test_a_block_spelt_out_as_its_default_layout_is_the_default():
    space = space_of(DOT_RESHAPE)                                  # every block row-major (1, 0) by default
    assert space.default_choices.tolist() == [[2, 2, 0], [2, 2, 0]]   # permutations(2) = (0, 1), (1, 0)
    cand = np.array([[[2, 1, 0], [2, 2, 0]], [[1, 2, 0], [0, 1, 0]]], dtype=np.int16)   # [2, NC, 3]
    canonical = space.canonical(cand)
    assert canonical.dtype == np.int16
    assert canonical.tolist() == [[[0, 1, 0], [0, 0, 0]], [[1, 0, 0], [0, 1, 0]]]
    assert cand[0, 0, 0] == 2                                      # a copy: the input is unchanged
    assert (space.encode(canonical[:1])[0, 1] == -1).all()          # the reshape spelt out as default: all -1


def test_freeze_beside_keeps_the_nodes_next_to_an_unmeasured_block_at_the_default():
    space = space_of(KINDS_CHAIN)                # reshape.2 -tanh- reshape.4 -tanh-tanh- reshape.7
    reshape = space.kinds[0][0][0]
    narrow = space.only_kinds([[reshape, 1, 2], [reshape, 0, 2], [reshape, 1, 3]])   # reshape.2's output unmeasured
    assert narrow.frozen.tolist() == [[True, False, False], [False, False, False], [False, False, False]]
    assert narrow.beside_unmeasured(0).tolist() == [False, False, False]
    assert narrow.freeze_beside(0) is narrow
    assert narrow.beside_unmeasured(1).tolist() == [True, False, False]      # its own input block; tanh.3 is 1 edge
    assert narrow.beside_unmeasured(2).tolist() == [True, True, False]       # reshape.4, 2 edges through tanh.3
    assert narrow.beside_unmeasured(9).tolist() == [True, True, False]       # reshape.7 lies behind reshape.4
    wide = narrow.freeze_beside(2)
    assert wide.frozen.tolist() == [[True, True, False], [True, True, False], [False, False, False]]
    assert np.array_equal(wide.unmeasured, narrow.frozen)                     # by kind: still the one block
    assert dict(wide.frozen_kinds(unmeasured=True)) == {(reshape, 0, 3): 1} and sum(wide.frozen_kinds().values()) == 4
    assert wide.search_blocks().tolist() == [[2, 0], [2, 1]]
    assert space.freeze_beside(2) is space and space.only_kinds(None).beside_unmeasured(3).tolist() == [False] * 3


def test_only_kinds_freezes_the_blocks_of_other_kinds_at_the_default():
    space = space_of(DOT_RESHAPE)                                  # dot.3 (rank 2), reshape.5 (rank 2)
    dot, reshape = (space.graph.nodes[int(n)].opcode for n in space.node_config_ids)
    assert space.kinds == [[(dot, 0, 2), (dot, 1, 2), None], [(reshape, 0, 2), (reshape, 1, 2), None]]
    assert space.only_kinds(None) is space and space.frozen is None
    narrow = space.only_kinds([[reshape, 0, 2], [reshape, 1, 2], [dot, 2, 4]])   # lists as the guard file holds
    assert narrow.frozen.tolist() == [[True, True, False], [False, False, False]]
    assert dict(narrow.frozen_kinds()) == {(dot, 0, 2): 1, (dot, 1, 2): 1}
    rows = np.array([[[1, 0, 0], [0, 0, 0]], [[0, 0, 0], [1, 1, 0]]], dtype=np.int16)   # the dot, the reshape changed
    assert narrow.changes_frozen(rows).tolist() == [True, False]
    assert space.changes_frozen(rows).tolist() == [False, False]
    assert narrow.search_blocks().tolist() == [[1, 0], [1, 1]] and len(narrow.free_blocks()) == 4
    rng = np.random.default_rng(0)
    assert (narrow.random(200, 0.0, rng)[:, 0] == 0).all()
    assert (narrow.mutate(narrow.default(200), 2.0, rng)[:, 0] == 0).all()
    assert set(narrow.moves(narrow.default()[0])[:, 0].tolist()) == {1}
    cand = np.array([[[1, 1, 0], [1, 0, 0]]], dtype=np.int16)      # the dot changed: written as the default
    assert narrow.canonical(cand).tolist() == [[[0, 0, 0], [1, 0, 0]]]
    assert np.array_equal(narrow.decode(narrow.encode(cand)), cand)  # encoding still covers every block
    none = space.only_kinds([])
    assert len(none.search_blocks()) == 0 and len(none.moves(none.default()[0])) == 0
    assert np.array_equal(none.mutate(none.default(3), 1.0, rng), none.default(3))


UNIT_DIMS = """HloModule ones, entry_computation_layout={(f32[1,1]{1,0}, f32[8,1,4]{2,1,0})->f32[1,1,1,1]{3,2,1,0}}

ENTRY main.5 {
  a.1 = f32[1,1]{1,0} parameter(0)
  b.2 = f32[8,1,4]{2,1,0} parameter(1)
  dot.3 = f32[1,1]{1,0} dot(a.1, a.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  reshape.4 = f32[1,8,4]{2,1,0} reshape(b.2)
  ROOT reshape.5 = f32[1,1,1,1]{3,2,1,0} reshape(dot.3)
}
"""


def test_a_tensor_of_size_1_dims_only_has_one_layout():
    """`x @ w` on f32[1,1] reshaped to f32[1,1,1,1]: autotune predicted a 3.1x speed-up from writing the output as
    [1, 0, 3, 2] instead of [3, 2, 1, 0], which lay out the same one float. A block whose dims are all of size 1 is
    now the default in every order and is not searched; an order of a tensor with only some size-1 dims is its own
    layout (the (8, 128) tiling pads a size-1 dim moved minor)."""
    from pipeline.hlo.layout_ids import layout_id

    space = space_of(UNIT_DIMS)
    dot, wide, ones = range(3)                                              # dot.3, reshape.4, reshape.5
    cand = space.default(1)
    cand[0, ones, 0] = 1 + layout_id((1, 0, 3, 2))                          # an f32[1,1,1,1]: any order, one float
    cand[0, wide, 1] = 1 + layout_id((2, 1, 0))                             # f32[8,1,4] spelt out: default
    assert not space.canonical(cand).any()
    moved = space.default(1)
    moved[0, wide, 0] = 1 + layout_id((2, 0, 1))                            # f32[1,8,4]: the size-1 dim second-minor
    assert space.canonical(moved)[0, wide, 0] == 1 + layout_id((2, 0, 1))
    searched = {tuple(kb) for kb in space.search_blocks().tolist()}
    assert (dot, 0) not in searched and (ones, 0) not in searched and (ones, 1) not in searched
    assert (wide, 0) in searched and (wide, 1) in searched


def test_a_one_layout_block_stays_unsearched_when_kinds_freeze_nothing():
    space = space_of(UNIT_DIMS)
    every_kind = [kind for row in space.kinds for kind in row if kind is not None]
    narrow = space.only_kinds(every_kind)                              # every kind measured: frozen all False
    assert not narrow.frozen.any()
    assert narrow.search_blocks().tolist() == space.search_blocks().tolist() == [[1, 0], [1, 1]]   # reshape.4 only


def test_a_layout_of_too_few_dims_is_refused():
    space = space_of(RESHAPES)                                          # rank-4 blocks
    with pytest.raises(SpaceError, match=r"x.json: reshape.2.output: expected 4 dims, got \[1, 0\]"):
        space.from_layouts([{"computation": "main.9", "instruction": "reshape.2", "output": [1, 0]}], "x.json")


def test_random_candidates_honour_the_default_probability():
    space = space_of(RESHAPES)                                          # 8 searched blocks of 25 choices
    rng = np.random.default_rng(0)
    assert (space.random(50, 1.0, rng) == 0).all()                    # always the default
    k, b = space.search_blocks().T                                    # the kernels (1 choice) are left out
    assert (space.random(50, 0.0, rng)[:, k, b] >= 1).all()           # never: a permutation, choice 1..24
