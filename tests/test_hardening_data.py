"""Hardening (#14): bad data folders and files, and submissions missing collections, get one clear error."""
from __future__ import annotations

import io
import os
import struct
import warnings
import zipfile

import numpy as np
import pytest
from conftest import make_layout_arrays, make_tile_arrays, write_npz

from pipeline.config import compose
from pipeline.submit import check_file, check_notes, main as submit_main
from pipeline.tpugraphs.dataset import (TpuGraphsFormatError, check_disjoint_splits, graph_paths, load_graph,
                                        validate_node_config_feat)
from pipeline.tpugraphs.npz import list_members

LAYOUT = "layout:xla:random"


def layout_tree(root, stems=None):
    stems = stems or {"train": "a", "valid": "b", "test": "c"}
    for split, stem in stems.items():
        arrays = make_layout_arrays()
        if split == "test":
            arrays["config_runtime"][:] = 0
        write_npz(root / "npz/layout/xla/random" / split / f"{stem}.npz", arrays)
    return root


def test_empty_split_folder_is_an_error(tmp_path):
    layout_tree(tmp_path)
    (tmp_path / "npz/layout/xla/random/test/c.npz").unlink()
    with pytest.raises(TpuGraphsFormatError, match=r"test: expected at least one layout:xla:random test graph "
                                                   r"\(\*\.npz\); found an empty folder"):
        graph_paths(tmp_path, LAYOUT, "test")


def test_dangling_symlink_is_named(tmp_path):
    layout_tree(tmp_path)
    link = tmp_path / "npz/layout/xla/random/train/gone.npz"
    os.symlink(tmp_path / "nowhere.npz", link)
    with pytest.raises(TpuGraphsFormatError, match=f"{link}: expected a readable npz file; found a dangling link"):
        graph_paths(tmp_path, LAYOUT, "train")


def test_same_graph_in_two_splits_is_refused(tmp_path):
    layout_tree(tmp_path, {"train": "a", "valid": "a", "test": "c"})
    with pytest.raises(TpuGraphsFormatError, match="'a' in both train and valid"):
        check_disjoint_splits(tmp_path, LAYOUT)
    assert [p.name for p in check_disjoint_splits(layout_tree(tmp_path / "ok"), LAYOUT)["test"]] == ["c.npz"]


def test_layout_graph_without_configurable_nodes_is_refused(tmp_path):
    arrays = make_layout_arrays()
    arrays["node_config_ids"] = np.zeros(0, np.int64)
    arrays["node_config_feat"] = np.zeros((4, 0, 18), np.float32)
    path = write_npz(tmp_path / "g.npz", arrays)
    with pytest.raises(TpuGraphsFormatError, match=r"\[key 'node_config_ids'\]: expected at least one configurable "
                                                   r"node; found shape \(0,\)"):
        load_graph(path, LAYOUT, "train")


def test_value_changed_inside_the_range_fails_the_crc(tmp_path):
    arrays = make_layout_arrays()                              # 2000 configs: listing reads only the npy header
    arrays["node_config_feat"] = np.full((2000, 2, 18), -1, np.float32)
    arrays["config_runtime"] = np.arange(1, 2001, dtype=np.int64)
    path = write_npz(tmp_path / "g.npz", arrays)
    member = list_members(path)["node_config_feat"]
    data = bytearray(path.read_bytes())
    at = member.data_offset                                    # config 0, node 0, dim 0: -1.0 -> 2.0 (valid)
    assert struct.unpack("<f", data[at:at + 4]) == (-1.0,)
    data[at:at + 4] = struct.pack("<f", 2.0)
    path.write_bytes(bytes(data))
    graph = load_graph(path, LAYOUT, "train")                  # headers and small members are intact
    assert graph.read_node_config_feat([0])[0, 0, 0] == 2      # a positioned read cannot tell
    with pytest.raises(TpuGraphsFormatError, match=r"node_config_feat'\]: expected data matching the zip CRC-32"):
        validate_node_config_feat(graph, chunk_size=512)
    with pytest.raises(zipfile.BadZipFile):                    # numpy refuses the same file
        np.load(path, allow_pickle=False)["node_config_feat"]


def test_duplicate_zip_member_is_refused(tmp_path):
    path = write_npz(tmp_path / "g.npz", make_tile_arrays())
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((3, 140), np.float32), allow_pickle=False)
    with warnings.catch_warnings(), zipfile.ZipFile(path, "a") as zf:
        warnings.simplefilter("ignore")                        # zipfile warns about the duplicate name
        zf.writestr("node_feat.npy", buffer.getvalue())
    with pytest.raises(TpuGraphsFormatError, match=r"\[key 'node_feat'\]: expected each member once"):
        load_graph(path, "tile:xla", "train")


def tpugraphs_root(tmp_path):
    """A download-like tree: tile:xla and layout:xla:random, one graph per split."""
    layout_tree(tmp_path)
    for split, stem in {"train": "t1", "valid": "t2", "test": "t3"}.items():
        write_npz(tmp_path / "npz/tile/xla" / split / f"{stem}.npz", make_tile_arrays())
    return tmp_path


def check_cfg(root):
    return compose(["data=tpugraphs", f"data.root={root}", "data.collections=[tile-xla,layout-xla-random]"])


def test_check_refuses_a_csv_missing_a_collection_and_notes_official_counts(tmp_path, capsys):
    root = tpugraphs_root(tmp_path / "data")
    csv = tmp_path / "sub.csv"
    csv.write_text("ID,TopConfigs\ntile:xla:t3,1;0;2\n")
    assert check_file(csv, check_cfg(root)) == ["no rows at all for collection layout:xla:random (expected 1)",
                                                 "missing ID 'layout:xla:random:c'"]
    assert check_notes(csv, check_cfg(root)) == [
        "tile:xla: 1 rows; the official test set has 844 graphs (894 rows in all)",
        "layout:xla:random: 0 rows; the official test set has 8 graphs (894 rows in all)"]
    csv.write_text("ID,TopConfigs\ntile:xla:t3,1;0;2\nlayout:xla:random:c,0;1;2;3\n")
    assert check_file(csv, check_cfg(root)) == []
    submit_main(["--check", str(csv), "data=tpugraphs", f"data.root={root}",
                 "data.collections=[tile-xla,layout-xla-random]"])            # valid: exits normally, with notes
    out = capsys.readouterr()
    assert "valid submission" in out.out and "note: layout:xla:random: 1 rows; the official test set has 8" in out.err
    synthetic = compose(["data=programs_ci", f"data.root={root}", "data.collections=[tile-xla,layout-xla-random]"])
    assert check_notes(csv, synthetic) == []                                   # only data=tpugraphs is compared


def test_check_cli_on_a_non_utf8_csv_is_one_line(tmp_path, capsys):
    root = tpugraphs_root(tmp_path / "data")
    csv = tmp_path / "sub.csv"
    csv.write_bytes("ID,TopConfigs\ntile:xla:t3,1;0;2\n".encode() + b"\xff\xfe\n")
    with pytest.raises(SystemExit) as info:
        submit_main(["--check", str(csv), "data=tpugraphs", f"data.root={root}",
                     "data.collections=[tile-xla,layout-xla-random]"])
    assert info.value.code == 1
    assert f"cannot read {csv}: not UTF-8 text (byte" in capsys.readouterr().err


def test_check_of_an_empty_csv_is_one_problem(tmp_path):
    root = tpugraphs_root(tmp_path / "data")
    csv = tmp_path / "empty.csv"
    csv.write_text("")
    assert check_file(csv, check_cfg(root)) == [f"cannot read {csv}: No columns to parse from file"]
