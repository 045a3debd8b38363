"""The zoo's registry: every family by name, and the programs of a dataset with their source, family and size.

Sources follow TpuGraphs: `nlp` programs are Transformer encoders and decoders, `xla` programs mix every family.
Programs are drawn per (source, split) from a size grid: train and valid from the `train` grid, test from the
`test` grid, whose batches, widths and depths are larger, so test programs differ from train ones in size, not
only in random draws. Families are taken round-robin so every family appears in every large enough split. `extra_programs` adds programs of
other families (`EXTRA_SOURCES`: other frameworks' conventions, pipeline/zoo/framework.py) to chosen splits, leaving
the core draw as it was. The
valid split takes its families in the test split's rotation (same start), so model selection, ensemble weights and
the autotune guard are measured on the families that test holds (a valid split of other families than test's told
nothing about them: docs/decisions.md, "Valid like test").
"""
from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from pipeline.errors import PipelineError
from pipeline.tpugraphs.schema import SPLITS
from pipeline.zoo import cnn, framework, recurrent, transformer
from pipeline.zoo.common import DTYPES, Family, Size

CORE = (*cnn.FAMILIES, *transformer.FAMILIES, *recurrent.FAMILIES)
FAMILIES: dict[str, Family] = {f.name: f for f in (*CORE, *framework.FAMILIES)}
SOURCES: dict[str, tuple[str, ...]] = {"xla": tuple(f.name for f in CORE),
                                       "nlp": ("transformer_encoder", "transformer_decoder")}
# Families drawn only by `extra_programs` (data.generator.extra_programs), outside the presets' rotation
EXTRA_SOURCES: dict[str, tuple[str, ...]] = {"xla": tuple(f.name for f in framework.FAMILIES)}
SIZE_KEYS = ("batch", "width", "depth", "extent", "dtype")
SPLIT_GRID = {"train": "train", "valid": "train", "test": "test"}


@dataclass(frozen=True)
class ZooProgram:
    """One training-step program of the dataset."""

    name: str
    source: str          # "xla" | "nlp"
    family: str
    split: str           # "train" | "valid" | "test"
    size: Size

    @property
    def spec(self) -> Family:
        return FAMILIES[self.family]


def program_name(family: str, size: Size) -> str:
    return f"{family}_{size.dtype}_b{size.batch}_w{size.width}_d{size.depth}_e{size.extent}"


def grid_sizes(grid: Mapping) -> list[Size]:
    """Every Size of a grid {batch: [...], width: [...], depth: [...], extent: [...], dtype: [...]}; a grid lacking
    a key or holding a value of the wrong kind is refused in one line (PipelineError naming data.generator.sizes)."""
    missing = [k for k in SIZE_KEYS if k not in grid]
    if missing:
        raise PipelineError(f"data.generator.sizes: grid lacks {missing}; expected keys {list(SIZE_KEYS)}")
    try:
        values = [list(grid[k]) for k in SIZE_KEYS]
        sizes = [Size(int(b), int(w), int(d), int(e), str(t)) for b, w, d, e, t in itertools.product(*values)]
    except (TypeError, ValueError):
        raise PipelineError(f"data.generator.sizes: expected lists of integers for {list(SIZE_KEYS[:-1])} and of "
                            f"dtypes for dtype, got {dict(grid)}") from None
    unknown = sorted({s.dtype for s in sizes} - set(DTYPES))
    if unknown:
        raise PipelineError(f"data.generator.sizes: dtype {unknown}; expected among {sorted(DTYPES)}")
    return sizes


def _rng(seed: int, *key: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, *(zlib.crc32(k.encode()) for k in key)]))


def _round_robin(key: str, source: str, split: str, n: int, families: tuple[str, ...], start: int, pool: dict,
                 rng: np.random.Generator) -> list[ZooProgram]:
    """`n` programs of `split`, families in turn from `families[start]`, each size drawn without replacement from the
    family's `pool` (shared by the splits of one grid); raises naming `key` when a family's pool runs out."""
    out = []
    for i in range(int(n)):
        family = families[(start + i) % len(families)]
        if not pool[family]:
            raise PipelineError(f"{key}.{source}.{split}: asks for {n} programs, more than the {SPLIT_GRID[split]} "
                                f"grid holds for {family}")
        size = pool[family].pop(int(rng.integers(len(pool[family]))))
        out.append(ZooProgram(program_name(family, size), source, family, split, size))
    return out


def _pools(key: str, source: str, per_split: Mapping, families: tuple[str, ...], grids: Mapping) -> dict:
    """{grid name: {family: every size of the grid}} after checking the splits of `per_split`."""
    unknown = sorted(set(per_split) - set(SPLITS))
    if unknown:
        raise PipelineError(f"{key}.{source}: unknown splits {unknown}; expected {list(SPLITS)}")
    return {grid: {f: list(grid_sizes(grids[grid])) for f in families} for grid in set(SPLIT_GRID.values())}


def programs(counts: Mapping, grids: Mapping, seed: int) -> list[ZooProgram]:
    """The dataset's programs: counts {source: {split: n}}, grids {"train"|"test": size grid}.

    Names are unique within a source across all its splits: splits drawing from the same grid (train and valid)
    draw without replacement from one pool, so no program is in two splits (a label leak into model selection).
    A source asking for more programs than its grid holds raises. Valid's families follow test's rotation (the
    start that test's own random numbers draw); its sizes are its own draws.
    """
    key, out = "data.generator.programs", []
    for source, per_split in counts.items():
        if source not in SOURCES:
            raise PipelineError(f"{key}: unknown source {source!r}; expected {list(SOURCES)}")
        families = SOURCES[source]
        pools = _pools(key, source, per_split, families, grids)
        rngs = {split: _rng(seed, "programs", source, split) for split in SPLITS}
        starts = {split: int(rng.integers(len(families))) for split, rng in rngs.items()}
        starts["valid"] = starts["test"]              # valid's own start draw is replaced by test's
        for split in [s for s in SPLITS if s in per_split]:
            out += _round_robin(key, source, split, per_split[split], families, starts[split],
                                pools[SPLIT_GRID[split]], rngs[split])
    return out


def extra_programs(counts: Mapping, grids: Mapping, seed: int) -> list[ZooProgram]:
    """Programs of the `EXTRA_SOURCES` families, counts {source: {split: n}}, round-robin from a random start, sizes
    drawn without replacement from the split's grid (their family names keep them apart from `programs`' draw, which
    these leave unchanged). A source without extra families or a split asking for more than its grid holds raises."""
    key, out = "data.generator.extra_programs", []
    for source, per_split in counts.items():
        if source not in EXTRA_SOURCES:
            raise PipelineError(f"{key}: source {source!r} has no extra families; expected one of "
                                f"{list(EXTRA_SOURCES)}")
        families = EXTRA_SOURCES[source]
        pools = _pools(key, source, per_split, families, grids)
        for split in [s for s in SPLITS if s in per_split]:
            rng = _rng(seed, "extra", source, split)
            out += _round_robin(key, source, split, per_split[split], families, int(rng.integers(len(families))),
                                pools[SPLIT_GRID[split]], rng)
    return out
