"""Property-based fuzzing (hypothesis, derandomized): mutated npz files and submission CSVs.

Files come from the project's own writer (NpzWriter, STORED and compressed) on the tiny conftest graphs. Every
mutation (keys, dtypes, shapes, values, bytes, truncation) must either load to exactly the arrays it holds (for
byte-level damage: exactly the original arrays) or raise TpuGraphsFormatError, never any other exception.
Submission CSVs: `check_file` and `--check` return problems or pass, never raise, and a CSV they pass is one an
independent checker also accepts.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from conftest import make_layout_arrays, make_tile_arrays
from hypothesis import HealthCheck, given, settings, strategies as st

from pipeline.config import compose
from pipeline.submit import check_file, main as submit_main
from pipeline.tpugraphs.dataset import TpuGraphsFormatError, load_graph
from pipeline.tpugraphs.npz import NpzWriter
from pipeline.tpugraphs.schema import HIDDEN_KEYS

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
FUZZ_CSV = settings(FUZZ, max_examples=100)
KINDS = {"layout": ("layout:xla:random", make_layout_arrays), "tile": ("tile:xla", make_tile_arrays)}
DTYPES = ["int8", "uint8", "int16", "int32", "int64", "uint64", "float16", "float32", "float64", "bool",
          "complex64", "<U3", "V4"]
ODD_VALUES = [np.nan, np.inf, -np.inf, -1, -2, 0, 1, 5, 6, 7, 120, 121, 255, 1e9, -1e9, 0.5, 2 ** 63 - 1]


def write(path: Path, arrays: dict, compress: bool) -> Path:
    with NpzWriter(path, compress=compress) as npz:
        for key, value in arrays.items():
            npz.write(key, value)
    return path


def loaded(path: Path, collection: str, split: str) -> dict[str, np.ndarray]:
    """Every array of the graph, node_config_feat read whole (its values and CRC checked)."""
    graph = load_graph(path, collection, split)
    out = {k: getattr(graph, k) for k in ("node_feat", "node_opcode", "edge_index", "config_runtime",
                                           "config_runtime_normalizers", "config_feat", "node_config_ids",
                                           "node_splits") if getattr(graph, k) is not None}
    if graph.node_config_feat_source is not None:
        out["node_config_feat"] = graph.read_node_config_feat()
    return out


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


def holds(result: dict, stored: dict) -> bool:
    """The loaded arrays are the stored values (casts and the (1, S) -> (S,) flattening aside); a test file's hidden
    runtimes, when left out, load as zeros."""
    for key, value in result.items():
        if key in HIDDEN_KEYS and key not in stored:
            if value.any():
                return False
            continue
        source = np.asarray(stored[key])
        if source.size != value.size or not np.array_equal(source.reshape(value.shape), value, equal_nan=True):
            return False
    return True


def load_or_format_error(path: Path, collection: str, split: str) -> dict | None:
    try:
        return loaded(path, collection, split)
    except TpuGraphsFormatError:
        return None


@st.composite
def array_mutation(draw, arrays: dict):
    """(description, mutated arrays): one key, dtype, shape or value change."""
    arrays = {k: v.copy() for k, v in arrays.items()}
    key = draw(st.sampled_from(sorted(arrays)))
    kind = draw(st.sampled_from(["drop", "rename", "extra", "dtype", "shape", "value", "empty"]))
    if kind == "drop":
        del arrays[key]
    elif kind == "rename":
        arrays[key + draw(st.sampled_from(["_", "s", "X"]))] = arrays.pop(key)
    elif kind == "extra":
        arrays["unexpected"] = np.zeros(draw(st.integers(0, 3)), np.float32)
    elif kind == "dtype":
        arrays[key] = arrays[key].astype(draw(st.sampled_from(DTYPES)))
    elif kind == "shape":
        value = arrays[key]
        how = draw(st.sampled_from(["flat", "extra_dim", "drop_row", "add_row", "transpose"]))
        arrays[key] = {"flat": lambda v: v.reshape(-1), "extra_dim": lambda v: v[None],
                       "drop_row": lambda v: v[:-1] if v.ndim else v,
                       "add_row": lambda v: np.concatenate([v, v[:1]]) if v.ndim else v,
                       "transpose": lambda v: v.T.copy()}[how](value)
    elif kind == "value":
        value = arrays[key]
        if value.size:
            flat = value.reshape(-1)
            at = draw(st.integers(0, flat.size - 1))
            odd = draw(st.sampled_from(ODD_VALUES))
            with np.errstate(all="ignore"):
                try:
                    flat[at] = odd
                except (OverflowError, ValueError):
                    pass
    else:
        arrays[key] = arrays[key][:0]
    return kind, arrays


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("compress", [False, True])
def test_array_mutations_load_exactly_or_raise_the_format_error(scratch, kind, compress):
    collection, make = KINDS[kind]

    @FUZZ
    @given(st.data())
    def check(data):
        _, arrays = data.draw(array_mutation(make()))
        split = data.draw(st.sampled_from(["train", "test"]))
        path = write(scratch / f"{kind}_{compress}.npz", arrays, compress)
        result = load_or_format_error(path, collection, split)
        assert result is None or holds(result, arrays)

    check()


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("compress", [False, True])
def test_byte_damage_loads_the_original_or_raises_the_format_error(scratch, kind, compress):
    collection, make = KINDS[kind]
    original_path = write(scratch / f"orig_{kind}_{compress}.npz", make(), compress)
    original, data = loaded(original_path, collection, "train"), original_path.read_bytes()

    @FUZZ
    @given(st.data())
    def check(draw):
        damaged = bytearray(data)
        how = draw.draw(st.sampled_from(["set", "flip", "truncate", "insert"]))
        at = draw.draw(st.integers(0, len(data) - 1))
        if how == "set":
            damaged[at] = draw.draw(st.integers(0, 255))
        elif how == "flip":
            damaged[at] ^= 1 << draw.draw(st.integers(0, 7))
        elif how == "truncate":
            del damaged[at:]
        else:
            damaged[at:at] = draw.draw(st.binary(min_size=1, max_size=8))
        path = scratch / f"damaged_{kind}_{compress}.npz"
        path.write_bytes(bytes(damaged))
        result = load_or_format_error(path, collection, "train")
        assert result is None or same(result, original)

    check()


# ------------------------------------------------------------------------------------------- submissions
@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Test graphs of tile:xla (3 configs) and layout:xla:random (4 configs), and a valid CSV for them."""
    root = tmp_path_factory.mktemp("fuzzdata")
    for split in ("train", "valid", "test"):
        tile, layout = make_tile_arrays(), make_layout_arrays()
        if split == "test":
            tile["config_runtime"][:] = 0
            layout["config_runtime"][:] = 0
        write(root / "npz/tile/xla" / split / f"t_{split}.npz", tile, False)
        write(root / "npz/layout/xla/random" / split / f"l_{split}.npz", layout, False)
    cfg = compose(["data=programs_ci", f"data.root={root}", "data.collections=[tile-xla,layout-xla-random]",
                   "submit.tile_top_k=2"])
    return root, cfg, "ID,TopConfigs\ntile:xla:t_test,2;0\nlayout:xla:random:l_test,3;1;0;2\n"


