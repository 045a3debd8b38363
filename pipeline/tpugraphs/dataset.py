"""The TpuGraphs data layer: collections, the npz/ folder tree, and validated `Graph`s loaded from official files.

Reads the official files unchanged (docs/tpugraphs-format.md). Loading never unpickles, casts the
integer dtypes the real files use (uint8 / int32 / int64) to int64, flattens `node_splits` from (1, S), and
validates every key. A layout file's `node_config_feat` ([configs, nodes, 18] float32, over 7 GB on real graphs)
is never read whole: it stays on disk and is read by configuration index, its values checked as they are read.
Every problem raises `TpuGraphsFormatError` naming the file, the key, what was expected and what was found.
"""
from __future__ import annotations

import os
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.npz import NpzMember, check_index, iter_rows, list_members, read_array, read_rows
from pipeline.tpugraphs.schema import (COLLECTION_NAMES, KAGGLE_SUBDIR, LAYOUT_VALUE_MAX, NPZ_SUBDIR, LAYOUT_VALUE_MIN, SPLITS,
                                      check_arrays, required_keys)

__all__ = ["Collection", "COLLECTIONS", "npz_root", "graph_paths", "check_file_name", "check_disjoint_splits", "Graph", "load_graph",
           "validate_node_config_feat"]   # dataset facts (SPLITS, dimensions ...): pipeline.tpugraphs.schema

GRAPH_SUFFIX = ".npz"                            # a split folder's graph files; other entries are named, left out
IGNORED_SHOWN = 10                              # left-out entries named in the warning
CONFIG_CHUNK_BYTES = 16 << 20                   # stored bytes of node_config_feat checked per step (temporaries ~4x)


def shown_names(names: Sequence[str]) -> str:
    """The first IGNORED_SHOWN of `names`, comma-separated, with ", ..." when there are more."""
    return ", ".join(names[:IGNORED_SHOWN]) + (", ..." if len(names) > IGNORED_SHOWN else "")


def warn_left_out(folder: str | os.PathLike, names: Sequence[str], what: str) -> None:
    """One stderr warning line naming the `what` ("entries", "files") of `folder` that are not graph files and are
    left out (none: nothing printed): never silently dropped."""
    if names:
        print(f"warning: {folder}: left out {len(names)} {what} that are not *{GRAPH_SUFFIX} graph files: "
              f"{shown_names(names)}", file=sys.stderr)


@dataclass(frozen=True)
class Collection:
    """One of the five TpuGraphs collections, e.g. `layout:xla:random` (slug `layout-xla-random`)."""

    name: str
    kind: str                 # "tile" | "layout"
    source: str               # "xla" | "nlp"
    search: str | None        # "random" | "default" (layout), None (tile)

    @property
    def slug(self) -> str:
        return self.name.replace(":", "-")

    @property
    def subdir(self) -> Path:
        """Folder under npz/, e.g. layout/xla/random."""
        return Path(*self.name.split(":"))

    @property
    def sibling(self) -> "Collection | None":
        """The layout collection of the other source and the same search (xla <-> nlp); None for tile."""
        if self.kind != "layout":
            return None
        other = "nlp" if self.source == "xla" else "xla"
        return Collection.parse(f"{self.kind}:{other}:{self.search}")

    @staticmethod
    def parse(name_or_slug: "str | Collection") -> "Collection":
        if isinstance(name_or_slug, Collection):
            return name_or_slug
        for collection in COLLECTIONS:
            if name_or_slug in (collection.name, collection.slug):
                return collection
        raise ValueError(f"unknown collection {name_or_slug!r}: expected one of "
                         f"{[c.name for c in COLLECTIONS]} or {[c.slug for c in COLLECTIONS]}")


COLLECTIONS = tuple(Collection(name, *(name.split(":") + [None])[:3]) for name in COLLECTION_NAMES)   # kind:source[:search]


def npz_root(root: str | os.PathLike | None) -> Path:
    """The folder holding tile/ and layout/, from the folder holding npz/, npz/ itself, or above Kaggle's npz_all/."""
    if root is None:
        raise TpuGraphsFormatError("data.root", None, "a path to the TpuGraphs download", "null")
    root = Path(root).expanduser()
    for candidate in (root, root / NPZ_SUBDIR, root / KAGGLE_SUBDIR / NPZ_SUBDIR):
        if (candidate / "tile").is_dir() or (candidate / "layout").is_dir():
            return candidate
    found = sorted(p.name for p in root.iterdir()) if root.is_dir() else \
        "a file, not a folder" if root.exists() else "no such folder"
    raise TpuGraphsFormatError(root, None, "a folder holding npz/ (or npz/ itself, or npz_all/npz/) with tile/ "
                                           "or layout/ inside", f"{found}")


