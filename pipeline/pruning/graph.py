"""Prune one TpuGraphs file into a `PrunedGraph` folder (the per-graph work of stage `prune`).

Per graph: load and validate (`tpugraphs.load_graph`); keep the configurable nodes' k-hop subgraph (layout;
tile graphs stay whole); re-pad `node_feat` (and tile `config_feat`) with `pad_value`; de-duplicate the
configurations on the labelled splits, train and valid (test rows stay as they are, in order); compute the target
runtimes (layout: `config_runtime`; tile: `config_runtime / config_runtime_normalizers`; test: zeros, nothing
divides by test normalizers). Layout `node_config_feat` is streamed chunk by chunk straight into its `.npy`, so memory is one chunk
plus O(configs), whatever the file size.

`node_feat` is written provisionally equal to `node_feat_raw`; the stage overwrites it with the normalised
features once the normaliser is fitted on train (`write_normalized`). Both happen inside the stage's temporary
collection folder, so no reader ever sees the provisional file.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.files import atomic_path
from pipeline.pruning.dedup import Dedup, aggregate, dedup_chunks, identity_dedup, relative_spread
from pipeline.pruning.normalize import ColumnStats, Normalizer, signed_log
from pipeline.pruning.params import PruneParams
from pipeline.pruned import PrunedGraph, save_pruned_graph
from pipeline.pruning.repad import repad_config_feat, repad_node_feat
from pipeline.pruning.subgraph import khop_subgraph
from pipeline.tpugraphs.dataset import Collection, Graph, load_graph
from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.leaks import copy_digest, graph_digest
from pipeline.tpugraphs.npy import NpyStreamWriter
from pipeline.tpugraphs.schema import LABELLED_SPLITS

NODE_CONFIG_FEAT_FILE = "node_config_feat.npy"
STAGING_DIGEST_BYTES = 8    # the staged node_config_feat is named by a digest of the graph id, not by the id itself


def staging_path(folder: Path) -> Path:
    """Where a graph's node_config_feat is streamed before `folder` exists: a sibling of `folder` named by a digest
    of its name, so that its length is fixed (a graph id of up to 251 characters, the most a `<id>.npz` file
    name holds, stays a valid file name) and distinct per graph (workers prune the graphs of one split at once)."""
    digest = hashlib.blake2b(folder.name.encode(), digest_size=STAGING_DIGEST_BYTES).hexdigest()
    return folder.with_name(f".{digest}.{NODE_CONFIG_FEAT_FILE}")


@dataclass
class GraphResult:
    """One graph's index row, its train statistics, or the validation error that stopped it."""

    split: str
    graph_id: str
    source_file: str
    row: dict | None = None              # the pruned.INDEX_COLUMNS values
    stats: ColumnStats | None = None     # train only: statistics of signed_log(node_feat_raw)
    spread: np.ndarray | None = None     # train only: relative runtime spread of each group of identical configs
    error: TpuGraphsFormatError | None = None
    digest: str | None = None            # pipeline.tpugraphs.leaks.graph_digest of the loaded graph
    copy: str | None = None              # pipeline.tpugraphs.leaks.copy_digest (graph and runtimes)
    ranks: bool = False                  # train/valid: two kept configurations of different runtimes (a pair to order)


def target_runtime(graph: Graph) -> np.ndarray:
    """float64 [configs]: what configs are ranked by; zeros on test (never divided by test normalizers)."""
    if graph.split == "test":
        return np.zeros(graph.n_configs, dtype=np.float64)
    runtime = graph.config_runtime.astype(np.float64)
    if graph.collection.kind == "tile":
        return runtime / graph.config_runtime_normalizers.astype(np.float64)
    return runtime


def _stream_node_config_feat(graph: Graph, path: Path, chunk_size: int) -> Dedup:
    """Write the kept node_config_feat rows of `graph` to `path` in one streamed pass; returns the Dedup."""
    n_configs, shape = graph.n_configs, graph.node_config_feat_source.shape[1:]
    with NpyStreamWriter(path, shape, np.int8, max_rows=n_configs) as writer:
        chunks = graph.iter_node_config_feat(chunk_size)
        if graph.split in LABELLED_SPLITS:
            return dedup_chunks(chunks, n_configs, sink=writer.write)
        for _, chunk in chunks:
            writer.write(chunk)
        return identity_dedup(n_configs)


