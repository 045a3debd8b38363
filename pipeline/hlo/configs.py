"""Layout configurations: which nodes are configurable, and the `random` / `default` searches over them.

A configuration row is int [NC, 18]: per configurable node three 6-wide blocks (output, input, kernel), each a
minor-to-major permutation of its tensor's rank padded with -1, or all -1 for the compiler default. The kernel
block only applies to convolutions.
- `random` search: every applicable block is the default (all -1) with a per-graph probability drawn from
  `default_block_prob`, else a uniformly random permutation of its rank.
- `default` search: starts from the compiler default (all -1) and changes 1 + Poisson(`perturbed_nodes_mean`)
  blocks, each set explicitly to its default permutation or to it with two adjacent dimensions swapped.
Both then replace `near_default_share` of the rows (0: none, no draw) with the compiler default with
1 + Poisson(`perturbed_nodes_mean`) blocks set to a uniformly random permutation (what the autotune search's
mutations of the default visit), and overwrite `duplicate_fraction` of the rows with copies of earlier rows
(runtimes get fresh noise).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import HloGraph, HloNode
from pipeline.hlo.layout_ids import default_layouts, permutations
from pipeline.tpugraphs.schema import MAX_DIMS, NODE_CONFIG_FEAT_DIM

SEARCHES = ("random", "default")


@dataclass(frozen=True)
class SearchParams:
    default_block_prob: tuple[float, float]
    perturbed_nodes_mean: float
    swap_prob: float
    duplicate_fraction: float
    near_default_share: float = 0.0


@dataclass(frozen=True)
class BlockSpec:
    """One configurable node's applicable blocks: (block index 0/1/2, tensor rank, default minor-to-major)."""

    node: int
    blocks: tuple[tuple[int, int, tuple[int, ...]], ...]


def choose_config_nodes(graph: HloGraph, max_nodes: int, rng: np.random.Generator) -> np.ndarray:
    """int64 [NC]: sorted ids of the configurable nodes (convolution, dot, reshape), at most `max_nodes`."""
    ids = np.array([i for i, n in enumerate(graph.nodes) if n.opcode in op.CONFIGURABLE], dtype=np.int64)
    if len(ids) > max_nodes:
        ids = np.sort(rng.choice(ids, size=max_nodes, replace=False))
    return ids


def block_tensors(graph: HloGraph, node: HloNode) -> tuple[HloNode, HloNode, HloNode | None]:
    """The tensors whose layouts a configurable node's output / input / kernel blocks set: the node itself, its first
    operand, its second (None without one; the kernel block only applies to convolutions)."""
    operands = [graph.nodes[o] for o in node.operands]
    return node, operands[0], operands[1] if len(operands) > 1 else None


def block_specs(graph: HloGraph, node_config_ids) -> list[BlockSpec]:
    specs = []
    for n in node_config_ids:
        node = graph.nodes[int(n)]
        operands = [graph.nodes[o] for o in node.operands]
        ids = default_layouts(node, operands)
        _, first, second = block_tensors(graph, node)
        ranks = (node.rank, first.rank, second.rank if ids[2] is not None else 0)
        blocks = tuple((b, r, tuple(int(v) for v in permutations(r)[ids[b]]))
                       for b, r in enumerate(ranks) if r > 0 and ids[b] is not None)
        specs.append(BlockSpec(int(n), blocks))
    return specs


def random_search(specs: list[BlockSpec], n_configs: int, default_prob: float,
                  rng: np.random.Generator) -> np.ndarray:
    """int8 [C, NC, 18]: uniformly random permutations, each block left default with `default_prob`."""
    feat = np.full((n_configs, len(specs), NODE_CONFIG_FEAT_DIM), -1, dtype=np.int8)
    for k, spec in enumerate(specs):
        for block, rank, _ in spec.blocks:
            perms = np.argsort(rng.random((n_configs, rank)), axis=1)          # [C, rank], uniform permutations
            keep = rng.random(n_configs) >= default_prob
            cols = slice(block * MAX_DIMS, block * MAX_DIMS + rank)
            feat[keep, k, cols] = perms[keep]
    return feat


def default_search(specs: list[BlockSpec], n_configs: int, params: SearchParams,
                   rng: np.random.Generator) -> np.ndarray:
    """int8 [C, NC, 18]: the compiler default with a few blocks set near their default permutation."""
    feat = np.full((n_configs, len(specs), NODE_CONFIG_FEAT_DIM), -1, dtype=np.int8)
    if not specs:
        return feat
    n_changes = 1 + rng.poisson(params.perturbed_nodes_mean, size=n_configs)
    for row, count in enumerate(n_changes):
        for k in rng.integers(len(specs), size=count):
            blocks = specs[k].blocks
            block, rank, m2m = blocks[rng.integers(len(blocks))]
            m2m = list(m2m)
            if rank > 1 and rng.random() < params.swap_prob:
                i = int(rng.integers(rank - 1))
                m2m[i], m2m[i + 1] = m2m[i + 1], m2m[i]
            feat[row, k, block * MAX_DIMS:block * MAX_DIMS + rank] = m2m
    return feat


def add_near_default(feat: np.ndarray, specs: list[BlockSpec], share: float, mean_extra: float,
                     rng: np.random.Generator) -> np.ndarray:
    """Replace round(share * C) random rows of feat [C, NC, 18] with the compiler default with 1 + Poisson(mean_extra)
    blocks set to a uniformly random permutation of their rank, in place; returns feat (no draw when share is 0)."""
    n = min(len(feat), int(round(share * len(feat))))
    blocks = [(k, block, rank) for k, spec in enumerate(specs) for block, rank, _ in spec.blocks]
    if n <= 0 or not blocks:
        return feat
    for row in rng.choice(len(feat), size=n, replace=False):
        feat[row] = -1
        for i in rng.integers(len(blocks), size=1 + rng.poisson(mean_extra)):
            k, block, rank = blocks[int(i)]
            feat[row, k, block * MAX_DIMS:block * MAX_DIMS + rank] = rng.permutation(rank)
    return feat


def add_duplicates(feat: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Overwrite round(fraction * C) rows (never row 0) with copies of earlier rows, in place; returns feat."""
    n = len(feat)
    n_dup = min(n - 1, int(round(fraction * n)))
    if n_dup <= 0:
        return feat
    for dst in np.sort(rng.choice(np.arange(1, n), size=n_dup, replace=False)):
        feat[dst] = feat[rng.integers(dst)]
    return feat


def sample_layout_configs(specs: list[BlockSpec], n_configs: int, search: str, params: SearchParams,
                          default_prob: float, rng: np.random.Generator) -> np.ndarray:
    """int8 [C, NC, 18] for one chunk of configurations of the given search."""
    if search == "random":
        feat = random_search(specs, n_configs, default_prob, rng)
    elif search == "default":
        feat = default_search(specs, n_configs, params, rng)
    else:
        raise ValueError(f"search: expected one of {SEARCHES}, got {search!r}")
    feat = add_near_default(feat, specs, params.near_default_share, params.perturbed_nodes_mean, rng)
    return add_duplicates(feat, params.duplicate_fraction, rng)