def independently_valid(text: str) -> bool:
    """A plain re-implementation of the rules for the two test graphs (tile: top 2 of 3; layout: 4-permutation)."""
    lines = text.split("\n")
    if lines[0] != "ID,TopConfigs":
        return False
    rows = [line.split(",") for line in lines[1:] if line != ""]
    if any(len(r) != 2 for r in rows) or sorted(r[0] for r in rows) != ["layout:xla:random:l_test", "tile:xla:t_test"]:
        return False
    for row_id, configs in rows:
        parts = configs.split(";")
        if not all(p.isdigit() for p in parts):
            return False
        ints = [int(p) for p in parts]
        n, need = (3, 2) if row_id.startswith("tile") else (4, 4)
        if len(ints) != need or len(set(ints)) != need or max(ints) >= n:
            return False
    return True


@pytest.mark.slow
def test_submission_csv_mutations_never_crash_the_checker(dataset, scratch, monkeypatch):
    root, cfg, valid = dataset
    path = scratch / "sub.csv"
    path.write_text(valid)
    assert check_file(path, cfg) == [] and independently_valid(valid)
    (scratch / "params.yaml").write_text(OmegaConf.to_yaml(cfg))   # `--check` with no overrides reads it
    monkeypatch.chdir(scratch)

    @FUZZ_CSV
    @given(st.data())
    def check(draw):
        data = bytearray(valid.encode())
        how = draw.draw(st.sampled_from(["set", "delete", "insert", "truncate", "swap_lines", "bytes"]))
        at = draw.draw(st.integers(0, len(data) - 1))
        if how == "set":
            data[at] = draw.draw(st.sampled_from(list(b";,:\n\r\"0123456789 -x\xff\x00")))
        elif how == "delete":
            del data[at]
        elif how == "insert":
            data[at:at] = draw.draw(st.sampled_from([b";", b",", b"\n", b"1", b"-1", b";0", b"\"", b"\xc3", b" "]))
        elif how == "truncate":
            del data[at:]
        elif how == "swap_lines":
            lines = bytes(data).split(b"\n")
            i, j = draw.draw(st.integers(0, len(lines) - 1)), draw.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
        else:
            data = bytearray(draw.draw(st.binary(max_size=80)))
        path.write_bytes(bytes(data))
        problems = check_file(path, cfg)
        assert isinstance(problems, list) and all(isinstance(p, str) and p for p in problems)
        if not problems:
            assert independently_valid(bytes(data).decode("utf-8").replace("\r\n", "\n")), bytes(data)
        try:
            submit_main(["--check", str(path)])
            assert not problems
        except SystemExit as exit_:
            assert exit_.code == 1 and problems

    check()
