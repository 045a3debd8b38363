"""Writing the synthetic dataset: official npz files, hidden test truth, stats.json, file stems.

Layout: `<out>/npz/{tile/xla,layout/{xla,nlp}/{random,default}}/{train,valid,test}/<stem>.npz`,
`<out>/truth/<collection slug>/<stem>.npz` (test runtimes), `<out>/stats.json`.
dtypes follow the official extractor: node_opcode uint8; edge_index, node_config_ids, node_splits (shaped
(1, S)) int64; config_runtime and config_runtime_normalizers int64; every float array float32.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from pipeline.files import write_json
from pipeline.tpugraphs.npz import NpzWriter



def hex_stem(rng: np.random.Generator, digits: int) -> str:
    """`digits` lowercase hex characters drawn from rng (test stems use 32, tile hashes 16)."""
    return "".join(f"{int(v):x}" for v in rng.integers(16, size=digits))


def to_runtime_ns(runtime: np.ndarray) -> np.ndarray:
    """float ns -> int64 ns, at least 1 (the extractor drops runs of <= 1 ns)."""
    return np.maximum(np.rint(runtime), 2).astype(np.int64)


def write_graph_arrays(npz: NpzWriter, node_feat: np.ndarray, node_opcode: np.ndarray,
                       edge_index: np.ndarray) -> None:
    npz.write("node_feat", np.asarray(node_feat, dtype=np.float32))
    npz.write("node_opcode", np.asarray(node_opcode, dtype=np.uint8))
    npz.write("edge_index", np.asarray(edge_index, dtype=np.int64))


def write_layout_file(path: Path, graph_arrays: dict, node_config_ids: np.ndarray, node_splits: np.ndarray,
                      n_configs: int, config_chunks: Iterable[np.ndarray], runtimes: list,
                      test: bool) -> np.ndarray:
    """Write one layout npz, streaming node_config_feat from `config_chunks` ([rows, NC, 18] each).

    The chunk iterator appends each chunk's float runtimes to `runtimes`; returns the int64 [C] runtimes
    (the file holds zeros instead when `test`).
    """
    with NpzWriter(path) as npz:
        write_graph_arrays(npz, **graph_arrays)
        npz.write("node_config_ids", np.asarray(node_config_ids, dtype=np.int64))
        npz.write("node_splits", np.asarray(node_splits, dtype=np.int64).reshape(1, -1))   # [1, S]
        npz.write_chunks("node_config_feat", (n_configs, len(node_config_ids), 18), np.float32, config_chunks)
        runtime = to_runtime_ns(np.concatenate(runtimes)) if runtimes else np.zeros(0, dtype=np.int64)
        npz.write("config_runtime", np.zeros_like(runtime) if test else runtime)
    return runtime


def write_tile_file(path: Path, graph_arrays: dict, config_feat: np.ndarray, runtime: np.ndarray,
                    normalizers: np.ndarray, test: bool) -> None:
    with NpzWriter(path) as npz:
        write_graph_arrays(npz, **graph_arrays)
        npz.write("config_feat", np.asarray(config_feat, dtype=np.float32))
        npz.write("config_runtime", np.zeros_like(runtime) if test else runtime)
        npz.write("config_runtime_normalizers", np.zeros_like(normalizers) if test else normalizers)


def write_truth(path: Path, runtime: np.ndarray, normalizers: np.ndarray | None = None) -> None:
    """Hidden test labels: config_runtime (and, for tile, config_runtime_normalizers)."""
    with NpzWriter(path) as npz:
        npz.write("config_runtime", runtime)
        if normalizers is not None:
            npz.write("config_runtime_normalizers", normalizers)


def write_stats(path: Path, stats: dict) -> None:
    """stats.json of the dataset (sizes and ceilings per collection and split), written atomically."""
    write_json(stats, path)
