"""The .npy format at the byte level: header encoding/decoding (versions 1.0, 2.0, 3.0) and exact reads.

Also home of `TpuGraphsFormatError`, the data layer's one error type (pipeline.tpugraphs.npz and pipeline.tpugraphs.dataset raise
it and re-export it): its message names the file, the key, what was expected and what was found.
"""
from __future__ import annotations

import ast
import os
import struct
from pathlib import Path

import numpy as np

NPY_MAGIC = b"\x93NUMPY"
NPY_ALIGN = 64                     # numpy pads headers so that array data starts on a 64-byte boundary
MAX_NPY_HEADER = 1 << 20           # refuse absurd headers before literal_eval


class TpuGraphsFormatError(ValueError):
    """A data file or folder is not what the TpuGraphs format expects (the data layer's one error type)."""

    def __init__(self, path: str | os.PathLike, key: str | None, expected: str, found: str):
        self.path, self.key, self.expected, self.found = str(path), key, expected, found
        where = self.path if key is None else f"{self.path} [key '{key}']"
        super().__init__(f"{where}: expected {expected}; found {found}")

    def __reduce__(self):  # keep the four fields when pickled across processes
        return type(self), (self.path, self.key, self.expected, self.found)


def npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """The .npy header (format 1.0, or 2.0 when long) for a C-order array; data starts 64-byte aligned."""
    text = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)})
    for version, length_fmt in (((1, 0), "<H"), ((2, 0), "<I")):
        prefix = len(NPY_MAGIC) + 2 + struct.calcsize(length_fmt)
        pad = -(prefix + len(text) + 1) % NPY_ALIGN
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


def read_npy_header(f, path: Path, key: str) -> tuple[int, tuple[int, ...], np.dtype]:
    """Parse an npy header (format 1.0, 2.0 or 3.0) at the stream position: (header bytes, shape, dtype)."""
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
        shape, fortran = tuple(int(s) for s in header["shape"]), header["fortran_order"]
        dtype = np.lib.format.descr_to_dtype(header["descr"])
    except (ValueError, SyntaxError, KeyError, TypeError) as e:
        raise TpuGraphsFormatError(path, key, "an npy header dict {descr, fortran_order, shape}",
                                   f"{text.strip()!r} ({e})") from None
    if dtype.hasobject:
        raise TpuGraphsFormatError(path, key, "a numeric array (loading never unpickles)",
                                   f"a pickled object array (dtype {dtype})")
    if fortran:
        raise TpuGraphsFormatError(path, key, "a C-order array", "fortran_order=True")
    if any(s < 0 for s in shape):
        raise TpuGraphsFormatError(path, key, "a non-negative shape", str(shape))
    return len(NPY_MAGIC) + 2 + struct.calcsize(length_fmt) + length, shape, dtype
