"""pipeline.tpugraphs.dataset: collections, dataset roots, loading and validating official npz files."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import make_layout_arrays, make_tile_arrays, write_npz
from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.dataset import (COLLECTIONS, Collection, graph_paths, load_graph,
                                npz_root, validate_node_config_feat)

LAYOUT = Collection.parse("layout:xla:random")
TILE = Collection.parse("tile:xla")


def _raises(path: Path, key: str | tuple[str, ...] | None, call) -> str:
    """Run `call`, expect TpuGraphsFormatError naming `path` (and `key`, or each of a tuple of keys); return the
    message."""
    with pytest.raises(TpuGraphsFormatError) as info:
        call()
    message = str(info.value)
    assert str(path) in message
    if key is not None:
        assert all(f"'{k}'" in message for k in ((key,) if isinstance(key, str) else key)) and info.value.key == key
    return message


# ------------------------------------------------------------------------------------------- collections
def test_collections_parse_names_and_slugs():
    assert [c.name for c in COLLECTIONS] == ["tile:xla", "layout:xla:random", "layout:xla:default",
                                             "layout:nlp:random", "layout:nlp:default"]
    c = Collection.parse("layout-nlp-default")
    assert (c.name, c.kind, c.source, c.search, c.slug) == ("layout:nlp:default", "layout", "nlp", "default",
                                                            "layout-nlp-default")
    assert c.subdir == Path("layout/nlp/default") and TILE.subdir == Path("tile/xla") and TILE.search is None
    assert Collection.parse(c) is c
    with pytest.raises(ValueError, match="unknown collection"):
        Collection.parse("layout:xla")


# ------------------------------------------------------------------------------------------------- roots
@pytest.mark.parametrize("layout", ["holding_npz", "npz_itself", "npz_all", "above_npz_all"])
def test_npz_root_resolves_every_layout(tmp_path, layout):
    base = {"holding_npz": tmp_path, "npz_itself": tmp_path, "npz_all": tmp_path / "npz_all",
            "above_npz_all": tmp_path}[layout]
    npz = tmp_path / "npz_all" / "npz" if layout in ("npz_all", "above_npz_all") else tmp_path / "npz"
    write_npz(npz / "layout/xla/random/valid/b.npz", make_layout_arrays())
    write_npz(npz / "layout/xla/random/valid/a.npz", make_layout_arrays())
    root = npz if layout == "npz_itself" else base
    assert npz_root(root) == npz
    assert [p.name for p in graph_paths(root, "layout-xla-random", "valid")] == ["a.npz", "b.npz"]
    graphs = [load_graph(p, LAYOUT, "valid") for p in graph_paths(root, LAYOUT, "valid")]
    assert [g.graph_id for g in graphs] == ["a", "b"] and graphs[0].split == "valid"


def test_npz_root_errors_name_the_folder(tmp_path):
    (tmp_path / "something").mkdir()
    assert "something" in _raises(tmp_path, None, lambda: npz_root(tmp_path))
    _raises(tmp_path / "missing", None, lambda: npz_root(tmp_path / "missing"))
    with pytest.raises(TpuGraphsFormatError, match="data.root"):
        npz_root(None)
    write_npz(tmp_path / "npz/tile/xla/train/t.npz", make_tile_arrays())
    _raises(tmp_path / "npz/tile/xla/test", None, lambda: graph_paths(tmp_path, TILE, "test"))
    graph = tmp_path / "npz/tile/xla/train/t.npz"               # data.root=<a graph file> said "no such folder"
    assert _raises(graph, None, lambda: npz_root(graph)).endswith("; found a file, not a folder")


# ----------------------------------------------------------------------------------------------- loading
def test_load_layout_graph(tiny_npz):
    g = load_graph(tiny_npz["layout"], "layout:xla:random", "train")
    assert (g.graph_id, g.collection, g.split, g.n_nodes, g.n_configs) == ("tiny_layout", LAYOUT, "train", 5, 4)
    assert g.node_opcode.dtype == np.int64 and g.node_opcode.tolist() == [63, 26, 41, 34, 98]
    assert g.edge_index.dtype == np.int64 and g.edge_index.shape == (5, 2)
    assert g.node_splits.tolist() == [0, 5] and g.node_config_ids.tolist() == [1, 3]
    assert g.config_feat is None and g.config_runtime_normalizers is None
    feat = g.read_node_config_feat([3, 1, 3])
    assert feat.dtype == np.int8 and feat.shape == (3, 2, 18)
    assert feat[0, :, :2].tolist() == [[1, 0], [0, 1]] and feat[1, 0, :2].tolist() == [0, 1]
    assert (feat[2] == feat[0]).all() and feat[1, 1].tolist() == [-1] * 18
    full = g.read_node_config_feat()
    assert (full == make_layout_arrays()["node_config_feat"]).all()
    chunks = list(g.iter_node_config_feat(3))
    assert [s for s, _ in chunks] == [0, 3] and (np.concatenate([c for _, c in chunks]) == full).all()
    with pytest.raises(IndexError):
        g.read_node_config_feat([4])


def test_load_tile_graph(tiny_npz):
    g = load_graph(tiny_npz["tile"], TILE, "train")
    assert (g.n_nodes, g.n_configs, g.node_config_ids, g.node_splits) == (3, 3, None, None)
    assert g.config_feat.dtype == np.float32 and g.config_feat[:, 15].tolist() == [1024, 2048, 2048]
    assert g.config_runtime_normalizers.tolist() == [1000, 1010, 990]
    assert g.node_opcode.dtype == g.edge_index.dtype == g.config_runtime.dtype == np.int64
    with pytest.raises(ValueError, match="no node_config_feat"):
        g.read_node_config_feat([0])


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64])
def test_integer_dtype_variants_load_as_int64(tmp_path, dtype):
    arrays = make_layout_arrays()
    for key in ("node_opcode", "edge_index", "node_config_ids", "node_splits", "config_runtime"):
        arrays[key] = arrays[key].astype(dtype if key == "node_opcode" else np.int32 if dtype == np.uint8 else dtype)
    arrays["node_splits"] = arrays["node_splits"].reshape(-1)       # flat (S,) is accepted too
    g = load_graph(write_npz(tmp_path / "g.npz", arrays), LAYOUT, "valid")
    for key in ("node_opcode", "edge_index", "node_config_ids", "node_splits", "config_runtime"):
        assert getattr(g, key).dtype == np.int64
        assert getattr(g, key).tolist() == make_layout_arrays()[key].reshape(getattr(g, key).shape).tolist()


def test_test_split_allows_zero_runtimes_and_missing_or_zero_normalizers(tmp_path):
    tile = make_tile_arrays()
    tile["config_runtime"][:] = 0
    del tile["config_runtime_normalizers"]
    g = load_graph(write_npz(tmp_path / "t.npz", tile), TILE, "test")
    assert g.config_runtime.tolist() == [0, 0, 0] and g.config_runtime_normalizers is None
    tile["config_runtime_normalizers"] = np.zeros(3, np.int64)
    assert load_graph(write_npz(tmp_path / "t.npz", tile), TILE, "test").config_runtime_normalizers.tolist() == [0] * 3
    layout = make_layout_arrays()
    layout["config_runtime"][:] = 0
    assert load_graph(write_npz(tmp_path / "l.npz", layout), LAYOUT, "test").n_configs == 4
    path = write_npz(tmp_path / "t2.npz", tile)           # the same zeros are an error on train
    _raises(path, "config_runtime", lambda: load_graph(path, TILE, "train"))


def test_test_files_without_their_hidden_runtimes_load_with_zeros(tmp_path):
    tile, layout = make_tile_arrays(), make_layout_arrays()
    for arrays in (tile, layout):
        del arrays["config_runtime"]
    del tile["config_runtime_normalizers"]
    g = load_graph(write_npz(tmp_path / "t.npz", tile), TILE, "test")
    assert g.config_runtime.tolist() == [0, 0, 0] and g.config_runtime.dtype == np.int64
    assert load_graph(write_npz(tmp_path / "l.npz", layout), LAYOUT, "test").config_runtime.tolist() == [0] * 4
    for path, collection in ((tmp_path / "t.npz", TILE), (tmp_path / "l.npz", LAYOUT)):
        _raises(path, "config_runtime", lambda: load_graph(path, collection, "train"))   # labelled: required
    layout["node_config_feat"] = np.zeros((4, 2, 17), np.float32)      # still shape-checked, counted from it
    path = write_npz(tmp_path / "bad.npz", layout)
    _raises(path, "node_config_feat", lambda: load_graph(path, LAYOUT, "test"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_real_runtimes_load_as_float64(tmp_path, dtype):
    tile, layout = make_tile_arrays(), make_layout_arrays()
    tile["config_runtime"] = np.array([1200.5, 900.25, 1500.0], dtype)        # another cost model's ns
    tile["config_runtime_normalizers"] = np.array([1000.0, 1010.5, 990.0], dtype)
    layout["config_runtime"] = np.array([300.5, 100.0, 0.75, 400.0], dtype)
    g = load_graph(write_npz(tmp_path / "t.npz", tile), TILE, "train")
    assert g.config_runtime.dtype == g.config_runtime_normalizers.dtype == np.float64
    assert g.config_runtime.tolist() == tile["config_runtime"].astype(np.float64).tolist()
    assert load_graph(write_npz(tmp_path / "l.npz", layout), LAYOUT, "valid").config_runtime.tolist() == \
        layout["config_runtime"].astype(np.float64).tolist()
    layout["config_runtime"][:] = 0                                            # hidden: zeros allowed on test only
    path = write_npz(tmp_path / "z.npz", layout)
    assert load_graph(path, LAYOUT, "test").config_runtime.tolist() == [0.0] * 4
    _raises(path, "config_runtime", lambda: load_graph(path, LAYOUT, "train"))



@pytest.mark.parametrize("kind, runtime, normalizers, key, found", [
    ("layout", [300.0, 1e300, 200.0, 400.0], None, "config_runtime", "found 1e+300 at index 1 (1 such values)"),
    ("layout", [300.0, 1e-300, 200.0, 400.0], None, "config_runtime", "found 1e-300 at index 1 (1 such values)"),
    ("tile", [1e30, 900.0, 1500.0], [1e-10, 1010.0, 990.0], ("config_runtime", "config_runtime_normalizers"),
     "found 1e+40 at index 0 (config_runtime 1e+30 / config_runtime_normalizers 1e-10; 1 such values)"),
    ("tile", [1200.0, 900.0, 1e300], [1000.0, 1010.0, 1e-10], "config_runtime",
     "found 1e+300 at index 2 (1 such values)"),      # was a ratio of inf (past float64): a NaN valid score
    ("tile", [1200.0, 1e-20, 1500.0], [1000.0, 1e30, 990.0], ("config_runtime", "config_runtime_normalizers"),
     "found 1e-50 at index 1 (config_runtime 1e-20 / config_runtime_normalizers 1e+30; 1 such values)"),
])
def test_labelled_runtimes_beyond_float32_are_refused(tmp_path, kind, runtime, normalizers, key, found):
    """Training reads runtimes (tile: runtime / normalizer) as float32: a float64 runtime past its range became inf
    or 0 there, every pair of configs tied and the graph taught nothing without a word, and a tile ratio past
    float64 made the valid score NaN. Refused on train and valid, naming the value; test ignores runtimes."""
    arrays = make_tile_arrays() if kind == "tile" else make_layout_arrays()
    arrays["config_runtime"] = np.array(runtime)
    if normalizers is not None:
        arrays["config_runtime_normalizers"] = np.array(normalizers)
    path = write_npz(tmp_path / "far.npz", arrays)
    collection = TILE if kind == "tile" else LAYOUT
    for split in ("train", "valid"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")             # numpy's overflow RuntimeWarning would be a second stderr line
            message = _raises(path, key, lambda: load_graph(path, collection, split))
        assert "within float32's range [1.4e-45, 3.4e+38]" in message and message.endswith(found), message
    assert load_graph(path, collection, "test").n_configs == len(runtime)


# ------------------------------------------------------------------------------------- corrupted files
def _set(key, value):
    def mutate(a):
        a[key] = value(a) if callable(value) else value
    return mutate


def _delete(key):
    return lambda a: a.pop(key)


LAYOUT_CORRUPTIONS = {
    "missing node_feat": ("node_feat", _delete("node_feat")),
    "missing edge_index": ("edge_index", _delete("edge_index")),
    "missing node_config_feat": ("node_config_feat", _delete("node_config_feat")),
    "missing node_config_ids": ("node_config_ids", _delete("node_config_ids")),
    "missing node_splits": ("node_splits", _delete("node_splits")),
    "node_feat width 139": ("node_feat", _set("node_feat", np.zeros((5, 139), np.float32))),
    "node_feat NaN": ("node_feat", _set("node_feat", lambda a: np.where(np.eye(5, 140) > 0, np.nan, a["node_feat"]))),
    "opcode 121": ("node_opcode", _set("node_opcode", np.array([63, 26, 41, 34, 121], np.uint8))),
    "opcode -1": ("node_opcode", _set("node_opcode", np.array([63, 26, -1, 34, 98], np.int32))),
    "opcode count": ("node_opcode", _set("node_opcode", np.array([63, 26, 41, 34], np.int64))),
    "edge to node 5": ("edge_index", _set("edge_index", np.array([[1, 0], [5, 1]], np.int64))),
    "negative edge": ("edge_index", _set("edge_index", np.array([[1, -1]], np.int32))),
    "edge_index (E, 3)": ("edge_index", _set("edge_index", np.zeros((2, 3), np.int64))),
    "config id 5": ("node_config_ids", _set("node_config_ids", np.array([1, 5], np.int64))),
    "duplicate config id": ("node_config_ids", _set("node_config_ids", np.array([3, 3], np.int64))),
    "config feat last dim 17": ("node_config_feat", _set("node_config_feat", np.zeros((4, 2, 17), np.float32))),
    "config feat wrong NC": (("node_config_ids", "node_config_feat"),
                             _set("node_config_feat", np.zeros((4, 3, 18), np.float32))),
    "negative runtime": ("config_runtime", _set("config_runtime", np.array([300, -1, 200, 400], np.int64))),
    "NaN runtime": ("config_runtime", _set("config_runtime", np.array([300, np.nan, 200, 400]))),
    "zero float runtime": ("config_runtime", _set("config_runtime", np.array([300.0, 0.0, 200.0, 400.0]))),
    "inf float runtime": ("config_runtime", _set("config_runtime", np.array([300.0, np.inf, 200.0, 400.0]))),
    "string runtime": ("config_runtime", _set("config_runtime", np.array(["300", "1", "2", "4"]))),
    "pickled object array": ("node_opcode", _set("node_opcode", np.array([63, 26, 41, 34, "x"], dtype=object))),
    "fortran order node_config_feat": ("node_config_feat", _set("node_config_feat",
                                                                lambda a: np.asfortranarray(a["node_config_feat"]))),
    "node_splits past N": ("node_splits", _set("node_splits", np.array([[0, 6]], np.int64))),
}
TILE_CORRUPTIONS = {
    "missing config_feat": ("config_feat", _delete("config_feat")),
    "missing normalizers": ("config_runtime_normalizers", _delete("config_runtime_normalizers")),
    "config_feat width 23": ("config_feat", _set("config_feat", np.zeros((3, 23), np.float32))),
    "config_feat rows": (("config_runtime", "config_feat"), _set("config_feat", np.zeros((2, 24), np.float32))),
    "zero normalizer": ("config_runtime_normalizers", _set("config_runtime_normalizers", np.array([1, 0, 1]))),
    "config_feat inf": ("config_feat", _set("config_feat", lambda a: np.where(np.eye(3, 24) > 0, np.inf, 0))),
}


@pytest.mark.parametrize("case", sorted(LAYOUT_CORRUPTIONS))
def test_layout_corruption_raises_clear_error(tmp_path, case):
    key, mutate = LAYOUT_CORRUPTIONS[case]
    arrays = make_layout_arrays()
    mutate(arrays)
    path = write_npz(tmp_path / "bad.npz", arrays)
    _raises(path, key, lambda: load_graph(path, LAYOUT, "train"))


@pytest.mark.parametrize("case", sorted(TILE_CORRUPTIONS))
def test_tile_corruption_raises_clear_error(tmp_path, case):
    key, mutate = TILE_CORRUPTIONS[case]
    arrays = make_tile_arrays()
    mutate(arrays)
    path = write_npz(tmp_path / "bad.npz", arrays)
    _raises(path, key, lambda: load_graph(path, TILE, "valid"))


def test_float64_node_feat_beyond_float32_is_refused_naming_the_value_without_a_warning(tmp_path):
    arrays = make_layout_arrays()
    arrays["node_feat"] = arrays["node_feat"].astype(np.float64)
    arrays["node_feat"][2, 7] = 1e300                  # finite in float64, inf once cast to float32
    path = write_npz(tmp_path / "big.npz", arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # numpy's overflow RuntimeWarning would be a second stderr line
        message = _raises(path, "node_feat", lambda: load_graph(path, LAYOUT, "train"))
    assert message.endswith("expected finite values (as float32); found 1e+300 at index (2, 7) (1 such values)")


@pytest.mark.parametrize("kind, key, cut, message", [
    ("tile", "config_runtime", 2, "[keys 'config_runtime', 'config_feat']: expected as many config_feat rows as "
     "config_runtime entries; found config_runtime has 2 entries, config_feat 3 rows"),
    ("tile", "config_runtime_normalizers", 2, "[keys 'config_runtime', 'config_runtime_normalizers']: expected as "
     "many config_runtime_normalizers entries as config_runtime entries; found config_runtime has 3 entries, "
     "config_runtime_normalizers 2 entries"),
    ("layout", "config_runtime", 3, "[keys 'config_runtime', 'node_config_feat']: expected as many node_config_feat "
     "configurations (axis 0) as config_runtime entries; found config_runtime has 3 entries, node_config_feat 4 "
     "configurations (axis 0)"),
    ("layout", "node_config_ids", [1, 3, 4], "[keys 'node_config_ids', 'node_config_feat']: expected as many "
     "node_config_feat nodes (axis 1) as node_config_ids entries; found node_config_ids has 3 entries, "
     "node_config_feat 2 nodes (axis 1)"),
])
def test_a_short_array_is_named_with_the_one_it_disagrees_with(tmp_path, kind, key, cut, message):
    """Cutting config_runtime short (`cut`: entries kept), or giving node_config_ids an extra id (`cut`: the ids),
    names both arrays that disagree and both lengths; the error used to blame config_feat / node_config_feat."""
    arrays = make_tile_arrays() if kind == "tile" else make_layout_arrays()
    arrays[key] = arrays[key][:cut] if isinstance(cut, int) else np.array(cut, np.int64)
    path = write_npz(tmp_path / "short.npz", arrays)
    with pytest.raises(TpuGraphsFormatError) as info:
        load_graph(path, TILE if kind == "tile" else LAYOUT, "valid")
    assert str(info.value) == f"{path} {message}"


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("bad", [7.0, 0.5, -2.0, np.nan])
def test_bad_config_values_raise_when_read(tmp_path, compress, bad):
    arrays = make_layout_arrays()
    arrays["node_config_feat"][2, 1, 5] = bad
    path = write_npz(tmp_path / "bad.npz", arrays, compress)
    graph = load_graph(path, LAYOUT, "train")                # values are checked lazily, when read
    assert graph.read_node_config_feat([0, 1, 3]).shape == (3, 2, 18)
    message = _raises(path, "node_config_feat", lambda: graph.read_node_config_feat([3, 2]))
    assert "config 2, node 1, dim 5" in message
    _raises(path, "node_config_feat", lambda: validate_node_config_feat(graph, chunk_size=1))
    _raises(path, "node_config_feat", lambda: list(graph.iter_node_config_feat(2)))


def test_truncated_file_raises_clear_error(tiny_npz):
    path = tiny_npz["layout"]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert "zip" in _raises(path, None, lambda: load_graph(path, LAYOUT, "train"))


def test_corrupt_member_data_raises_clear_error(tmp_path):
    arrays = make_layout_arrays()
    arrays["node_feat"] = np.random.default_rng(0).normal(size=(5, 140)).astype(np.float32)
    path = write_npz(tmp_path / "c.npz", arrays, compress=True)
    data = bytearray(path.read_bytes())
    start = data.index(b"node_feat.npy") + 600               # inside node_feat's deflated stream
    data[start:start + 64] = bytes(64)
    path.write_bytes(bytes(data))
    _raises(path, "node_feat", lambda: load_graph(path, LAYOUT, "train"))


def test_compressed_files_load_like_stored(tmp_path):
    stored = load_graph(write_npz(tmp_path / "s.npz", make_layout_arrays()), LAYOUT, "train")
    packed = load_graph(write_npz(tmp_path / "c.npz", make_layout_arrays(), compress=True), LAYOUT, "train")
    index = [3, 0, 3, 2]
    assert (stored.read_node_config_feat(index) == packed.read_node_config_feat(index)).all()
    assert (stored.node_feat == packed.node_feat).all()


@pytest.mark.parametrize("compress", [False, True])
def test_fortran_order_arrays_load_like_c_order_but_node_config_feat(tmp_path, compress):
    """numpy.savez stores an F-contiguous 2-D array with fortran_order=True (valid npz, which np.load reads): such
    node_feat, edge_index and config_feat load exactly as the C-order ones; node_config_feat, read by configuration,
    is refused naming file and key."""
    for kind, make in ((LAYOUT, make_layout_arrays), (TILE, make_tile_arrays)):
        arrays = make()
        fortran = {k: np.asfortranarray(v) if k != "node_config_feat" else v for k, v in arrays.items()}
        plain = load_graph(write_npz(tmp_path / "c.npz", arrays, compress), kind, "train")
        graph = load_graph(write_npz(tmp_path / "f.npz", fortran, compress), kind, "train")
        for key in ("node_feat", "node_opcode", "edge_index", "config_feat", "node_config_ids", "node_splits"):
            assert np.array_equal(getattr(graph, key), getattr(plain, key)), key
    arrays = make_layout_arrays()
    arrays["node_config_feat"] = np.asfortranarray(arrays["node_config_feat"])
    path = write_npz(tmp_path / "ncf.npz", arrays, compress)
    message = _raises(path, "node_config_feat", lambda: load_graph(path, LAYOUT, "train"))
    assert "expected a C-order array (this member is read by rows); found fortran_order=True" in message


def test_in_memory_source_and_tile_validation(tiny_npz):
    tile = load_graph(tiny_npz["tile"], TILE, "valid")
    validate_node_config_feat(tile)                            # no node_config_feat: nothing to check
    layout = load_graph(tiny_npz["layout"], LAYOUT, "valid")
    validate_node_config_feat(layout)
    values = make_layout_arrays()["node_config_feat"]
    layout.node_config_feat_source = values                    # a graph built in memory reads the same way
    assert (layout.read_node_config_feat([2, 2, 0]) == values[[2, 2, 0]]).all()
    assert [s for s, _ in layout.iter_node_config_feat(3)] == [0, 3]
    values[0, 0, 0] = 6
    with pytest.raises(TpuGraphsFormatError, match="config 0, node 0, dim 0"):
        layout.read_node_config_feat([0])


def test_load_graph_names_a_dangling_link_and_a_missing_file(tmp_path):
    link = tmp_path / "gone.npz"
    link.symlink_to(tmp_path / "nowhere.npz")
    with pytest.raises(TpuGraphsFormatError, match=f"{link}: expected an npz file; found a dangling link to "
                                                   f"{tmp_path / 'nowhere.npz'}"):
        load_graph(link, "layout:xla:random", "train")
    with pytest.raises(TpuGraphsFormatError, match="absent.npz: expected an npz file; found no such file"):
        load_graph(tmp_path / "absent.npz", "layout:xla:random", "train")


def test_load_graph_names_an_extra_member_that_is_not_npy(tmp_path):
    import zipfile

    path = write_npz(tmp_path / "g.npz", make_layout_arrays())
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("notes.txt", "hello")
    with pytest.raises(TpuGraphsFormatError, match=r"g.npz \[key 'notes.txt'\]: expected only <key>.npy members "
                                                   r"\(as numpy.savez writes\); found a member named 'notes.txt'"):
        load_graph(path, "layout:xla:random", "train")


def test_graph_paths_names_the_files_it_ignores(tmp_path, capsys):
    """Only *.npz files are graphs; anything else in a split folder (a README, an upper-case X.NPZ, a .npz.gz) is
    left out with one warning line naming the folder and the files, never silently."""
    folder = tmp_path / "npz" / "tile" / "xla" / "test"
    write_npz(folder / "a.npz", make_tile_arrays())
    (folder / "README.txt").write_text("notes")
    (folder / "b.NPZ").write_bytes((folder / "a.npz").read_bytes())
    assert graph_paths(tmp_path, TILE, "test") == [folder / "a.npz"]
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {folder}: left out 2 entries that are not *.npz graph files: README.txt, b.NPZ"]
    (folder / "README.txt").unlink()
    (folder / "b.NPZ").unlink()
    graph_paths(tmp_path, TILE, "test")
    assert capsys.readouterr().err == ""
