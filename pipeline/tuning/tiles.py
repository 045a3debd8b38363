"""Tile sizes: per fused kernel of the optimised text, score every valid tile size with the tile model, keep the best.

Valid tile sizes are the built-in generator's (`pipeline.synth.tiles`): per output dimension a power of two or the
full size (the two minor dimensions at least `min_tile`), convolutions also an input-feature tile. A kernel with
more than `max_configs` of them is scored on that many drawn at random (the compiler default always included).
The pick is guarded like a layout pick: kept only when predicted faster than the default by the tile
collection's margin (`pipeline.tuning.guard`). Beside it, the model's `candidates` best tile sizes (the default
among them where it ranks there) are listed for timing on the hardware: the tile models order well but their
single best is sometimes far off (docs/autotune-log.md, "Tile candidates to time").
"""
from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from pipeline.featurizer.tile_configs import TileSearch
from pipeline.hlo.featurize import TileProgram
from pipeline.hlo.kernel import kernel_output
from pipeline.pruned import REPORT_FILE, PrunedGraph, collection_dir
from pipeline.files import read_json
from pipeline.pruning.repad import repad_config_feat
from pipeline.tpugraphs import writer
from pipeline.featurizer.tile_configs import default_config, encode_config, tile_choices
from pipeline.costmodel.tile import KERNEL_BOUNDS, OUTPUT_BOUNDS
from pipeline.tpugraphs.dataset import Collection
from pipeline.trained import prune_new_graph
from pipeline.tuning.scorers import Guide


def tile_candidates(program: TileProgram, search: TileSearch, max_configs: int,
                    rng: np.random.Generator) -> np.ndarray:
    """float32 [C, 24]: the compiler default first, then every valid tile size (or max_configs - 1 drawn)."""
    kernel = program.kernel
    rank = len(kernel.out_shape)
    smallest = [1] * max(0, rank - 2) + list(search.min_tile)[-min(rank, 2):]
    choices = [tile_choices(int(d), s) for d, s in zip(kernel.out_shape, smallest)]
    if kernel.kind == "conv":
        choices.append(tile_choices(kernel.contract, search.min_tile[0]))
    total = int(np.prod([len(c) for c in choices]))
    if total <= max_configs - 1:
        combos = list(itertools.product(*choices))
    else:
        flat = rng.choice(total, size=max_configs - 1, replace=False)
        combos = [tuple(c[i] for c, i in zip(choices, np.unravel_index(f, [len(c) for c in choices])))
                  for f in flat]
    rows = [encode_config(kernel, combo[:rank], combo[rank] if kernel.kind == "conv" else None) for combo in combos]
    default = default_config(kernel, search.cost)
    unique = [r for r in rows if not np.array_equal(r, default)]
    return np.stack([default, *unique]).reshape(-1, default.shape[0])          # [C, 24]


def tile_template(cfg: DictConfig, program: TileProgram, default_row: np.ndarray, collection: Collection,
                  work_dir: Path) -> tuple[PrunedGraph, float]:
    """(the kernel's pruned tile graph with the default as its one config, the pad value prune used)."""
    arrays = {"node_feat": program.node_feat, "node_opcode": program.node_opcode, "edge_index": program.edge_index}
    zeros = np.zeros(1, dtype=np.int64)
    with tempfile.TemporaryDirectory(prefix="autotune-tile-", dir=work_dir) as tmp:
        path = Path(tmp) / "kernel.npz"
        writer.write_tile_file(path, arrays, default_row.reshape(1, -1), zeros, zeros, test=True)
        graph = prune_new_graph(cfg, path, collection, Path(tmp) / "pruned")
    report = read_json(collection_dir(cfg.paths.pruned_dir, collection.slug) / REPORT_FILE)
    return graph, float(report["params"]["pad_value"])


