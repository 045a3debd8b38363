"""Streaming npz I/O: an atomic, ZIP64, uncompressed-by-default writer and a lazy per-member reader.

An npz file is a zip archive of `<key>.npy` members. A STORED (uncompressed) member's array data lies contiguous
in the file, so it can be memory-mapped at its offset; a DEFLATED member has to be decompressed in order, so it is
streamed row by row. Either way a subset of rows (the configurations of one graph, say) is read with memory
proportional to the subset, never to the whole member: a real node_config_feat is over 7 GB.

Every problem with a file raises `TpuGraphsFormatError`, whose message names the file, the key (member), what
was expected and what was found. Nothing is ever unpickled.
"""
from __future__ import annotations

import os
import struct
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from pipeline.files import atomic_path
from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.npy import NPY_ALIGN, npy_header, read_exact, read_npy_header, readinto

ZIP_LOCAL_HEADER = struct.Struct("<4s5H3L2H")   # local file header: signature ... name length, extra length
ZIP_LOCAL_SIGNATURE = b"PK\x03\x04"
ZIP64_LOCAL_EXTRA = 20             # zipfile's zip64 extra field in a local header (force_zip64=True)
PADDING_EXTRA_ID = 0xD935          # the extra-field id zipalign uses for alignment padding
DEFAULT_CHUNK_BYTES = 32 << 20     # rows per streamed chunk are sized to about this many bytes
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, NotImplementedError)


# ----------------------------------------------------------------------------------------------- writing
class NpzWriter:
    """Write an npz atomically (`pipeline.files.atomic_path`): members go to a temp file, renamed on a clean exit.

    Members are ZIP64, STORED (memory-mappable, data 64-byte aligned in the file) unless `compress=True`.
    On an exception inside the `with` block the temp file is removed and `path` is left untouched.

    Example:
        with NpzWriter(path) as npz:
            npz.write("node_feat", node_feat)
            npz.write_chunks("node_config_feat", (C, NC, 18), np.float32, chunks)   # streamed
    """

    def __init__(self, path: str | os.PathLike, compress: bool = False):
        self.path = Path(path)
        self.compression = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        self._atomic = atomic_path(self.path)
        self._tmp: Path | None = None
        self._zip: zipfile.ZipFile | None = None
        self._keys: set[str] = set()

    def __enter__(self) -> "NpzWriter":
        self._tmp = self._atomic.__enter__()
        self._zip = zipfile.ZipFile(self._tmp, "w", compression=self.compression, allowZip64=True)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._zip.close()
        except Exception as err:
            if exc_type is None:
                self._atomic.__exit__(type(err), err, err.__traceback__)   # removes the temp file
                raise
        self._atomic.__exit__(exc_type, exc, tb)

    def _open_member(self, key: str, shape: tuple[int, ...], dtype: np.dtype):
        """Open member `<key>.npy` for writing and write its npy header; returns the zip write handle."""
        if self._zip is None:
            raise RuntimeError("NpzWriter must be used as a context manager")
        if key in self._keys:
            raise ValueError(f"{self.path}: key '{key}' written twice")
        if dtype.hasobject:
            raise ValueError(f"{self.path}: key '{key}': object arrays are not written (they need pickle)")
        self._keys.add(key)
        header = npy_header(shape, dtype)
        info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = self.compression
        info.file_size = len(header) + int(np.prod(shape)) * dtype.itemsize
        if self.compression == zipfile.ZIP_STORED:   # pad the local header so the array data is aligned
            start = self._zip.fp.tell() + ZIP_LOCAL_HEADER.size + len(info.filename.encode()) + ZIP64_LOCAL_EXTRA
            pad = -(start + 4 + len(header)) % NPY_ALIGN
            info.extra = struct.pack("<HH", PADDING_EXTRA_ID, pad) + bytes(pad)
        handle = self._zip.open(info, "w", force_zip64=True)
        handle.write(header)
        return handle

    def write(self, key: str, array: np.ndarray) -> None:
        """Write a whole in-memory array as member `key` (C order, native dtype kept)."""
        array = np.ascontiguousarray(array)
        with self._open_member(key, array.shape, array.dtype) as handle:
            if array.size:
                handle.write(memoryview(array.reshape(-1)).cast("B"))

    def write_chunks(self, key: str, shape: Iterable[int], dtype, chunk_iter: Iterable[np.ndarray]) -> None:
        """Stream member `key` of `shape`/`dtype` from row chunks (each [rows, *shape[1:]]), never all in memory.

        Raises:
            ValueError: a chunk has the wrong trailing shape, or the chunks' rows do not add up to shape[0].
        """
        shape, dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        if not shape:
            raise ValueError(f"{self.path}: key '{key}': write_chunks needs at least one dimension")
        rows = 0
        with self._open_member(key, shape, dtype) as handle:
            for chunk in chunk_iter:
                chunk = np.ascontiguousarray(chunk, dtype=dtype)
                if chunk.shape[1:] != shape[1:] or rows + len(chunk) > shape[0]:
                    raise ValueError(f"{self.path}: key '{key}': expected chunks of [rows, *{shape[1:]}] "
                                     f"adding up to {shape[0]} rows; got {chunk.shape} after {rows} rows")
                if chunk.size:
                    handle.write(memoryview(chunk.reshape(-1)).cast("B"))
                rows += len(chunk)
            if rows != shape[0]:
                raise ValueError(f"{self.path}: key '{key}': expected {shape[0]} rows, chunks gave {rows}")


