"""Leaks between splits by content: the same graph (node_opcode, edge_index, node_feat) under two file names.

`check_disjoint_splits` (pipeline.tpugraphs.dataset) compares file names; stage prune, which loads every graph
anyway, also compares digests of their content:
- a valid graph whose graph equals a train graph's gets a warning: with other runtimes, the same kernel or program
  measured again (a fused kernel shared by two models, as in the real tile collection); with the same runtimes too,
  a copied file, or such a kernel timed by a deterministic cost model (the same tile sizes, the same runtimes). Either
  way model selection scores one training example; refusing it would refuse a whole dataset that shares a kernel;
- a test graph identical to a train graph gets a warning (real test sets may repeat a training program; its labels
  are not known, so nothing leaks into the score).
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Iterable

import numpy as np

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


def check_content_leaks(graphs: Iterable[tuple[str, Path, str, str]]) -> list[str]:
    """Given (split, file, graph_digest, copy_digest) of every graph: return (and print on stderr) a warning for each
    valid or test graph with a train graph's content (see the module docstring)."""
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
        if split == "test":
            why = "its runtimes are unknown"
        elif copy in train_copies:
            why = (f"its {', '.join(LABEL_KEYS)} too: a copy, or a kernel shared by two programs and timed by a "
                   f"deterministic cost model; model selection scores a training example")
        else:
            why = "its runtimes differ: measured again"
        warnings.append(f"warning: {path}: {split} graph with {same} (allowed: {why})")
    for warning in warnings:
        print(warning, file=sys.stderr)
    return warnings
