"""The TpuGraphs format in one place: every dataset fact (dimensions, column names, opcode ids, splits, keys) and
the validation of one file's arrays (docs/tpugraphs-format.md).

Every other module imports these facts from here; none re-declares them. `check_arrays` turns the raw arrays of
one file into the validated, dtype-normalised fields of `pipeline.tpugraphs.dataset.Graph`, raising
`TpuGraphsFormatError` (file, key, expected, found) on the first problem.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.opcodes import OPCODE_IDS
from pipeline.tpugraphs.npz import NpzMember

# ----------------------------------------------------------------------------------------------- collections, splits
COLLECTION_KINDS = ("tile", "layout")
SPLITS = ("train", "valid", "test")
LABELLED_SPLITS = ("train", "valid")            # test runtimes are hidden (all zero in the real files)
PREDICTED_SPLITS = ("valid", "test")            # what every model stage ranks (and scores where truth exists)
NPZ_SUBDIR = "npz"                              # the official tree: <root>/npz/{tile/xla,layout/<source>/<search>}/<split>/
KAGGLE_SUBDIR = "npz_all"                       # Kaggle's download wraps npz/ in npz_all/
TRUTH_SUBDIR = "truth"                          # built-in data only: hidden test runtimes, <root>/truth/<collection>/
STATS_FILE = "stats.json"                       # built-in data only: sizes and ceilings per collection and split

# ----------------------------------------------------------------------------------------------- array keys
GRAPH_KEYS = ("node_feat", "node_opcode", "edge_index", "config_runtime")
TILE_KEYS = ("config_feat", "config_runtime_normalizers")
LAYOUT_KEYS = ("node_config_ids", "node_config_feat", "node_splits")
HIDDEN_KEYS = ("config_runtime",)               # test files may leave the hidden runtimes out (zeros stand in)
COLLECTION_NAMES = ("tile:xla", "layout:xla:random", "layout:xla:default", "layout:nlp:random",
                    "layout:nlp:default")          # the five collections, kind:source[:search]
# graphs in the official test split, per collection (the Kaggle submission has these 894 rows)
OFFICIAL_TEST_GRAPHS = dict(zip(COLLECTION_NAMES, (844, 8, 8, 17, 17)))

# ----------------------------------------------------------------------------------------------- opcodes
MAX_OPCODE = max(OPCODE_IDS.values())           # node_opcode ids are 0..MAX_OPCODE (120)
OPCODE_COUNT = MAX_OPCODE + 1
CONVOLUTION_OPCODE, DOT_OPCODE, RESHAPE_OPCODE = (OPCODE_IDS[name] for name in ("convolution", "dot", "reshape"))

# ----------------------------------------------------------------------------------------------- node_feat columns
MAX_DIMS = 6    # slots of every per-dimension list: shape_dimensions_0..5, layout_minor_to_major_0..5, window_*_0..5,
                # tile bounds *_bounds_0..5, and each block of node_config_feat
CONV_SPATIAL_DIMS = 4                           # convolution spatial dims in node_feat
ELEMENT_TYPES = ("invalid", "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64",
                 "bf16", "c64", "c128", "tuple", "opaque", "token")


def _seq(prefix: str, n: int, tail: tuple[str, ...] = ("sum", "product")) -> list[str]:
    return [f"{prefix}_{i}" for i in range(n)] + [f"{prefix}_{t}" for t in tail]


def _conv(names: list[str]) -> list[str]:
    return [f"convolution_dim_numbers_{n}" for n in names]


NODE_FEAT_NAMES: tuple[str, ...] = tuple(
    ["is_root", "element_size_in_bits"]
    + [f"shape_element_type_is_{t}" for t in ELEMENT_TYPES]
    + _seq("shape_dimensions", MAX_DIMS)
    + ["shape_tuple_shapes_size", "parameter_number"]
    + _seq("dimensions", MAX_DIMS, tail=())
    + _seq("window_size", MAX_DIMS) + _seq("window_stride", MAX_DIMS)
    + _seq("window_padding_low", MAX_DIMS) + _seq("window_padding_high", MAX_DIMS)
    + _seq("window_window_dilation", MAX_DIMS) + _seq("window_base_dilation", MAX_DIMS)
    + _seq("window_window_reversal", MAX_DIMS, tail=("true_count", "false_count"))
    + _conv(["input_batch_dim", "input_feature_dim"])
    + _conv([f"input_spatial_dims_{i}" for i in range(CONV_SPATIAL_DIMS)])
    + _conv(["kernel_input_feature_dim", "kernel_output_feature_dim"])
    + _conv([f"kernel_spatial_dims_{i}" for i in range(CONV_SPATIAL_DIMS)])
    + _conv(["output_batch_dim", "output_feature_dim"])
    + ["feature_group_count", "batch_group_count"]
    + _seq("slice_dims_start", 2) + _seq("slice_dims_stride", 2) + _seq("slice_dims_limit", 2)
    + _seq("dynamic_slice_sizes", 2)
    + _seq("padding_config_edge_padding_low", 2) + _seq("padding_config_edge_padding_high", 2)
    + ["is_stable"]
    + _seq("layout_minor_to_major", MAX_DIMS, tail=())
)
NODE_FEAT_DIM = len(NODE_FEAT_NAMES)            # 140
NODE_FEAT_COLUMN = {name: i for i, name in enumerate(NODE_FEAT_NAMES)}


def node_feat_slice(prefix: str, n: int = MAX_DIMS) -> slice:
    """The node_feat columns `<prefix>_0 .. <prefix>_<n-1>` (contiguous in the table)."""
    start = NODE_FEAT_COLUMN[f"{prefix}_0"]
    return slice(start, start + n)


IS_ROOT_COLUMN = NODE_FEAT_COLUMN["is_root"]
SHAPE_COLUMNS = node_feat_slice("shape_dimensions")          # 21..26: output dimension sizes, -1 (or 0) past the rank
LAYOUT_COLUMNS = node_feat_slice("layout_minor_to_major")    # 134..139: the node's HLO layout, minor dim first

# ----------------------------------------------------------------------------------------------- config features
CONFIG_FEAT_BLOCKS = ("kernel_bounds", "output_bounds", "input_bounds")   # tile config_feat: 3 x (6 dims, sum, product)
CONFIG_FEAT_NAMES: tuple[str, ...] = tuple(name for block in CONFIG_FEAT_BLOCKS for name in _seq(block, MAX_DIMS))
CONFIG_FEAT_DIM = len(CONFIG_FEAT_NAMES)        # 24
CONFIG_FEAT_COLUMN = {name: i for i, name in enumerate(CONFIG_FEAT_NAMES)}
LAYOUT_BLOCKS = ("output", "input", "kernel")   # node_config_feat: one minor-to-major block per tensor
NODE_CONFIG_FEAT_DIM = len(LAYOUT_BLOCKS) * MAX_DIMS   # 18
LAYOUT_VALUE_MIN, LAYOUT_VALUE_MAX = -1, 5      # node_config_feat: minor-to-major dims 0..5, -1 = padding/default


def layout_block(block: str) -> slice:
    """The node_config_feat columns of one LAYOUT_BLOCKS block (`output` 0:6, `input` 6:12, `kernel` 12:18)."""
    start = LAYOUT_BLOCKS.index(block) * MAX_DIMS
    return slice(start, start + MAX_DIMS)


assert NODE_FEAT_DIM == 140 and CONFIG_FEAT_DIM == 24 and MAX_OPCODE == 120 and LAYOUT_COLUMNS.stop == NODE_FEAT_DIM


def required_keys(kind: str, split: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(required, optional) keys of a `kind` ("tile" | "layout") file of `split`.

    On test the runtimes are hidden, so `config_runtime` (and tile `config_runtime_normalizers`) may be absent:
    `check_arrays` then counts the configurations from `config_feat` / `node_config_feat` (HIDDEN_KEYS).
    """
    labelled = split in LABELLED_SPLITS
    graph_keys = GRAPH_KEYS if labelled else tuple(k for k in GRAPH_KEYS if k not in HIDDEN_KEYS)
    if kind == "layout":
        return graph_keys + LAYOUT_KEYS, () if labelled else HIDDEN_KEYS
    if labelled:
        return graph_keys + TILE_KEYS, ("node_splits",)
    return graph_keys + ("config_feat",), HIDDEN_KEYS + ("config_runtime_normalizers", "node_splits")


