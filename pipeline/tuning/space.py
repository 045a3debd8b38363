"""The layout configuration space of a program and its candidates.

A candidate is int16 [NC, 3]: per configurable node (`node_config_ids` order) and block (output, input, kernel)
a choice index: 0 = the compiler default (an all -1 block), c >= 1 = `permutations(rank)[c - 1]` as the block's
minor-to-major order. A block that does not apply (the kernel of a dot or reshape) has one choice, 0. Batches of
candidates are [B, NC, 3]; `encode` turns them into `node_config_feat` rows int8 [B, NC, 18] exactly as the
dataset writes them (docs/tpugraphs-format.md), `decode` goes back, and `layouts` / `from_layouts` give and read
the JSON objects the autotune tool writes (names as in the HLO text). A space may hold `frozen` blocks (`only_kinds`,
`freeze_beside`): the searches never change them, and `canonical` writes them as the default.
"""
from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from dataclasses import dataclass
from typing import Collection, Sequence

import numpy as np

from pipeline.hlo.layout_ids import decode_block, layout_id, permutations
from pipeline.hlo.configs import block_specs, block_tensors
from pipeline.hlo.featurize import why_no_layout_node
from pipeline.hlo.graph import HloGraph
from pipeline.tpugraphs.schema import MAX_DIMS, NODE_CONFIG_FEAT_DIM

BLOCKS = ("output", "input", "kernel")
DEFAULT_CHOICE = 0


class SpaceError(ValueError):
    """A program or a layouts JSON that gives no configuration space (one line)."""


