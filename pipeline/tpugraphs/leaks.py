"""Leaks between splits by content: the same graph (node_opcode, edge_index, node_feat) under two file names.

`check_disjoint_splits` (pipeline.tpugraphs.dataset) compares file names; stage prune, which loads every graph
anyway, also compares digests of their content:
- a valid graph that is a copy of a train graph (the same graph and the same `config_runtime`) is refused: it
  would score model selection on a training example;
- a valid graph whose graph alone equals a train graph's (other runtimes: the same kernel or program measured again,
  as a fused kernel shared by two models is in the real tile collection) gets a warning;
- a test graph identical to a train graph gets a warning (real test sets may repeat a training program; its labels
  are not known, so nothing leaks into the score).
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
LABEL_KEYS = ("config_runtime",)       # what a copied file repeats and a program measured again does not


def graph_digest(graph, keys: tuple[str, ...] = CONTENT_KEYS) -> str:
    """Hex digest of a loaded Graph's `keys` (dtype, shape and bytes of each)."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for key in keys:
        array = np.ascontiguousarray(getattr(graph, key))
        h.update(f"{key}:{array.dtype.str}:{array.shape};".encode())
        h.update(memoryview(array.reshape(-1)).cast("B"))
    return h.hexdigest()


def copy_digest(graph) -> str:
    """Hex digest of the graph and its runtimes (CONTENT_KEYS + LABEL_KEYS): equal for a copied file."""
    return graph_digest(graph, CONTENT_KEYS + LABEL_KEYS)


def check_content_leaks(graphs: Iterable[tuple[str, Path, str, str]], collection_name: str) -> list[str]:
    """Given (split, file, graph_digest, copy_digest) of every graph: raise TpuGraphsFormatError for a valid graph
    that is a copy of a train graph; return (and print on stderr) a warning for each valid graph with a train graph's
    content but other runtimes and for each test graph with a train graph's content."""
    graphs = list(graphs)
    train, train_copies = {}, {}
    for split, path, digest, copy in graphs:
        if split == "train":
            train.setdefault(digest, path)
            train_copies.setdefault(copy, path)
    warnings = []
    for split, path, digest, copy in graphs:
        if split == "train" or digest not in train:
            continue
        same = f"the {', '.join(CONTENT_KEYS)} of train graph {train[digest]}"
        if split == "valid" and copy in train_copies:
            raise TpuGraphsFormatError(path, None, f"valid graphs of {collection_name} that differ from every train "
                                                   f"graph (a copy leaks a training example into model selection)",
                                       f"{same} and its {', '.join(LABEL_KEYS)}")
        why = "its runtimes differ: measured again" if split == "valid" else "its runtimes are unknown"
        warnings.append(f"warning: {path}: {split} graph with {same} (allowed: {why})")
    for warning in warnings:
        print(warning, file=sys.stderr)
    return warnings
