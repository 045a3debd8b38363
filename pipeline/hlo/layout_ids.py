"""Layout semantics shared by the featuriser and the cost model: layout ids (an index into every minor-to-major
order of a rank), the row-major and compiler-default layouts of a node, and the decoding of one node_config_feat
block (minor-to-major dims padded with -1; all -1 = the compiler default)."""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import HloNode


@lru_cache(maxsize=None)
def permutations(rank: int) -> np.ndarray:
    """int64 [rank!, rank]: every minor-to-major order of a rank-`rank` tensor; a layout id indexes this."""
    perms = list(itertools.permutations(range(rank)))
    return np.array(perms, dtype=np.int64).reshape(len(perms), rank)  # [rank!, rank]


@lru_cache(maxsize=None)
def _code_to_id(rank: int) -> np.ndarray:
    table = np.full(max(1, rank ** rank), -1, dtype=np.int64)
    table[(permutations(rank) * rank ** np.arange(rank)).sum(axis=1)] = np.arange(len(permutations(rank)))
    return table


def layout_id(minor_to_major) -> int:
    """Layout id of a minor-to-major tuple (a permutation of range(rank))."""
    m2m = tuple(int(d) for d in minor_to_major)
    rank = len(m2m)
    code = sum(d * rank ** i for i, d in enumerate(m2m)) if rank else 0
    if sorted(m2m) != list(range(rank)):
        raise ValueError(f"layout {m2m} is not a permutation of range({rank})")
    return int(_code_to_id(rank)[code])


@lru_cache(maxsize=None)
def row_major_id(rank: int) -> int:
    return layout_id(range(rank - 1, -1, -1))


def decode_block(block: np.ndarray, rank: int, default_id: int, where: str) -> np.ndarray:
    """Layout ids [C] from one 6-wide config block [C, 6]; all -1 -> default_id."""
    block = np.asarray(block, dtype=np.int64)
    is_default = (block == -1).all(axis=1)
    codes = (np.clip(block[:, :rank], 0, max(rank - 1, 0)) * rank ** np.arange(rank)).sum(axis=1)
    ids = _code_to_id(rank)[codes]
    valid = is_default | ((block[:, rank:] == -1).all(axis=1) & (ids >= 0) & (block[:, :rank] >= 0).all(axis=1)
                          & (block[:, :rank] < max(rank, 1)).all(axis=1))
    if not valid.all():
        bad = int(np.flatnonzero(~valid)[0])
        raise ValueError(f"{where}: config {bad} block {block[bad].tolist()} is not a permutation of "
                         f"range({rank}) padded with -1, nor all -1")
    return np.where(is_default, default_id, ids)


def default_layouts(node: HloNode, operands: list[HloNode]) -> tuple[int, int, int | None]:
    """Compiler-default (output, input, kernel) layout ids of a configurable node."""
    if node.opcode == op.CONVOLUTION:
        c = node.conv
        out = (c.output_feature, *reversed(c.output_spatial), c.output_batch)
        inp = (c.input_feature, *reversed(c.input_spatial), c.input_batch)
        ker = (c.kernel_output_feature, c.kernel_input_feature, *reversed(c.kernel_spatial))
        return layout_id(out), layout_id(inp), layout_id(ker)
    return row_major_id(node.rank), row_major_id(operands[0].rank), None