@dataclass(frozen=True)
class LayoutSpace:
    """The configuration space of one graph over its configurable nodes."""

    graph: HloGraph
    node_config_ids: np.ndarray      # [NC] int64, sorted
    ranks: np.ndarray                # [NC, 3] int64: tensor rank of each block, 0 where the block does not apply
    defaults: tuple                  # [NC][3]: the compiler-default minor-to-major tuple, None where not applicable
    frozen: np.ndarray | None = dataclasses.field(default=None, compare=False)   # [NC, 3] bool: kept at the default
    unmeasured: np.ndarray | None = dataclasses.field(default=None, compare=False)  # [NC, 3] bool: frozen by kind

    @classmethod
    def of(cls, graph: HloGraph, node_config_ids: Sequence[int], where: str) -> "LayoutSpace":
        """The space of `graph` over `node_config_ids`; SpaceError naming `where` when there is no node."""
        ids = np.asarray(node_config_ids, dtype=np.int64)
        if len(ids) == 0:
            raise SpaceError(f"{where}: {why_no_layout_node(graph)}")
        ranks = np.zeros((len(ids), len(BLOCKS)), dtype=np.int64)
        defaults = [[None] * len(BLOCKS) for _ in ids]
        for k, spec in enumerate(block_specs(graph, ids)):
            for block, rank, m2m in spec.blocks:
                ranks[k, block], defaults[k][block] = rank, m2m
        return cls(graph, ids, ranks, tuple(tuple(d) for d in defaults))

    @property
    def n_nodes(self) -> int:
        return len(self.node_config_ids)

    @functools.cached_property
    def n_choices(self) -> np.ndarray:
        """int64 [NC, 3]: choices per block (1 + rank! where it applies, else 1); computed once (searches read it per
        block, and a real program has tens of thousands of blocks)."""
        out = np.ones_like(self.ranks)
        for (k, b), rank in np.ndenumerate(self.ranks):
            if rank:
                out[k, b] = 1 + len(permutations(int(rank)))
        return out

    @functools.cached_property
    def default_choices(self) -> np.ndarray:
        """int16 [NC, 3]: the choice (>= 1) that spells out the block's compiler-default layout, 0 where the block
        does not apply."""
        out = np.zeros(self.ranks.shape, dtype=np.int16)
        for (k, b), rank in np.ndenumerate(self.ranks):
            if rank:
                out[k, b] = 1 + layout_id(self.defaults[k][b])
        return out

    @functools.cached_property
    def one_layout(self) -> np.ndarray:
        """bool [NC, 3]: the blocks whose tensor has every dim of size 1 (`f32[1,1,1,1]`, rank >= 2): every order lays
        out the same one element, tiled or not, so the compiler default is its one layout. Orders of a tensor with
        some size-1 dims stay apart: a cost model that tiles the two most-minor dims (the project's, a TPU's) or
        charges a copy between two orders tells them apart (folding them into one made stage autotune's oracle 1.2-4.5%
        slower on three CNN programs: docs/autotune-log.md, "Tensors of size-1 dims")."""
        out = np.zeros(self.ranks.shape, dtype=bool)
        for (k, b), rank in np.ndenumerate(self.ranks):
            if rank < 2:
                continue
            tensor = block_tensors(self.graph, self.graph.nodes[int(self.node_config_ids[k])])[b]
            out[k, b] = all(int(d) == 1 for d in tensor.shape)
        return out

    def canonical(self, candidates: np.ndarray) -> np.ndarray:
        """int16 copy of candidates [..., NC, 3] with every block set explicitly to its compiler-default layout written
        as the default (choice 0), and every block of `one_layout` too. Both spell one configuration (the cost models
        resolve -1 to that layout), but a model that reads the "was default" flags or the permutation can score them
        apart and find a gain in pinning what the compiler does anyway (3.1x predicted for reordering an
        `f32[1,1,1,1]`); the search scores and reports the canonical form only."""
        cand = np.asarray(candidates, dtype=np.int16)
        explicit = ((cand == self.default_choices) & (self.default_choices > 0)) | self.one_layout
        if self.frozen is not None:
            explicit = explicit | self.frozen
        return np.where(explicit, DEFAULT_CHOICE, cand).astype(np.int16)

    @functools.cached_property
    def _free(self) -> np.ndarray:
        return np.argwhere(self.n_choices > 1)

    @functools.cached_property
    def _searched(self) -> np.ndarray:
        frozen = self.one_layout if self.frozen is None else self.one_layout | self.frozen
        return np.argwhere((self.n_choices > 1) & ~frozen)

    def free_blocks(self) -> np.ndarray:
        """int64 [F, 2]: (node position, block) of every block with more than one choice."""
        return self._free.copy()

    def search_blocks(self) -> np.ndarray:
        """int64 [S, 2]: the free blocks a search may change (every free block not `frozen`, nor `one_layout`)."""
        return self._searched.copy()

    @functools.cached_property
    def kinds(self) -> list[list[tuple[int, int, int] | None]]:
        """[NC][3]: each free block's kind (opcode id, block, rank), None where the block does not apply."""
        opcodes = [self.graph.nodes[int(n)].opcode for n in self.node_config_ids]
        return [[(int(opcodes[k]), b, int(self.ranks[k, b])) if self.n_choices[k, b] > 1 else None
                 for b in range(len(BLOCKS))] for k in range(self.n_nodes)]

    def only_kinds(self, kinds: Collection[Sequence[int]] | None) -> "LayoutSpace":
        """This space with every free block whose kind (`kinds`: opcode id, block, rank) is not in `kinds` frozen at
        the compiler default; itself when kinds is None."""
        if kinds is None:
            return self
        allowed = {tuple(int(v) for v in kind) for kind in kinds}
        frozen = np.array([[kind is not None and kind not in allowed for kind in row] for row in self.kinds],
                          dtype=bool).reshape(self.n_choices.shape)                # [NC, 3]
        return dataclasses.replace(self, frozen=frozen, unmeasured=frozen)

    def beside_unmeasured(self, reach: int) -> np.ndarray:
        """bool [NC]: the configurable nodes holding an unmeasured block (`only_kinds`) and those within `reach` graph
        edges of one (either direction, through nodes that are not configurable); none for reach 0."""
        near = np.zeros(self.n_nodes, dtype=bool)
        if self.unmeasured is None or reach <= 0 or not self.unmeasured.any():
            return near
        near[self.unmeasured.any(axis=1)] = True
        position = {int(n): k for k, n in enumerate(self.node_config_ids)}
        neighbours: dict[int, set[int]] = {}
        for consumer, producer in self.graph.edge_index():                      # [E, 2] rows
            neighbours.setdefault(int(consumer), set()).add(int(producer))
            neighbours.setdefault(int(producer), set()).add(int(consumer))
        sources = {int(self.node_config_ids[k]) for k in np.flatnonzero(self.unmeasured.any(axis=1))}
        seen, frontier = set(sources), set(sources)
        for _ in range(reach):
            frontier = {m for n in frontier for m in neighbours.get(n, ())} - seen
            seen |= frontier
            for n in frontier & position.keys():
                near[position[n]] = True
            frontier -= position.keys()                 # a configurable node has a layout of its own: stop there
        return near

    def freeze_beside(self, reach: int) -> "LayoutSpace":
        """This space with every block of the nodes `beside_unmeasured(reach)` frozen too (itself when no block is
        unmeasured): a change next to a block no valid configuration changed meets a layout pair the models never saw."""
        near = self.beside_unmeasured(reach)
        if not near.any():
            return self
        return dataclasses.replace(self, frozen=self.frozen | (near[:, None] & (self.n_choices > 1)))

    def changes_frozen(self, candidates: np.ndarray) -> np.ndarray:
        """bool [B]: whether each of candidates [B, NC, 3] changes a frozen block (all False without any)."""
        cand = np.asarray(candidates)
        if self.frozen is None:
            return np.zeros(len(cand), dtype=bool)
        return (cand[:, self.frozen] != 0).any(axis=1)

    def frozen_kinds(self, unmeasured: bool = False) -> Counter:
        """Counter of the kinds (opcode id, block, rank) of the frozen blocks (`unmeasured`: of those frozen by kind)."""
        mask = self.unmeasured if unmeasured else self.frozen
        if mask is None:
            return Counter()
        return Counter(self.kinds[k][b] for k, b in np.argwhere(mask))

    def default(self, n: int = 1) -> np.ndarray:
        """int16 [n, NC, 3]: the compiler default, n times."""
        return np.zeros((n, self.n_nodes, len(BLOCKS)), dtype=np.int16)

    def encode(self, candidates: np.ndarray) -> np.ndarray:
        """node_config_feat int8 [B, NC, 18] of candidates [B, NC, 3] (all -1 for choice 0)."""
        cand = np.asarray(candidates)
        if cand.ndim != 3 or cand.shape[1:] != (self.n_nodes, len(BLOCKS)):
            raise ValueError(f"candidates: expected [B, {self.n_nodes}, 3], got {cand.shape}")
        feat = np.full((len(cand), self.n_nodes, NODE_CONFIG_FEAT_DIM), -1, dtype=np.int8)
        for k, b in self.free_blocks():
            rank = int(self.ranks[k, b])
            table = np.full((1 + len(permutations(rank)), rank), -1, dtype=np.int8)   # [choices, rank]
            table[1:] = permutations(rank)
            feat[:, k, b * MAX_DIMS:b * MAX_DIMS + rank] = table[cand[:, k, b]]
        return feat

    def decode(self, node_config_feat: np.ndarray) -> np.ndarray:
        """candidates int16 [B, NC, 3] of node_config_feat rows [B, NC, 18] (inverse of `encode`)."""
        feat = np.asarray(node_config_feat)
        cand = self.default(len(feat))
        for k, b in self.free_blocks():                   # one block of every row at once
            ids = decode_block(feat[:, k, b * MAX_DIMS:(b + 1) * MAX_DIMS], int(self.ranks[k, b]), -1,
                               "node_config_feat")                              # [B] layout ids, -1: all -1
            cand[:, k, b] = np.where(ids < 0, DEFAULT_CHOICE, 1 + ids)
        return cand

    def minor_to_major(self, candidate: np.ndarray, k: int, b: int) -> list[int] | None:
        """Block b of node position k as a minor-to-major list, None for the compiler default / no block."""
        choice = int(candidate[k, b])
        if choice == DEFAULT_CHOICE or not self.ranks[k, b]:
            return None
        return [int(d) for d in permutations(int(self.ranks[k, b]))[choice - 1]]

    def layouts(self, candidate: np.ndarray) -> list[dict]:
        """One JSON object per configurable instruction: computation, instruction, output, input, kernel."""
        objects = []
        for k, n in enumerate(self.node_config_ids):
            node = self.graph.nodes[int(n)]
            objects.append({"computation": node.computation, "instruction": node.name,
                            **{name: self.minor_to_major(candidate, k, b) for b, name in enumerate(BLOCKS)}})
        return objects

    def from_layouts(self, objects: Sequence[dict], where: str) -> np.ndarray:
        """candidate int16 [NC, 3] from `layouts` objects; SpaceError naming `where` on an unknown instruction."""
        position = {(self.graph.nodes[int(n)].computation, self.graph.nodes[int(n)].name): k
                    for k, n in enumerate(self.node_config_ids)}
        cand = self.default()[0]
        for obj in objects:
            key = (obj.get("computation"), obj.get("instruction"))
            if key not in position:
                raise SpaceError(f"{where}: instruction {key[1]!r} of computation {key[0]!r} is not configurable here")
            k = position[key]
            for b, name in enumerate(BLOCKS):
                value = obj.get(name)
                if value is None:
                    continue
                if len(value) != self.ranks[k, b]:
                    raise SpaceError(f"{where}: {key[1]}.{name}: expected {int(self.ranks[k, b])} dims, got {value}")
                cand[k, b] = 1 + layout_id(value)
        return cand

    def random(self, n: int, default_prob: float, rng: np.random.Generator) -> np.ndarray:
        """int16 [n, NC, 3]: each searched block the default with `default_prob`, else a uniform permutation."""
        cand = self.default(n)
        for k, b in self._searched:
            count = int(self.n_choices[k, b])
            draw = rng.integers(1, count, size=n)
            cand[:, k, b] = np.where(rng.random(n) < default_prob, DEFAULT_CHOICE, draw)
        return cand

    def mutate(self, parents: np.ndarray, mean_extra: float, rng: np.random.Generator) -> np.ndarray:
        """Copies of parents [B, NC, 3], each with 1 + Poisson(mean_extra) random searched blocks set to a random
        other choice (unchanged copies when there is none)."""
        children = np.array(parents, dtype=np.int16, copy=True)
        free, counts = self._searched, self.n_choices
        if len(free) == 0:
            return children
        for child in children:
            for k, b in free[rng.integers(len(free), size=1 + rng.poisson(mean_extra))]:
                child[k, b] = (child[k, b] + rng.integers(1, counts[k, b])) % counts[k, b]
        return children

    def moves(self, candidate: np.ndarray) -> np.ndarray:
        """int64 [N, 3]: every single-block change (k, b, choice) of candidate [NC, 3], searched blocks in order,
        choices ascending (memory N x 3: a real program has hundreds of thousands of them)."""
        free = self._searched                                                        # [F, 2] (k, b)
        counts = self.n_choices[free[:, 0], free[:, 1]]                              # [F]
        blocks = np.repeat(free, counts, axis=0)                                     # [sum counts, 2]
        choices = np.arange(len(blocks)) - np.repeat(np.cumsum(counts) - counts, counts)
        every = np.column_stack([blocks, choices]).astype(np.int64)                  # [sum counts, 3]
        return every[every[:, 2] != np.asarray(candidate)[every[:, 0], every[:, 1]]]

    def apply_moves(self, candidate: np.ndarray, moves: np.ndarray) -> np.ndarray:
        """int16 [M, NC, 3]: candidate with each of moves [M, 3] (k, b, choice) applied alone."""
        moves = np.asarray(moves, dtype=np.int64).reshape(-1, 3)                         # [M, 3]
        out = np.repeat(np.asarray(candidate, dtype=np.int16)[None], len(moves), axis=0)  # [M, NC, 3]
        out[np.arange(len(moves)), moves[:, 0], moves[:, 1]] = moves[:, 2]
        return out