def graph_paths(root: str | os.PathLike, collection: str | Collection, split: str) -> list[Path]:
    """The sorted *.npz files of one collection and split under the dataset root; any other entry of the folder is
    named in one warning line on stderr (left out, never silently)."""
    collection = Collection.parse(collection)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {SPLITS}")
    folder = npz_root(root) / collection.subdir / split
    if not folder.is_dir():
        raise TpuGraphsFormatError(folder, None, f"the folder of {collection.name} {split} graphs", "no such folder")
    paths = sorted(folder.glob(f"*{GRAPH_SUFFIX}"))
    others = sorted(p.name for p in set(folder.iterdir()) - set(paths))
    if not paths:
        raise TpuGraphsFormatError(folder, None, f"at least one {collection.name} {split} graph (*{GRAPH_SUFFIX})",
                                   f"only {shown_names(others)}" if others else "an empty folder")
    warn_left_out(folder, others, "entries")
    for path in paths:
        check_file_name(path)
        if not path.is_file():
            target = os.readlink(path) if path.is_symlink() else "not a regular file"
            raise TpuGraphsFormatError(path, None, "a readable npz file", f"a dangling link to {target}"
                                       if path.is_symlink() else target)
    return paths


def check_file_name(path: Path) -> Path:
    """`path` when its file name is UTF-8 text (graph ids become CSV cells and wandb keys); else a
    TpuGraphsFormatError naming the folder and the name's bytes."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        raise TpuGraphsFormatError(path.parent, None, "graph file names in UTF-8",
                                   f"the name {os.fsencode(path.name)!r}") from None
    return path


def check_disjoint_splits(root: str | os.PathLike, collection: str | Collection) -> dict[str, list[Path]]:
    """The graph files of every split; raises TpuGraphsFormatError when one graph id (file stem) is in two splits
    (a train graph in valid or test would leak its labels into model selection or the test score)."""
    collection = Collection.parse(collection)
    paths = {split: graph_paths(root, collection, split) for split in SPLITS}
    seen: dict[str, str] = {}
    for split, files in paths.items():
        for path in files:
            if path.stem in seen:
                raise TpuGraphsFormatError(path, None, f"graph ids unique across splits of {collection.name}",
                                           f"'{path.stem}' in both {seen[path.stem]} and {split}")
            seen[path.stem] = split
    return paths


@dataclass(eq=False)
class Graph:
    """One validated TpuGraphs file. Arrays are named as in the npz; integer arrays are int64.

    `node_config_feat` is not an attribute: read configurations with `read_node_config_feat(index)` or
    `iter_node_config_feat(chunk_size)`, which return int8 values in {-1, 0..5}.
    """

    path: Path
    collection: Collection
    split: str
    graph_id: str                                    # file stem
    node_feat: np.ndarray                            # [nodes, 140] float32
    node_opcode: np.ndarray                          # [nodes] int64, 0..120
    edge_index: np.ndarray                           # [edges, 2] int64, row = (consumer, producer)
    config_runtime: np.ndarray                       # [configs] int64 ns (float64 if stored real); zeros on test
    config_runtime_normalizers: np.ndarray | None = None   # [configs] as config_runtime (tile); absent/zero on test
    config_feat: np.ndarray | None = None            # [configs, 24] float32 (tile)
    node_config_ids: np.ndarray | None = None        # [config nodes] int64 (layout)
    node_splits: np.ndarray | None = None            # [segments] int64, first node of each HLO computation
    node_config_feat_source: NpzMember | np.ndarray | None = field(default=None, repr=False)  # layout

    @property
    def n_nodes(self) -> int:
        return len(self.node_opcode)

    @property
    def n_configs(self) -> int:
        return len(self.config_runtime)

    def _source(self) -> NpzMember | np.ndarray:
        if self.node_config_feat_source is None:
            raise ValueError(f"{self.path}: a {self.collection.kind} graph has no node_config_feat")
        return self.node_config_feat_source

    def read_node_config_feat(self, index=None) -> np.ndarray:
        """Configurations `index` (any order, repeats allowed; None = all) as int8 [len(index), NC, 18].

        Memory is proportional to len(index) (memory map or one streamed pass), never to the whole member.
        Raises TpuGraphsFormatError on a value outside {-1, 0..5}; IndexError on an index outside [0, C).
        """
        source = self._source()
        if index is None:
            out = np.empty(source.shape, np.int8)    # [configs, config nodes, 18]
            for start, chunk in self.iter_node_config_feat(self._chunk_rows()):
                out[start:start + len(chunk)] = chunk
            return out
        index = check_index(index, self.n_configs)
        if isinstance(source, np.ndarray):
            return _layout_values(source[index], index, self.path)
        if source.compressed:                         # one streamed pass over the member
            return _layout_values(read_rows(source, index), index, self.path)
        out = np.empty((len(index),) + source.shape[1:], np.int8)
        step = self._chunk_rows()
        for lo in range(0, len(index), step):       # memory map, a block of configs at a time
            block = index[lo:lo + step]
            out[lo:lo + len(block)] = _layout_values(read_rows(source, block), block, self.path)
        return out

    def iter_node_config_feat(self, chunk_size: int) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (first config, int8 [chunk, NC, 18]) over all configurations in order; memory ~ one chunk."""
        source = self._source()
        if isinstance(source, np.ndarray):
            chunks = ((s, source[s:s + chunk_size]) for s in range(0, len(source), chunk_size))
        else:
            chunks = iter_rows(source, chunk_size)
        for start, chunk in chunks:
            yield start, _layout_values(chunk, np.arange(start, start + len(chunk)), self.path)

    def _chunk_rows(self) -> int:
        source = self._source()
        row_bytes = int(np.prod(source.shape[1:])) * source.dtype.itemsize
        return max(1, CONFIG_CHUNK_BYTES // max(1, row_bytes))


def _layout_values(values: np.ndarray, rows: np.ndarray, path: Path) -> np.ndarray:
    """node_config_feat values (for config `rows`) as int8, checked to be integers in {-1, 0..5}."""
    if values.dtype.kind not in "fiu":
        raise TpuGraphsFormatError(path, "node_config_feat", "a real or integer dtype", str(values.dtype))
    ok = (values >= LAYOUT_VALUE_MIN) & (values <= LAYOUT_VALUE_MAX)
    if values.dtype.kind == "f":
        ok &= values == np.trunc(values)              # NaN fails every comparison
    if not ok.all():
        config, node, dim = np.argwhere(~ok)[0]
        raise TpuGraphsFormatError(path, "node_config_feat", f"integers in {{-1, 0..{LAYOUT_VALUE_MAX}}}",
                                   f"{values[config, node, dim]!r} at [config {rows[config]}, node {node}, "
                                   f"dim {dim}] ({int((~ok).sum())} bad values in this chunk)")
    return values.astype(np.int8)


def validate_node_config_feat(graph: Graph, chunk_size: int | None = None) -> None:
    """Check every node_config_feat value of a layout graph (no-op for tile graphs), streaming `chunk_size`
    configs at a time (None: about CONFIG_CHUNK_BYTES of stored values per chunk)."""
    if graph.node_config_feat_source is None:
        return
    for _ in graph.iter_node_config_feat(chunk_size or graph._chunk_rows()):
        pass


def load_graph(path: str | os.PathLike, collection: str | Collection, split: str) -> Graph:
    """Load and validate one official npz (all keys; node_config_feat values are checked when read).

    Keys outside the schema of the collection's kind are not read (the schema's keys all are).

    Raises:
        TpuGraphsFormatError: anything not per the format (missing key, shape, dtype, range, corrupt file).
    """
    path, collection = Path(path), Collection.parse(collection)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {SPLITS}")
    members = list_members(path)
    required, optional = required_keys(collection.kind, split)
    missing = [k for k in required if k not in members]
    if missing:
        raise TpuGraphsFormatError(path, missing[0], f"keys {list(required)} for a {collection.kind} {split} file",
                                   f"keys {sorted(members)}")
    with zipfile.ZipFile(path) as zf:
        arrays = {k: read_array(members[k], zf) for k in required + optional
                  if k in members and k != "node_config_feat"}
    config_source = members.get("node_config_feat") if collection.kind == "layout" else None
    arrays = check_arrays(path, collection.kind, split, arrays, config_source)
    return Graph(path=path, collection=collection, split=split, graph_id=path.stem,
                 node_config_feat_source=config_source, **arrays)
