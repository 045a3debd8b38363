"""The .npy format at the byte level: header encoding/decoding (versions 1.0, 2.0, 3.0), exact reads, and
`NpyStreamWriter` for arrays whose row count is known only at the end.

Problems raise `pipeline.tpugraphs.errors.TpuGraphsFormatError` (file, key, expected, found).
"""
from __future__ import annotations

import ast
import math
import struct
from pathlib import Path

import numpy as np

from pipeline.errors import clipped, shortened
from pipeline.tpugraphs.errors import TpuGraphsFormatError

NPY_MAGIC = b"\x93NUMPY"
NPY_ALIGN = 64                     # numpy pads headers so that array data starts on a 64-byte boundary
MAX_NPY_HEADER = 1 << 20           # refuse absurd headers before literal_eval
MAX_ARRAY_BYTES = np.iinfo(np.intp).max   # numpy cannot allocate (or index) more, even with a 0-sized dim
NON_BUFFER_KINDS = "Mm"            # datetime64 / timedelta64: no byte buffer to read into (nor a number)


def npy_header(shape: tuple[int, ...], dtype: np.dtype, length: int | None = None) -> bytes:
    """The .npy header (format 1.0, or 2.0 when long) for a C-order array; data starts 64-byte aligned.

    `length`: pad the header to exactly this many bytes (to rewrite a header in place, see NpyStreamWriter).
    """
    text = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)})
    for version, length_fmt in (((1, 0), "<H"), ((2, 0), "<I")):
        prefix = len(NPY_MAGIC) + 2 + struct.calcsize(length_fmt)
        pad = -(prefix + len(text) + 1) % NPY_ALIGN if length is None else length - prefix - len(text) - 1
        if pad < 0:
            raise ValueError(f"npy header for shape {shape} does not fit in {length} bytes")
        body = (text + " " * pad + "\n").encode("latin1")
        if len(body) < 1 << (8 * struct.calcsize(length_fmt)):
            return NPY_MAGIC + bytes(version) + struct.pack(length_fmt, len(body)) + body
    raise ValueError(f"npy header too long for shape {shape}")


def read_exact(f, n: int, path: Path, key: str | None) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise TpuGraphsFormatError(path, key, f"{n} more bytes", f"{len(data)} (file truncated)")
    return data


def readinto(f, out: np.ndarray, path: Path, key: str) -> np.ndarray:
    """Fill the contiguous array `out` from the binary stream `f`."""
    view, pos = memoryview(out.reshape(-1)).cast("B"), 0
    while pos < len(view):
        got = f.readinto(view[pos:])
        if not got:
            raise TpuGraphsFormatError(path, key, f"{len(view)} bytes of array data", f"{pos} (file truncated)")
        pos += got
    return out


