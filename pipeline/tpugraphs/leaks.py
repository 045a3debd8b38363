"""Leaks between splits by content: the same graph (node_opcode, edge_index, node_feat) under two file names.

`check_disjoint_splits` (pipeline.tpugraphs.dataset) compares file names; stage prune, which loads every graph
anyway, also compares `graph_digest`s: a valid graph identical to a train graph is refused (it would score model
selection on a training example), a test graph identical to a train graph gets a warning (real test sets may
repeat a training program; its labels are not known, so nothing leaks into the score).
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Iterable

import numpy as np

from pipeline.tpugraphs.errors import TpuGraphsFormatError

DIGEST_BYTES = 16
CONTENT_KEYS = ("node_opcode", "edge_index", "node_feat")


def graph_digest(graph) -> str:
    """Hex digest of a loaded Graph's CONTENT_KEYS (dtype, shape and bytes of each)."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for key in CONTENT_KEYS:
        array = np.ascontiguousarray(getattr(graph, key))
        h.update(f"{key}:{array.dtype.str}:{array.shape};".encode())
        h.update(memoryview(array.reshape(-1)).cast("B"))
    return h.hexdigest()


def check_content_leaks(graphs: Iterable[tuple[str, Path, str]], collection_name: str) -> list[str]:
    """Given (split, file, digest) of every graph: raise TpuGraphsFormatError for a valid graph whose content is a
    train graph's; return (and print on stderr) a warning for each test graph whose content is a train graph's."""
    graphs = list(graphs)
    train = {}
    for split, path, digest in graphs:
        if split == "train":
            train.setdefault(digest, path)
    warnings = []
    for split, path, digest in graphs:
        if split == "train" or digest not in train:
            continue
        same = f"the {', '.join(CONTENT_KEYS)} of train graph {train[digest]}"
        if split == "valid":
            raise TpuGraphsFormatError(path, None, f"valid graphs of {collection_name} that differ from every train "
                                                   f"graph (a copy leaks a training example into model selection)",
                                       same)
        warnings.append(f"warning: {path}: test graph with {same} (allowed: its runtimes are unknown)")
    for warning in warnings:
        print(warning, file=sys.stderr)
    return warnings