@dataclass(frozen=True)
class TilePick:
    """One kernel's scored tile sizes: rows [C, 24] (the default first), the model's pick and whether it is kept."""

    rows: np.ndarray             # [C, 24] float32, unpadded (what the cost model reads)
    best: int                    # row index of the model's best non-default size (0 when there is none)
    score: float                 # its predicted log runtime ratio against the default (0.0 when there is none)
    kept: bool                   # the guard kept it (`Guard.keeps`)
    ranked: tuple = ()           # (row, predicted log ratio) of the model's best sizes, best first, the default
                                 # (scored 0) among them where it ranks: the candidates to time

    @property
    def pick(self) -> int:
        """The row the guard returns: best when kept, else the default (0)."""
        return self.best if self.kept else 0


def pick_tile(cfg: DictConfig, program: TileProgram, guide: Guide, search: TileSearch, max_configs: int,
              batch: int, work_dir: Path, rng: np.random.Generator, candidates: int = 0) -> TilePick:
    """Score every valid tile size of one kernel with the guide; the best kept when predicted faster than the
    default as the guide's rule asks (`pipeline.tuning.search.Guard`); the `candidates` best listed (`ranked`)."""
    rows = tile_candidates(program, search, max_configs, rng)
    template, pad = tile_template(cfg, program, rows[0], guide.collection, work_dir)
    scorer = guide.scorer(template)
    padded = repad_config_feat(rows[1:], pad)                                # [C - 1, 24]
    scores = np.concatenate([scorer(padded[lo:lo + batch]) for lo in range(0, len(padded), batch)] or [[]])
    every = np.concatenate([[0.0], scores])                                  # [C]: the default scores 0
    ranked = tuple((int(i), float(every[i])) for i in np.argsort(every, kind="stable")[:candidates])
    if not len(scores):
        return TilePick(rows, 0, 0.0, False, ranked)
    best = int(np.argmin(scores))
    return TilePick(rows, best + 1, float(scores[best]), guide.rule.keeps(float(scores[best])), ranked)


def tile_fields(row: np.ndarray, kernel) -> dict:
    """A tile size as the JSON writes it: tile (per output dim) and input_feature_tile (convolutions, else None)."""
    rank = len(kernel.out_shape)
    return {"tile": [int(v) for v in row[OUTPUT_BOUNDS:OUTPUT_BOUNDS + rank]],
            "input_feature_tile": int(row[KERNEL_BOUNDS + 2]) if kernel.kind == "conv" else None}


def tune_tiles(cfg: DictConfig, kernels: list[TileProgram], guide: Guide, search: TileSearch, max_configs: int,
               batch: int, work_dir: Path, rng: np.random.Generator, candidates: int = 0) -> list[dict]:
    """One object per distinct fused kernel: fusion (the first fusion instruction of that kernel, named exactly as
    in the optimised text), same_kernel (the later fusions of an identical kernel, which take the same tile),
    computation (its fused computation), tile, input_feature_tile, default_tile, predicted_ratio, kept, and
    candidates (the model's `candidates` best sizes to time, best first: tile, input_feature_tile, predicted_ratio,
    default)."""
    groups: dict = {}
    for program in kernels:
        groups.setdefault(program.kernel, []).append(program)
    out = []
    for program, *alike in groups.values():
        found = pick_tile(cfg, program, guide, search, max_configs, batch, work_dir, rng, candidates)
        kernel = program.kernel
        out.append({"fusion": program.fusion, "same_kernel": [p.fusion for p in alike],
                    "computation": kernel_output(program.graph).computation,
                    **tile_fields(found.rows[found.pick], kernel),
                    "default_tile": tile_fields(found.rows[0], kernel)["tile"],
                    "predicted_ratio": float(np.exp(found.score)) if found.kept else 1.0, "kept": found.kept,
                    "tile_sizes_scored": int(len(found.rows)),
                    "candidates": [{**tile_fields(found.rows[row], kernel), "predicted_ratio": float(np.exp(score)),
                                    "default": row == 0} for row, score in found.ranked]})
    return out