def prune_graph(graph: Graph, params: PruneParams,
                folder: Path) -> tuple[dict, ColumnStats | None, np.ndarray | None, bool]:
    """Prune `graph` into `folder` (a PrunedGraph folder); returns its index row, train statistics, on train the
    relative runtime spread of its groups of identical configurations (`dedup.relative_spread`), and whether a
    labelled graph keeps two configurations of different runtimes (a pair a model can be taught or scored on).

    Raises:
        TpuGraphsFormatError: a node_config_feat value outside {-1, 0..5} (found while streaming).
    """
    layout = graph.collection.kind == "layout"
    sub = khop_subgraph(graph.n_nodes, graph.edge_index, graph.node_config_ids if layout else None,
                        params.hops if layout else None)
    node_feat_raw = repad_node_feat(graph.node_feat[sub.node_ids], params.pad_value)   # [kept nodes, 140]
    runtime = target_runtime(graph)
    staged = staging_path(folder)
    config_feat = None
    try:
        if layout:
            dedup = _stream_node_config_feat(graph, staged, params.chunk_size)
        else:
            dedup = (dedup_chunks([(0, graph.config_feat)], graph.n_configs) if graph.split in LABELLED_SPLITS
                     else identity_dedup(graph.n_configs))
            config_feat = repad_config_feat(graph.config_feat[dedup.first], params.pad_value)   # [kept, 24]
        kept_runtime = (aggregate(runtime, dedup, params.dedup) if graph.split in LABELLED_SPLITS
                        else runtime[dedup.first])
        pruned = PrunedGraph(
            graph_id=graph.graph_id, split=graph.split, node_feat=node_feat_raw, node_feat_raw=node_feat_raw,
            node_opcode=graph.node_opcode[sub.node_ids].astype(np.int64), edge_index=sub.edge_index,
            node_ids=sub.node_ids, config_runtime=kept_runtime, config_count=dedup.count,
            config_inverse=dedup.inverse, node_config_ids=sub.node_config_ids if layout else None,
            config_feat=config_feat, node_splits=graph.node_splits)
        save_pruned_graph(pruned, folder)
        if layout:
            os.replace(staged, folder / NODE_CONFIG_FEAT_FILE)
    finally:
        staged.unlink(missing_ok=True)
    row = {"split": graph.split, "graph_id": graph.graph_id, "nodes": graph.n_nodes,
           "edges": len(graph.edge_index), "nodes_pruned": sub.n_nodes, "edges_pruned": sub.n_edges,
           "configs": graph.n_configs, "configs_dedup": dedup.n_kept}
    train = graph.split == "train"
    stats = ColumnStats.of(signed_log(node_feat_raw, params.log_mask)) if train else None
    ranks = graph.split in LABELLED_SPLITS and bool(np.ptp(kept_runtime) > 0)
    return row, stats, relative_spread(runtime, dedup) if train else None, ranks


def prune_file(path: Path, collection: Collection, split: str, source_file: str, params: PruneParams,
               split_dir: Path) -> GraphResult:
    """Load, validate and prune one file into `<split_dir>/<stem>/`; a format error is returned, not raised.

    Runs in worker processes: returns only small things (index row, statistics, error).
    """
    result = GraphResult(split=split, graph_id=Path(path).stem, source_file=source_file)
    folder = Path(split_dir) / result.graph_id
    try:
        graph = load_graph(path, collection, split)
        result.digest, result.copy = graph_digest(graph), copy_digest(graph)
        row, result.stats, result.spread, result.ranks = prune_graph(graph, params, folder)
        result.row = {**row, "source_file": source_file}
    except TpuGraphsFormatError as error:
        result.error = error
        shutil.rmtree(folder, ignore_errors=True)   # nothing half-written stays (atomic_path removed its temp)
    return result


def write_normalized(folder: Path, normalizer: Normalizer, source: str | Path) -> None:
    """Replace `<folder>/node_feat.npy` with the normalised `node_feat_raw.npy` (temp file + rename); a value that
    standardises past float32 raises TpuGraphsFormatError naming `source`, the graph's npz file."""
    node_feat = normalizer.apply(np.load(folder / "node_feat_raw.npy", allow_pickle=False), source)   # [nodes, kept]
    with atomic_path(folder / "node_feat.npy") as tmp, open(tmp, "wb") as f:
        np.save(f, node_feat, allow_pickle=False)