FLOAT32_TINY, FLOAT32_MAX = float(np.finfo(np.float32).smallest_subnormal), float(np.finfo(np.float32).max)
FLOAT32_RANGE = (f"within float32's range [{FLOAT32_TINY:.2g}, {FLOAT32_MAX:.2g}] (training reads what configs are "
                 f"ranked by as float32)")


def _float32_holds(values: np.ndarray) -> np.ndarray:
    """bool mask: the positive values that float32 holds (neither inf nor 0 once cast)."""
    return (values >= FLOAT32_TINY) & (values <= FLOAT32_MAX)


def _first(mask: np.ndarray) -> str:
    """Where the first True of `mask` is, and how many there are."""
    where = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"at index {where[0] if len(where) == 1 else where} ({int(mask.sum())} such values)"


class _Checker:
    """Validation helpers bound to one file; each raises TpuGraphsFormatError naming file and key."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, key: str | tuple[str, ...], expected: str, found: str) -> TpuGraphsFormatError:
        return TpuGraphsFormatError(self.path, key, expected, found)

    def shape(self, key: str, array_shape: tuple[int, ...], expected: tuple) -> None:
        """`expected` holds ints, or None for any size (shown as '?')."""
        if len(array_shape) != len(expected) or any(e is not None and e != s for s, e in zip(array_shape, expected)):
            text = "(" + ", ".join("?" if e is None else str(e) for e in expected) + ("," if len(expected) == 1 else "") + ")"
            raise self.fail(key, f"shape {text}", f"shape {tuple(array_shape)}")

    def same_count(self, key: str, count: int, what: str, reference: str, reference_count: int) -> None:
        """`key` holds `count` `what` (e.g. "rows"), one per entry of the 1-D array `reference`; a mismatch names
        both keys and both lengths, since either array may be the one cut short."""
        if count != reference_count:
            raise self.fail((reference, key), f"as many {key} {what} as {reference} entries",
                            f"{reference} has {reference_count} entries, {key} {count} {what}")

    def ints(self, key: str, array: np.ndarray, expected: tuple) -> np.ndarray:
        """An integer array (uint8/int32/int64/...) of `expected` shape, as int64."""
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise self.fail(key, "finite integers", f"{array[~np.isfinite(array)][0]} {_first(~np.isfinite(array))}")
        if array.dtype.kind not in "iu":
            raise self.fail(key, "an integer dtype (uint8, int32 or int64)", f"dtype {array.dtype}")
        if array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
            raise self.fail(key, "values that fit int64", f"{array.max()}")
        self.shape(key, array.shape, expected)
        return array.astype(np.int64)

    def runtimes(self, key: str, array: np.ndarray, labelled: bool) -> np.ndarray:
        """Runtimes in ns, shape (C,): an integer dtype as int64, a real one (another cost model's runtimes need not
        be whole ns) as float64; finite, positive on the labelled splits, >= 0 on test (zeros: hidden)."""
        if array.dtype.kind == "f":
            self.shape(key, array.shape, (None,))
            values = array.astype(np.float64)
            bad = ~np.isfinite(values)
            if bad.any():
                raise self.fail(key, "finite runtimes", f"{values[bad][0]} {_first(bad)}")
        else:
            values = self.ints(key, array, (None,))
        bad = values <= 0 if labelled else values < 0
        if bad.any():
            raise self.fail(key, "positive runtimes (ns) on train/valid" if labelled else
                            "runtimes >= 0 (ns; zeros allowed on test)", f"{values[bad][0]} {_first(bad)}")
        if labelled:
            bad = ~_float32_holds(values)
            if bad.any():
                raise self.fail(key, f"runtimes (ns) {FLOAT32_RANGE}", f"{values[bad][0]:g} {_first(bad)}")
        return values

    def tile_ratios(self, runtime: np.ndarray, normalizers: np.ndarray) -> None:
        """Labelled tile graphs are ranked by runtime / normalizer, read as float32 in training: each ratio must lie
        in float32's positive range (a ratio past float64 became inf and the valid score NaN)."""
        with np.errstate(over="ignore", under="ignore"):
            ratio = runtime.astype(np.float64) / normalizers.astype(np.float64)
        bad = ~_float32_holds(ratio)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise self.fail(("config_runtime", "config_runtime_normalizers"),
                            f"ratios config_runtime / config_runtime_normalizers {FLOAT32_RANGE}",
                            f"{ratio[i]:g} at index {i} (config_runtime {runtime[i]:g} / config_runtime_normalizers "
                            f"{normalizers[i]:g}; {int(bad.sum())} such values)")

    def floats(self, key: str, array: np.ndarray, expected: tuple) -> np.ndarray:
        """A finite real array of `expected` shape, as float32."""
        if array.dtype.kind not in "fiu":
            raise self.fail(key, "a real dtype (float32)", f"dtype {array.dtype}")
        self.shape(key, array.shape, expected)
        with np.errstate(over="ignore"):      # float64 beyond float32's range becomes inf: refused below, no warning
            cast = array.astype(np.float32)
        bad = ~np.isfinite(cast)
        if bad.any():
            raise self.fail(key, "finite values (as float32)", f"{array[bad][0]} {_first(bad)}")
        return cast

    def within(self, key: str, array: np.ndarray, low: int, high: int | None, what: str = "") -> None:
        """All values in [low, high] (high None: unbounded)."""
        bad = (array < low) if high is None else (array < low) | (array > high)
        if bad.any():
            bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise self.fail(key, f"values {bounds}{what}", f"{array[bad][0]} {_first(bad)}")


