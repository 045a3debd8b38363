"""pipeline.tpugraphs.npy: npy headers numpy can read, NpyStreamWriter's row-count rewrite, no partial files."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.tpugraphs.npy import NpyStreamWriter, npy_header

ROWS = np.arange(4 * 2 * 3, dtype=np.int8).reshape(4, 2, 3)     # [rows, 2, 3]


def test_npy_header_is_aligned_and_can_be_padded_to_a_length(tmp_path):
    header = npy_header((4, 2, 3), np.dtype(np.int8))             # 10 + 62 header bytes, padded to 128
    assert len(header) == 128 and header.startswith(b"\x93NUMPY\x01\x00")
    path = tmp_path / "x.npy"
    path.write_bytes(npy_header((4, 2, 3), np.dtype(np.int8), length=192) + ROWS.tobytes())
    assert np.array_equal(np.load(path), ROWS)
    with pytest.raises(ValueError, match="does not fit"):
        npy_header((4, 2, 3), np.dtype(np.int8), length=64)


def test_npy_stream_writer_rewrites_the_row_count(tmp_path):
    path = tmp_path / "x.npy"
    with NpyStreamWriter(path, (2, 3), np.int8, max_rows=123456) as writer:   # header sized for 123456 rows
        writer.write(ROWS[:3])
        writer.write(ROWS[3:])
    loaded = np.load(path, mmap_mode="r")
    assert loaded.shape == (4, 2, 3) and np.array_equal(loaded, ROWS)
    header = path.stat().st_size - ROWS.nbytes
    assert header % 64 == 0 and np.load(path).dtype == np.int8      # data stays 64-byte aligned


def test_npy_stream_writer_removes_a_partial_file(tmp_path):
    path = tmp_path / "x.npy"
    with pytest.raises(ValueError, match="block rows of shape"):
        with NpyStreamWriter(path, (2, 3), np.int8, max_rows=10) as writer:
            writer.write(ROWS[:2])
            writer.write(np.zeros((1, 3, 3), np.int8))
    assert not path.exists()


@pytest.mark.parametrize("dtype", ["<M8[ns]", "<m8[s]"])
def test_a_datetime_member_is_refused_by_its_header(tmp_path, dtype):
    """datetime64 / timedelta64 arrays cannot be read into a byte buffer: refused from the header, naming the key."""
    import io
    from pipeline.tpugraphs.errors import TpuGraphsFormatError
    from pipeline.tpugraphs.npy import read_npy_header

    stream = io.BytesIO()
    np.save(stream, np.zeros(3, dtype))
    stream.seek(0)
    with pytest.raises(TpuGraphsFormatError, match=r"x.npz \[key 'config_runtime'\]: expected a numeric dtype"):
        read_npy_header(stream, tmp_path / "x.npz", "config_runtime")


@pytest.mark.parametrize("shape", [(2 ** 62, 4), (2 ** 61, 0)])
def test_a_header_shape_too_large_for_numpy_is_refused(tmp_path, shape):
    """A (damaged or crafted) header may announce a shape whose byte count wraps around in int64 to exactly the
    bytes the member holds (here 0), or a 0-sized array numpy still cannot allocate: refused before any read,
    naming the file and key (not numpy's 'array is too big' traceback)."""
    import zipfile
    from pipeline.tpugraphs.errors import TpuGraphsFormatError
    from pipeline.tpugraphs.npz import list_members

    path = tmp_path / "huge.npz"
    text = repr({"descr": "<f4", "fortran_order": False, "shape": shape})
    text += " " * (-(10 + len(text) + 1) % 64) + "\n"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("node_feat.npy", b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode())
    with pytest.raises(TpuGraphsFormatError, match=r"huge.npz \[key 'node_feat'\]: expected an array of at most"):
        list_members(path)


def header_stream(text: str, data: bytes = b""):
    """An npy 1.0 stream with the header dict `text` (padded as numpy pads it), then `data`."""
    import io

    text += " " * (-(10 + len(text) + 1) % 64) + "\n"
    return io.BytesIO(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1") + data)


@pytest.mark.parametrize("fields, found", [
    ("'descr': '<f4', 'fortran_order': False, 'shape': (2.9, 3)", "shape (2.9, 3)"),   # was read as 2 rows
    ("'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]", "shape [2, 3]"),
    ("'descr': '<f4', 'fortran_order': False, 'shape': (True, 6)", "shape (True, 6)"),
    ("'descr': '<f4', 'fortran_order': 'no', 'shape': (2, 3)", "fortran_order 'no'"),   # was True ('no' is truthy)
    ("'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1", "keys ['descr', 'fortran_order', 'shape', 'x']"),
    ("'descr': '(3,)<f4', 'fortran_order': False, 'shape': (2,)", "descr '(3,)<f4' (a sub-array dtype)"),
])
def test_a_header_numpy_itself_refuses_is_refused(tmp_path, fields, found):
    """numpy.load refuses these headers (and numpy.save never writes them); the reader took them, casting 2.9 rows
    to 2, reading fortran_order 'no' as True and ignoring unknown keys."""
    from pipeline.tpugraphs.errors import TpuGraphsFormatError
    from pipeline.tpugraphs.npy import read_npy_header

    with pytest.raises(TpuGraphsFormatError) as info:
        read_npy_header(header_stream("{" + fields + "}", bytes(24)), tmp_path / "x.npz", "node_feat")
    assert str(info.value).startswith(f"{tmp_path / 'x.npz'} [key 'node_feat']: expected an npy header dict "
                                      "{descr, fortran_order, shape} as numpy writes it (a tuple of int sizes, a "
                                      "bool fortran_order); found ") and str(info.value).endswith(found)
    valid = header_stream("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes(24))
    assert read_npy_header(valid, tmp_path / "x.npz", "node_feat")[1:] == ((2, 3), np.dtype("<f4"), False)


def test_an_unreadable_header_is_echoed_shortened(tmp_path):
    """A header nested 5000 lists deep was echoed whole: a 10 KB error line."""
    from pipeline.tpugraphs.errors import TpuGraphsFormatError
    from pipeline.tpugraphs.npy import read_npy_header

    with pytest.raises(TpuGraphsFormatError) as info:
        read_npy_header(header_stream("{'x': " + "[" * 5000 + "]" * 5000 + "}"), tmp_path / "x.npz", "node_feat")
    assert len(str(info.value)) < 400 and "..." in str(info.value)
