"""pipeline.tpugraphs.npz: the atomic streaming npz writer and the lazy member reader."""
from __future__ import annotations

import zipfile

import numpy as np
import pytest

from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.npz import (NpzWriter, iter_rows, list_members, member_memmap, open_member,
                            read_array, read_rows)

ROWS = np.arange(7 * 3 * 2, dtype=np.float32).reshape(7, 3, 2)   # [rows, 3, 2], row r holds 6r..6r+5
INDEX = [5, 0, 5, 6, 2, 0]                                         # unsorted, with repeats


def _write(path, compress):
    with NpzWriter(path, compress=compress) as npz:
        npz.write("ids", np.array([4, 1, 9], np.uint8))
        npz.write_chunks("rows", ROWS.shape, np.float32, (ROWS[i:i + 3] for i in range(0, 7, 3)))
        npz.write("scalar", np.int64(42))
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_writer_round_trips_through_numpy(tmp_path, compress):
    path = _write(tmp_path / "a.npz", compress)
    with np.load(path, allow_pickle=False) as npz:
        assert npz["ids"].dtype == np.uint8 and npz["ids"].tolist() == [4, 1, 9]
        assert (npz["rows"] == ROWS).all() and npz["scalar"] == 42
    with zipfile.ZipFile(path) as zf:
        kinds = {i.compress_type for i in zf.infolist()}
    assert kinds == {zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED}
    assert [p.name for p in tmp_path.iterdir()] == ["a.npz"]          # no temp file left behind


def test_stored_members_are_aligned_and_memory_mappable(tmp_path):
    members = list_members(_write(tmp_path / "a.npz", compress=False))
    assert set(members) == {"ids", "rows", "scalar"}
    rows = members["rows"]
    assert (rows.shape, rows.dtype, rows.compressed) == ((7, 3, 2), np.float32, False)
    assert rows.data_offset % 64 == 0 and members["ids"].data_offset % 64 == 0
    mm = member_memmap(rows)
    assert isinstance(mm, np.memmap) and (mm == ROWS).all()


def test_compressed_member_is_not_memory_mapped(tmp_path):
    member = open_member(_write(tmp_path / "a.npz", compress=True), "rows")
    assert member.compressed and member.data_offset is None and member.shape == (7, 3, 2)
    with pytest.raises(ValueError, match="compressed"):
        member_memmap(member)


@pytest.mark.parametrize("writer", ["NpzWriter", "np.savez"])
@pytest.mark.parametrize("compress", [False, True])
def test_subset_reads_equal_the_full_array(tmp_path, writer, compress):
    path = tmp_path / "a.npz"
    if writer == "NpzWriter":
        _write(path, compress)
    else:
        (np.savez_compressed if compress else np.savez)(path, rows=ROWS)
    member = open_member(path, "rows")
    for chunk_rows in (None, 1, 2, 7):
        subset = read_rows(member, INDEX, chunk_rows)
        assert subset.dtype == np.float32 and (subset == ROWS[INDEX]).all()
    assert (read_rows(member, [3, 4]) == ROWS[3:5]).all()
    assert read_rows(member, []).shape == (0, 3, 2)
    assert (read_array(member) == ROWS).all()
    chunks = list(iter_rows(member, 3))
    assert [s for s, _ in chunks] == [0, 3, 6] and (np.concatenate([c for _, c in chunks]) == ROWS).all()
    with pytest.raises(IndexError):
        read_rows(member, [7])
    with pytest.raises(IndexError):
        read_rows(member, [-1])


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_format_versions(tmp_path, version):
    path = tmp_path / "v.npz"
    with zipfile.ZipFile(path, "w") as zf, zf.open("rows.npy", "w") as f:
        np.lib.format.write_array(f, ROWS, version=version)
    member = open_member(path, "rows")
    assert member.shape == (7, 3, 2) and (read_rows(member, INDEX) == ROWS[INDEX]).all()