# ----------------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class NpzMember:
    """Where one array lives inside an npz, read from its headers only (no array data touched)."""

    path: Path
    key: str                          # array name (member name without ".npy")
    name: str                         # zip member name
    shape: tuple[int, ...]
    dtype: np.dtype
    compressed: bool                  # False: STORED, memory-mappable at data_offset
    header_size: int                  # bytes of the npy header inside the member
    data_offset: int | None = None    # absolute file offset of the array data (STORED members only)
    crc: int | None = None            # the zip directory's CRC-32 of the member bytes (npy header + data)
    fortran: bool = False             # fortran_order=True: read whole only (read_array), never by rows

    @property
    def row_nbytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def error(self, expected: str, found: str) -> TpuGraphsFormatError:
        return TpuGraphsFormatError(self.path, self.key, expected, found)

    def check_rows_readable(self) -> None:
        """Raise TpuGraphsFormatError unless rows can be read in place (a Fortran-order member's rows are not
        contiguous: it is read whole, by `read_array`, or not at all)."""
        if self.fortran:
            raise self.error("a C-order array (this member is read by rows)", "fortran_order=True")

    def chunk_rows(self, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
        """Rows per chunk so that one chunk holds about `chunk_bytes`."""
        return max(1, chunk_bytes // max(1, self.row_nbytes))


def _member(zf: zipfile.ZipFile, raw, info: zipfile.ZipInfo, path: Path, file_size: int) -> NpzMember:
    if not info.filename.endswith(".npy"):
        raise TpuGraphsFormatError(path, info.filename, "only <key>.npy members (as numpy.savez writes)",
                                   f"a member named {info.filename!r}")
    key = info.filename.removesuffix(".npy")
    if info.flag_bits & 0x1:
        raise TpuGraphsFormatError(path, key, "an unencrypted member", "an encrypted member")
    with zf.open(info) as f:
        header_size, shape, dtype, fortran = read_npy_header(f, path, key)
    size = header_size + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size != info.file_size:
        raise TpuGraphsFormatError(path, key, f"a member of {size} bytes for shape {shape} {dtype}",
                                   f"{info.file_size} bytes")
    if info.compress_type != zipfile.ZIP_STORED:
        return NpzMember(path, key, info.filename, shape, dtype, True, header_size, crc=info.CRC, fortran=fortran)
    raw.seek(info.header_offset)
    local = ZIP_LOCAL_HEADER.unpack(read_exact(raw, ZIP_LOCAL_HEADER.size, path, key))
    if local[0] != ZIP_LOCAL_SIGNATURE:
        raise TpuGraphsFormatError(path, key, "a zip local file header", repr(local[0]))
    offset = info.header_offset + ZIP_LOCAL_HEADER.size + local[-2] + local[-1] + header_size
    if offset + size - header_size > file_size:
        raise TpuGraphsFormatError(path, key, f"array data up to byte {offset + size - header_size}",
                                   f"a file of {file_size} bytes (truncated)")
    return NpzMember(path, key, info.filename, shape, dtype, False, header_size, offset, crc=info.CRC,
                     fortran=fortran)


def list_members(path: str | os.PathLike) -> dict[str, NpzMember]:
    """Every member of the npz at `path`, by key, from the zip directory and npy headers only.

    Raises:
        TpuGraphsFormatError: no file at `path` (or a dangling link), not a readable zip (truncated, corrupt), or
            a member that is not a plain npy array.
    """
    path = Path(path)
    if not path.is_file():
        found = (f"a dangling link to {os.readlink(path)}" if path.is_symlink() else
                 "a folder" if path.is_dir() else "no such file")
        raise TpuGraphsFormatError(path, None, "an npz file", found)
    try:
        file_size = path.stat().st_size
        with zipfile.ZipFile(path) as zf, open(path, "rb") as raw:
            members = {}
            for info in zf.infolist():
                try:
                    member = _member(zf, raw, info, path, file_size)
                except _ZIP_ERRORS as e:
                    key = info.filename.removesuffix(".npy")
                    raise TpuGraphsFormatError(path, key, "intact member data", f"{type(e).__name__}: {e}") from None
                if member.key in members:      # zipfile would read the last one, numpy the first: refuse both
                    raise TpuGraphsFormatError(path, member.key, "each member once", "a duplicate zip member")
                members[member.key] = member
            return members
    except _ZIP_ERRORS as e:
        raise TpuGraphsFormatError(path, None, "a readable npz (zip) archive",
                                   f"{type(e).__name__}: {e}") from None


def open_member(path: str | os.PathLike, key: str) -> NpzMember:
    """The member `key` of the npz at `path` (shape, dtype, storage), without reading its data."""
    members = list_members(path)
    if key not in members:
        raise TpuGraphsFormatError(path, key, f"a member '{key}.npy'", f"only {sorted(members)}")
    return members[key]


@contextmanager
def _data_stream(member: NpzMember):
    """A binary stream positioned at the member's array data."""
    if not member.compressed:
        with open(member.path, "rb") as raw:
            raw.seek(member.data_offset)
            yield raw
        return
    with zipfile.ZipFile(member.path) as zf, zf.open(member.name) as f:
        read_exact(f, member.header_size, member.path, member.key)
        yield f


def read_array(member: NpzMember, zf: zipfile.ZipFile | None = None) -> np.ndarray:
    """The whole array (for small members), C-ordered. Read through zipfile so that the CRC is checked."""
    try:
        own = zf is None
        zf = zipfile.ZipFile(member.path) if own else zf
        try:
            with zf.open(member.name) as f:
                read_exact(f, member.header_size, member.path, member.key)
                if not member.fortran:
                    return readinto(f, np.empty(member.shape, member.dtype), member.path, member.key)
                transposed = np.empty(member.shape[::-1], member.dtype)   # Fortran order = the transpose in C order
                return np.ascontiguousarray(readinto(f, transposed, member.path, member.key).T)
        finally:
            if own:
                zf.close()
    except _ZIP_ERRORS as e:
        raise member.error("intact member data", f"{type(e).__name__}: {e}") from None


def member_memmap(member: NpzMember) -> np.ndarray:
    """A read-only np.memmap of a STORED member's array, at its offset in the file.

    Good for slices and sequential scans; for scattered subsets prefer `read_rows` (see its note on RSS)."""
    member.check_rows_readable()
    if member.compressed:
        raise ValueError(f"{member.path} [key '{member.key}']: compressed members cannot be memory-mapped")
    if 0 in member.shape:
        return np.empty(member.shape, member.dtype)
    return np.memmap(member.path, dtype=member.dtype, mode="r", offset=member.data_offset, shape=member.shape)


def iter_rows(member: NpzMember, chunk_rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (start row, rows[start:start+chunk_rows]) in order; memory is one chunk (file reads, no mmap).

    A pass that reaches the last row checks the member's zip CRC-32 (zipfile does it for a compressed member; for a
    STORED one, read here by position, it is computed over the npy header and every chunk), so a value changed
    inside the valid range after writing is refused (TpuGraphsFormatError) once the stream ends.
    """
    member.check_rows_readable()
    if not member.shape or chunk_rows < 1:
        raise ValueError(f"{member.path} [key '{member.key}']: need ndim >= 1 and chunk_rows >= 1")
    try:
        crc = None if member.compressed or member.crc is None else _stored_header_crc(member)
        with _data_stream(member) as f:
            for start in range(0, member.shape[0], chunk_rows):
                rows = min(chunk_rows, member.shape[0] - start)
                chunk = readinto(f, np.empty((rows,) + member.shape[1:], member.dtype), member.path, member.key)
                if crc is not None:
                    crc = zlib.crc32(memoryview(chunk.reshape(-1)).cast("B"), crc)
                yield start, chunk
    except _ZIP_ERRORS as e:
        raise member.error("intact member data", f"{type(e).__name__}: {e}") from None
    if crc is not None and crc != member.crc:
        raise member.error(f"data matching the zip CRC-32 {member.crc:08x}",
                           f"CRC-32 {crc:08x} (bytes changed after the file was written)")


def _stored_header_crc(member: NpzMember) -> int:
    """CRC-32 of a STORED member's npy header (the bytes just before its array data)."""
    with open(member.path, "rb") as raw:
        raw.seek(member.data_offset - member.header_size)
        return zlib.crc32(read_exact(raw, member.header_size, member.path, member.key))


def check_index(index, n_rows: int) -> np.ndarray:
    """`index` as a 1-D int64 array of row numbers in [0, n_rows) (IndexError otherwise)."""
    index = np.asarray(index)
    if index.ndim != 1 or (index.size and index.dtype.kind not in "iu"):
        raise IndexError(f"expected a 1-D integer row index, got shape {index.shape} dtype {index.dtype}")
    index = index.astype(np.int64, copy=False)
    if index.size and (index.min() < 0 or index.max() >= n_rows):
        raise IndexError(f"row index out of range [0, {n_rows}): min {index.min()}, max {index.max()}")
    return index


def _pread_rows(member: NpzMember, rows: np.ndarray) -> np.ndarray:
    """STORED member rows `rows` (sorted, unique): one positioned read per run of consecutive rows."""
    out = np.empty((len(rows),) + member.shape[1:], member.dtype)
    run_starts = np.flatnonzero(np.diff(rows, prepend=-2) != 1)
    run_ends = np.append(run_starts[1:], len(rows))
    with open(member.path, "rb", buffering=0) as f:
        for lo, hi in zip(run_starts.tolist(), run_ends.tolist()):
            f.seek(member.data_offset + int(rows[lo]) * member.row_nbytes)
            readinto(f, out[lo:hi], member.path, member.key)
    return out


def read_rows(member: NpzMember, index, chunk_rows: int | None = None) -> np.ndarray:
    """rows[index] (any order, repeats allowed) with memory ~ len(index) rows (+ one chunk if compressed).

    STORED members: positioned reads of just those rows. (Not fancy indexing of a memory map: the kernel may map
    whole large page-cache folios, up to MBs, around every touched row, so RSS grows far past the subset; see
    benchmarks/results/load.md.) Compressed members are streamed once, in chunks of `chunk_rows` rows, keeping
    the requested ones and stopping after the last of them.
    """
    member.check_rows_readable()
    index = check_index(index, member.shape[0] if member.shape else 0)
    if not member.compressed and len(index):
        unique, inverse = np.unique(index, return_inverse=True)
        rows = _pread_rows(member, unique)
        return rows if len(unique) == len(index) and np.array_equal(unique, index) else rows[inverse]
    out = np.empty((len(index),) + member.shape[1:], member.dtype)
    if not len(index):
        return out
    order = np.argsort(index, kind="stable")
    wanted = index[order]
    chunks = iter_rows(member, chunk_rows or member.chunk_rows())
    for start, chunk in chunks:
        lo, hi = np.searchsorted(wanted, [start, start + len(chunk)])
        out[order[lo:hi]] = chunk[wanted[lo:hi] - start]
        if hi == len(wanted):
            chunks.close()
            break
    return out