def _stored_configs(c: _Checker, kind: str, arrays: dict[str, np.ndarray], config_source: NpzMember | None) -> int:
    """The configurations a file's config rows hold (tile `config_feat`, layout `node_config_feat` axis 0), their
    shape checked: what counts them when `config_runtime` is left out."""
    if kind == "tile":
        c.shape("config_feat", arrays["config_feat"].shape, (None, CONFIG_FEAT_DIM))
        return arrays["config_feat"].shape[0]
    c.shape("node_config_feat", config_source.shape, (None, None, NODE_CONFIG_FEAT_DIM))
    return config_source.shape[0]


def check_arrays(path: Path, kind: str, split: str, arrays: dict[str, np.ndarray],
                 config_source: NpzMember | None) -> dict[str, np.ndarray | None]:
    """Validate one file's arrays (all keys but node_config_feat's values) and return Graph's array fields.

    Args:
        path: the file (for messages). kind: one of COLLECTION_KINDS. split: one of SPLITS.
        arrays: raw arrays by key, as stored. config_source: the node_config_feat member (layout), header only.
    """
    c = _Checker(path)
    labelled = split in LABELLED_SPLITS
    node_feat = c.floats("node_feat", arrays["node_feat"], (None, NODE_FEAT_DIM))
    n_nodes = len(node_feat)
    if n_nodes == 0:
        raise c.fail("node_feat", "at least one node", f"shape (0, {NODE_FEAT_DIM})")
    node_opcode = c.ints("node_opcode", arrays["node_opcode"], (n_nodes,))
    c.within("node_opcode", node_opcode, 0, MAX_OPCODE, " (HLO opcode ids)")
    edge_index = c.ints("edge_index", arrays["edge_index"], (None, 2))
    c.within("edge_index", edge_index, 0, n_nodes - 1, f" (node ids of a graph of {n_nodes} nodes)")
    if "config_runtime" in arrays:
        config_runtime = c.runtimes("config_runtime", arrays["config_runtime"], labelled)
    else:                               # a test file without its hidden runtimes: zeros, as the real test files hold
        config_runtime = np.zeros(_stored_configs(c, kind, arrays, config_source), np.int64)
    n_configs = len(config_runtime)
    if n_configs == 0:
        raise c.fail("config_runtime", "at least one configuration", "shape (0,)")
    out = dict(node_feat=node_feat, node_opcode=node_opcode, edge_index=edge_index, config_runtime=config_runtime)
    if "node_splits" in arrays:
        splits = arrays["node_splits"]
        c.shape("node_splits", splits.shape, (1, None) if splits.ndim == 2 else (None,))
        splits = c.ints("node_splits", splits, splits.shape).reshape(-1)   # [segments] from (1, S)
        c.within("node_splits", splits, 0, n_nodes, " (node ids; the last may equal the node count)")
        if np.any(np.diff(splits) < 0):
            raise c.fail("node_splits", "non-decreasing node ids", f"{splits.tolist()[:20]}")
        out["node_splits"] = splits
    if kind == "tile":
        config_feat = c.floats("config_feat", arrays["config_feat"], (None, CONFIG_FEAT_DIM))
        c.same_count("config_feat", len(config_feat), "rows", "config_runtime", n_configs)
        out["config_feat"] = config_feat
        if "config_runtime_normalizers" in arrays:
            normalizers = c.runtimes("config_runtime_normalizers", arrays["config_runtime_normalizers"], labelled)
            c.same_count("config_runtime_normalizers", len(normalizers), "entries", "config_runtime", n_configs)
            if labelled:
                c.tile_ratios(config_runtime, normalizers)
            out["config_runtime_normalizers"] = normalizers
        return out
    node_config_ids = c.ints("node_config_ids", arrays["node_config_ids"], (None,))
    if len(node_config_ids) == 0:      # nothing to configure: no layout to rank (models need >= 1 config node)
        raise c.fail("node_config_ids", "at least one configurable node", "shape (0,)")
    c.within("node_config_ids", node_config_ids, 0, n_nodes - 1, f" (node ids of a graph of {n_nodes} nodes)")
    unique, counts = np.unique(node_config_ids, return_counts=True)
    if len(unique) != len(node_config_ids):
        raise c.fail("node_config_ids", "unique node ids", f"{unique[counts > 1].tolist()[:10]} repeated")
    out["node_config_ids"] = node_config_ids
    if config_source.dtype.kind not in "fiu":
        raise c.fail("node_config_feat", "a real dtype (float32)", f"dtype {config_source.dtype}")
    config_source.check_rows_readable()      # read by configuration, so a Fortran-order member is refused
    c.shape("node_config_feat", config_source.shape, (None, None, NODE_CONFIG_FEAT_DIM))
    c.same_count("node_config_feat", config_source.shape[0], "configurations (axis 0)", "config_runtime", n_configs)
    c.same_count("node_config_feat", config_source.shape[1], "nodes (axis 1)", "node_config_ids",
                 len(node_config_ids))
    return out