def test_writer_streams_chunks_and_checks_row_count(tmp_path):
    path = tmp_path / "big.npz"
    chunks = (np.full((100, 4), i, np.int16) for i in range(5))      # 5 chunks of 100 rows
    with NpzWriter(path) as npz:
        npz.write_chunks("x", (500, 4), np.int16, chunks)
    x = read_array(open_member(path, "x"))
    assert x.shape == (500, 4) and x[::100, 0].tolist() == [0, 1, 2, 3, 4]
    for rows in (499, 501):
        with pytest.raises(ValueError, match="rows"):
            with NpzWriter(tmp_path / "short.npz") as npz:
                npz.write_chunks("x", (rows, 4), np.int16, (np.zeros((100, 4)) for _ in range(5)))
    with pytest.raises(ValueError, match="chunks"):
        with NpzWriter(tmp_path / "short.npz") as npz:
            npz.write_chunks("x", (10, 4), np.int16, [np.zeros((10, 3))])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.npz"]


def test_exception_mid_write_leaves_no_file_and_keeps_the_old_one(tmp_path):
    path = tmp_path / "out.npz"
    _write(path, compress=False)
    before = path.read_bytes()

    def failing_chunks():
        yield np.zeros((2, 3), np.float32)
        raise RuntimeError("generator failed")

    with pytest.raises(RuntimeError, match="generator failed"):
        with NpzWriter(path) as npz:
            npz.write("a", np.ones(3))
            npz.write_chunks("b", (4, 3), np.float32, failing_chunks())
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["out.npz"]
    with pytest.raises(RuntimeError):
        with NpzWriter(tmp_path / "new.npz") as npz:
            npz.write("a", np.ones(3))
            raise RuntimeError("crash")
    assert not (tmp_path / "new.npz").exists()


def test_writer_refuses_object_arrays_and_duplicate_keys(tmp_path):
    with pytest.raises(ValueError, match="object"):
        with NpzWriter(tmp_path / "o.npz") as npz:
            npz.write("a", np.array([1, "x"], dtype=object))
    with pytest.raises(ValueError, match="twice"):
        with NpzWriter(tmp_path / "o.npz") as npz:
            npz.write("a", np.ones(2))
            npz.write("a", np.ones(2))
    assert list(tmp_path.iterdir()) == []


def test_reader_rejects_pickles_and_non_zip_and_reads_fortran_order_whole_only(tmp_path):
    path = tmp_path / "p.npz"
    np.savez(path, obj=np.array([{"a": 1}], dtype=object), f=np.asfortranarray(np.ones((2, 3))))
    with pytest.raises(TpuGraphsFormatError, match="pickled object array") as info:
        open_member(path, "obj")
    assert info.value.key == "obj" and str(path) in str(info.value)
    values = np.arange(6.0).reshape(2, 3)
    for compress in (False, True):           # numpy.savez writes an F-contiguous array with fortran_order=True
        (np.savez_compressed if compress else np.savez)(path, f=np.asfortranarray(values))
        member = open_member(path, "f")
        whole = read_array(member)
        assert member.fortran and np.array_equal(whole, values) and whole.flags.c_contiguous
        for read_by_rows in (lambda: next(iter_rows(member, 1)), lambda: read_rows(member, [0]),
                             lambda: member_memmap(member)):
            with pytest.raises(TpuGraphsFormatError, match=r"\[key 'f'\]: expected a C-order array .*fortran_order"):
                read_by_rows()
    np.savez(path, a=np.ones(2))
    with pytest.raises(TpuGraphsFormatError, match="only \\['a'\\]"):
        open_member(path, "b")
    path.write_bytes(b"not a zip at all")
    with pytest.raises(TpuGraphsFormatError, match="zip"):
        list_members(path)


def test_truncated_stored_member_data_is_detected(tmp_path):
    path = _write(tmp_path / "a.npz", compress=False)
    member = open_member(path, "rows")
    data = path.read_bytes()
    path.write_bytes(data[:member.data_offset + 8])                   # cut inside the array data
    with pytest.raises(TpuGraphsFormatError) as info:
        list_members(path)
    assert str(path) in str(info.value)


def test_format_error_reduces_with_its_fields():
    """__reduce__ (what a process pool sends back from a worker) keeps the four fields; copy uses the same path."""
    import copy

    error = copy.copy(TpuGraphsFormatError("/d/f.npz", "node_feat", "shape (?, 140)", "(5, 139)"))
    assert (error.path, error.key, error.expected, error.found) == ("/d/f.npz", "node_feat", "shape (?, 140)",
                                                                   "(5, 139)")
    assert str(error) == "/d/f.npz [key 'node_feat']: expected shape (?, 140); found (5, 139)"