def read_npy_header(f, path: Path, key: str) -> tuple[int, tuple[int, ...], np.dtype, bool]:
    """Parse an npy header (format 1.0, 2.0 or 3.0) at the stream position: (header bytes, shape, dtype,
    fortran_order). A Fortran-order array (numpy.save writes one for an F-contiguous array of 2+ dims) is valid
    npy; what reads its data in rows refuses it (pipeline.tpugraphs.npz)."""
    magic = read_exact(f, len(NPY_MAGIC) + 2, path, key)
    if magic[:len(NPY_MAGIC)] != NPY_MAGIC:
        raise TpuGraphsFormatError(path, key, "an .npy member (magic \\x93NUMPY)", repr(magic[:6]))
    major, minor = magic[-2], magic[-1]
    if (major, minor) not in ((1, 0), (2, 0), (3, 0)):
        raise TpuGraphsFormatError(path, key, "npy format version 1.0, 2.0 or 3.0", f"{major}.{minor}")
    length_fmt = "<H" if major == 1 else "<I"
    (length,) = struct.unpack(length_fmt, read_exact(f, struct.calcsize(length_fmt), path, key))
    if length > MAX_NPY_HEADER:
        raise TpuGraphsFormatError(path, key, f"an npy header under {MAX_NPY_HEADER} bytes", f"{length} bytes")
    text = read_exact(f, length, path, key).decode("utf8" if major == 3 else "latin1")
    try:
        header = ast.literal_eval(text)
        dtype = np.lib.format.descr_to_dtype(header["descr"])
    except (ValueError, SyntaxError, KeyError, TypeError, MemoryError, RecursionError) as e:
        raise TpuGraphsFormatError(path, key, "an npy header dict {descr, fortran_order, shape}",
                                   f"{shortened(text.strip())} ({clipped(str(e))})") from None
    problem = _header_problem(header, dtype)
    if problem:
        raise TpuGraphsFormatError(path, key, "an npy header dict {descr, fortran_order, shape} as numpy writes it "
                                              "(a tuple of int sizes, a bool fortran_order)", problem)
    shape, fortran = header["shape"], header["fortran_order"]
    if dtype.hasobject:
        raise TpuGraphsFormatError(path, key, "a numeric array (loading never unpickles)",
                                   f"a pickled object array (dtype {dtype})")
    if dtype.kind in NON_BUFFER_KINDS:
        raise TpuGraphsFormatError(path, key, "a numeric dtype", f"dtype {dtype} (datetime64/timedelta64)")
    if any(s < 0 for s in shape):
        raise TpuGraphsFormatError(path, key, "a non-negative shape", str(shape))
    if math.prod(max(s, 1) for s in shape) * max(dtype.itemsize, 1) > MAX_ARRAY_BYTES:   # exact, no int64 wrap
        raise TpuGraphsFormatError(path, key, f"an array of at most {MAX_ARRAY_BYTES} bytes",
                                   f"shape {shape} of {dtype}")
    return len(NPY_MAGIC) + 2 + struct.calcsize(length_fmt) + length, shape, dtype, fortran


def _header_problem(header: object, dtype: np.dtype) -> str | None:
    """What numpy.load would refuse in a parsed header dict (numpy.save never writes it), or None: other keys, a
    shape that is not a tuple of ints (2.9 rows, a list, True), a fortran_order that is not a bool, a sub-array
    descr."""
    if set(header) != {"descr", "fortran_order", "shape"}:
        return f"keys {shortened(sorted(map(str, header)))}"
    shape = header["shape"]
    if not isinstance(shape, tuple) or not all(type(s) is int for s in shape):
        return f"shape {shortened(shape)}"
    if not isinstance(header["fortran_order"], bool):
        return f"fortran_order {shortened(header['fortran_order'])}"
    if dtype.subdtype is not None:
        return f"descr {shortened(header['descr'])} (a sub-array dtype)"
    return None


class NpyStreamWriter:
    """Write a C-order `.npy` file row block by row block when the row count is only known at the end.

    The header is written for `max_rows` (an upper bound) and rewritten, at the same length, with the rows actually
    appended when the writer closes; the data offset stays put. Memory ~ one block. Use as a context manager;
    on error the partial file is removed.
    """

    def __init__(self, path: str | Path, row_shape: tuple[int, ...], dtype, max_rows: int):
        self.path = Path(path)
        self.row_shape = tuple(int(d) for d in row_shape)
        self.dtype = np.dtype(dtype)
        self.rows = 0
        self.max_rows = int(max_rows)
        header = npy_header((self.max_rows, *self.row_shape), self.dtype)
        self._header_len = len(header)
        self._file = open(self.path, "wb")
        self._file.write(header)

    def write(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape[1:] != self.row_shape:
            raise ValueError(f"{self.path}: block rows of shape {block.shape[1:]}, expected {self.row_shape}")
        if self.rows + len(block) > self.max_rows:
            raise ValueError(f"{self.path}: more than the announced {self.max_rows} rows")
        self._file.write(block.tobytes())
        self.rows += len(block)

    def __enter__(self) -> "NpyStreamWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._file.seek(0)
            self._file.write(npy_header((self.rows, *self.row_shape), self.dtype, self._header_len))
        self._file.close()
        if exc_type is not None:
            self.path.unlink(missing_ok=True)
