"""What a tile configuration means for the kernel it tiles, in numpy, for every model (docs/tpugraphs-format.md 2d).

A tile configuration is the 24-vector `config_feat`; its `output_bounds_0..5` tile the kernel's output, whose shape
is the `shape_dimensions` of the graph's output node (`output_shape`). Everything here is computed from those
official-format arrays only, so it holds for the real TpuGraphs files and for any held-out data.

`tile_geometry` relates each tile to the output it covers: tiles per dimension, padded elements, the TPU (8, 128)
padding of the tile's two most minor dims. LightGBM's `tile_derived` features (pipeline.features.tile) and the GNN's
tile inputs (`tile_inputs`, pipeline.graphnet.data) both build on it.

Assumptions: output_bounds_i tiles shape_dimensions_i (same dimension order; the last dim is the most minor, as in
XLA's default layout). A bound of 0 or less (0 in the files, -1 after prune's re-padding) means "not tiled": the
whole dimension is one tile; a bound beyond its dimension covers the dimension in one tile.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.tpugraphs.layouts import TPU_TILE_MINOR, TPU_TILE_SECOND_MINOR, padded_length
from pipeline.tpugraphs.schema import CONFIG_FEAT_COLUMN, CONFIG_FEAT_DIM, IS_ROOT_COLUMN, MAX_DIMS, SHAPE_COLUMNS

OUTPUT_BOUNDS = CONFIG_FEAT_COLUMN["output_bounds_0"]   # first of the output tile's MAX_DIMS bounds
TILE_INPUT_NAMES = ([f"log_tiles_{d}" for d in range(MAX_DIMS)] +
                    ["log_tiles", "log_pad_ratio", "log_tile_fraction", "log_tile_elements", "log_tpu_pad_ratio",
                     "minor_rem128", "second_minor_rem8"])
TILE_INPUT_DIM = len(TILE_INPUT_NAMES)


def output_shape(node_feat_raw: np.ndarray) -> np.ndarray:
    """float64 [6] output dimension sizes of a kernel from its node_feat [nodes, 140], -1 (or 0) past the rank.

    The output is the last node flagged is_root (nodes are in topological order), else the last node.
    """
    raw = np.asarray(node_feat_raw)
    roots = np.flatnonzero(raw[:, IS_ROOT_COLUMN] > 0)
    node = roots[-1] if len(roots) else len(raw) - 1
    return raw[node, SHAPE_COLUMNS].astype(np.float64)


@dataclass(frozen=True)
class TileGeometry:
    """How each config's output tile covers the output (arrays over configs; sizes of untiled dims are the dim)."""

    rank: int                # output rank (dims > 0 of the shape)
    dims: np.ndarray         # [1, 6] float64 output dim sizes, 1 past the rank
    bounds: np.ndarray       # [configs, 6] float64 tile size per dim (untiled = whole dim, capped at the dim)
    tiles: np.ndarray        # [configs, 6] float64 tiles per dim, ceil(dim / bound) >= 1

    @property
    def elements(self) -> float:
        """Elements of the output."""
        return float(self.dims.prod())

    @property
    def tile_elements(self) -> np.ndarray:
        """[configs] elements of one tile."""
        return self.bounds.prod(axis=1)

    @property
    def padded(self) -> np.ndarray:
        """[configs] elements the tiles compute, partial edge tiles included (>= elements)."""
        return (self.tiles * self.bounds).prod(axis=1)

    @property
    def minor(self) -> np.ndarray:
        """[configs] tile size of the most minor (last) output dim (1 for a scalar output)."""
        return self.bounds[:, self.rank - 1] if self.rank >= 1 else np.ones(len(self.bounds))

    @property
    def second_minor(self) -> np.ndarray:
        """[configs] tile size of the second most minor output dim (1 below rank 2)."""
        return self.bounds[:, self.rank - 2] if self.rank >= 2 else np.ones(len(self.bounds))

    @property
    def tpu_padded_tile(self) -> np.ndarray:
        """[configs] elements of one tile once its minor dim pads to 128 and its second-minor dim to 8."""
        minor = padded_length(self.minor, TPU_TILE_MINOR)
        second = padded_length(self.second_minor, TPU_TILE_SECOND_MINOR)
        rest = self.tile_elements / (self.minor * (self.second_minor if self.rank >= 2 else 1.0))
        return rest * minor * (second if self.rank >= 2 else 1.0)


def tile_geometry(shape: np.ndarray, config_feat: np.ndarray) -> TileGeometry:
    """The geometry of config_feat [configs, 24] on an output of `shape` [6] (`output_shape`)."""
    config_feat = np.asarray(config_feat, dtype=np.float64)
    if config_feat.ndim != 2 or config_feat.shape[1] != CONFIG_FEAT_DIM:
        raise ValueError(f"config_feat: expected [configs, {CONFIG_FEAT_DIM}], found {config_feat.shape}")
    shape = np.asarray(shape, dtype=np.float64)
    rank = int((shape > 0).sum())
    dims = np.where(shape > 0, shape, 1.0)[None, :]                           # [1, 6]
    bounds = config_feat[:, OUTPUT_BOUNDS:OUTPUT_BOUNDS + MAX_DIMS]           # [configs, 6]
    bounds = np.where(bounds > 0, np.minimum(bounds, dims), dims)              # untiled dim = one tile
    return TileGeometry(rank, dims, bounds, np.ceil(dims / bounds))


def tile_inputs(shape: np.ndarray, config_feat: np.ndarray) -> np.ndarray:
    """The tile relative to its kernel, as numbers that extrapolate: float32 [configs, TILE_INPUT_DIM].

    Columns (`TILE_INPUT_NAMES`): natural logs of the tiles per dim and in total, of the padded/real element ratio
    (partial edge tiles), of the share of the output one tile covers (<= 0), of the tile's elements and of the TPU
    (8, 128) padding of one tile; then the remainders (minor % 128) / 128 and (second minor % 8) / 8. Every size
    enters as a log (no min/max from train), so a kernel larger than any seen gives proportionally larger values,
    never a saturated or exploding one.
    """
    geo = tile_geometry(shape, config_feat)
    tile = geo.tile_elements
    columns = [np.log(geo.tiles), np.log(geo.tiles).sum(axis=1, keepdims=True)]
    columns += [np.log(v)[:, None] for v in (geo.padded / geo.elements, tile / geo.elements, tile,
                                             geo.tpu_padded_tile / tile)]
    columns += [(geo.minor % TPU_TILE_MINOR / TPU_TILE_MINOR)[:, None],
                (geo.second_minor % TPU_TILE_SECOND_MINOR / TPU_TILE_SECOND_MINOR)[:, None]]
    return np.concatenate(columns, axis=1).astype(np.float32)   # [configs, TILE_INPUT_DIM]
