"""The pruned-graph contract: what `prune` writes and every model stage reads.

Per collection `<pruned_dir>/<collection slug>/` holds
- `index.csv`: one row per graph (columns `INDEX_COLUMNS`), sorted by split then graph_id;
- `normalizer.json`: the node-feature normalisation fitted on train (see pipeline.prune);
- `<split>/<graph_id>/<array>.npy`: the arrays of `PrunedGraph`, memory-mappable;
- `report.json`: totals, the settings prune ran with (`pipeline.settings.prune` resolves `prune.hops` per
  collection) and the relative runtime spread of identical train configurations (`spread_summary`;
  `spread_quantile` reads it).

Config rows: on train and valid, duplicate configurations are collapsed (`config_count` says how many original
rows each kept row stands for); on test nothing is dropped or reordered. `config_inverse[j]` is the kept row of
original config j, so `scores_original = scores_kept[config_inverse]` gives one score per original index.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from pipeline.choices import PRUNE_WHOLE_GRAPH
from pipeline.errors import PipelineError, shortened
from pipeline.files import atomic_path, is_number, read_csv, read_json, write_csv

TEXT_COLUMNS = ("split", "graph_id", "source_file")   # read verbatim: a graph id may be `NA` or `None`
INDEX_COLUMNS = ["split", "graph_id", "source_file", "nodes", "edges", "nodes_pruned", "edges_pruned",
                 "configs", "configs_dedup"]
COUNT_COLUMNS = tuple(INDEX_COLUMNS[3:])   # nodes/edges before and after pruning, configs before and after dedup
INDEX_FILE = "index.csv"
REPORT_FILE = "report.json"
NORMALIZER_FILE = "normalizer.json"
WHOLE_GRAPH = PRUNE_WHOLE_GRAPH   # prune.hops value that keeps every node (what GST trains on)
SPREAD_PERCENTILES = np.arange(101)   # report.json: the percentile table of the duplicate-runtime spread
OPTIONAL_ARRAYS = ("node_config_ids", "node_config_feat", "config_feat", "node_splits")


@dataclass
class PrunedGraph:
    """One pruned graph. Node indices in edge_index / node_config_ids refer to the kept nodes."""

    graph_id: str
    split: str
    node_feat: np.ndarray          # [nodes, features] float32, -1 re-padded, normalised (train statistics)
    node_feat_raw: np.ndarray      # [nodes, 140] float32, -1 re-padded, not normalised (for tabular features)
    node_opcode: np.ndarray        # [nodes] int64, opcode ids 0..120
    edge_index: np.ndarray         # [edges, 2] int64, row = (consumer, producer)
    node_ids: np.ndarray           # [nodes] int64, original node id of each kept node
    config_runtime: np.ndarray     # [kept configs] float64; layout: runtime, tile: runtime / normalizer; 0 on test
    config_count: np.ndarray       # [kept configs] int64, original rows merged into each kept row
    config_inverse: np.ndarray     # [configs] int64, kept row of each original config index
    node_config_ids: np.ndarray | None = None   # [configurable nodes] int64 (layout)
    node_config_feat: np.ndarray | None = None  # [kept configs, configurable nodes, 18] int8, values -1..5 (layout)
    config_feat: np.ndarray | None = None       # [kept configs, 24] float32 (tile)
    node_splits: np.ndarray | None = None       # [segments] int64, original node ids starting HLO computations

    @property
    def n_configs(self) -> int:
        """Configurations in the original file."""
        return len(self.config_inverse)

    @property
    def n_kept(self) -> int:
        """Configuration rows kept after de-duplication."""
        return len(self.config_runtime)

    @property
    def n_nodes(self) -> int:
        return len(self.node_opcode)


def collection_dir(pruned_dir: str | Path, collection_slug: str) -> Path:
    return Path(pruned_dir) / collection_slug


def graph_dir(pruned_dir: str | Path, collection_slug: str, split: str, graph_id: str) -> Path:
    return collection_dir(pruned_dir, collection_slug) / split / graph_id


def save_pruned_graph(graph: PrunedGraph, folder: str | Path) -> None:
    """Write every array of `graph` as `<folder>/<name>.npy` (written to a temp folder, then renamed)."""
    with atomic_path(folder) as tmp:
        tmp.mkdir()
        for f in fields(graph):
            value = getattr(graph, f.name)
            if isinstance(value, np.ndarray):
                np.save(tmp / f"{f.name}.npy", value)


def load_pruned_graph(folder: str | Path, mmap: bool = True) -> PrunedGraph:
    """Read a graph written by `save_pruned_graph`; arrays are memory-mapped unless mmap=False."""
    folder = Path(folder)
    mode = "r" if mmap else None
    arrays = {}
    for f in fields(PrunedGraph):
        path = folder / f"{f.name}.npy"
        if f.name in ("graph_id", "split"):
            continue
        if path.exists():
            arrays[f.name] = np.load(path, mmap_mode=mode, allow_pickle=False)
        elif f.name not in OPTIONAL_ARRAYS:
            raise FileNotFoundError(f"{path}: pruned graph array {f.name!r} missing (re-run the prune stage)")
    return PrunedGraph(graph_id=folder.name, split=folder.parent.name, **arrays)


def write_index(rows: list[dict], path: str | Path) -> pd.DataFrame:
    """Write the per-collection index table atomically; rows need every column of INDEX_COLUMNS."""
    table = pd.DataFrame(rows, columns=INDEX_COLUMNS).sort_values(["split", "graph_id"], kind="stable")
    write_csv(table, path)
    return table.reset_index(drop=True)


def read_index(pruned_dir: str | Path, collection_slug: str) -> pd.DataFrame:
    """The index table of one pruned collection."""
    path = collection_dir(pruned_dir, collection_slug) / INDEX_FILE
    table = read_csv(path, TEXT_COLUMNS)
    missing = set(INDEX_COLUMNS) - set(table.columns)
    if missing:
        raise PipelineError(f"{path}: columns {sorted(missing)} missing; expected {INDEX_COLUMNS}; re-run the prune "
                            f"stage")
    return table


def header_configs(members: dict) -> int | None:
    """The configuration count of a graph from its npz members' headers (`list_members`): config_runtime's length,
    else (a test file may leave its hidden runtimes out) that of config_feat or node_config_feat, as the loader
    counts them; None when no member says."""
    for key in ("config_runtime", "config_feat", "node_config_feat"):
        member = members.get(key)
        if member is not None and member.shape:
            return int(member.shape[0])
    return None


def skipped_graphs(report: Path) -> set[tuple[str, str]]:
    """(split, graph_id) of every train graph prune's `report.json` lists as skipped; PipelineError naming the file
    when it is not valid JSON or its `skipped` is not such a list."""
    entries = read_json(report).get("skipped", [])
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("split"), str) and isinstance(e.get("graph_id"), str)
            for e in entries):
        raise PipelineError(f"{report}: expected `skipped` to list objects with a split and a graph_id (re-run stage "
                            f"prune), found {entries!r:.60}")
    return {(e["split"], e["graph_id"]) for e in entries}


def check_pruned_from(pruned_dir: str | Path, collection, data_root: str | Path) -> None:
    """PipelineError unless the pruned collection holds the graphs of `data_root`, split by split (ids, and
    configuration counts from the npz headers; train graphs prune skipped aside): a model stage run by hand after
    data.root changed, prune not re-run, trained on the old graphs, wrote its model and predictions, then died in a
    ValueError traceback scoring them against the new truth."""
    from pipeline.errors import PipelineError, clipped
    from pipeline.tpugraphs.dataset import graph_paths, npz_root
    from pipeline.tpugraphs.npz import list_members

    folder = collection_dir(pruned_dir, collection.slug)
    index = read_index(pruned_dir, collection.slug)
    report = folder / REPORT_FILE
    skipped = skipped_graphs(report) if report.is_file() else set()
    for split in ("train", "valid", "test"):
        rows = index[index["split"] == split]
        pruned = dict(zip(rows["graph_id"], rows["configs"].astype(int)))
        there = [p for p in graph_paths(npz_root(data_root), collection, split) if (split, p.stem) not in skipped]
        ids = {p.stem for p in there}
        gone, new = sorted(set(pruned) - ids), sorted(ids - set(pruned))
        problems = ([f"{len(gone)} pruned graph(s) not there ({clipped(str(gone), 60)})"] if gone else []) + \
                   ([f"{len(new)} graph(s) there not pruned ({clipped(str(new), 60)})"] if new else [])
        if not problems:
            for path in there:
                configs = header_configs(list_members(path))
                if configs != pruned[path.stem]:
                    problems.append(f"{path.name} has {configs} configurations, its pruned graph {pruned[path.stem]}")
                    break
        if problems:
            raise PipelineError(f"{folder}: expected the graphs of data.root {data_root} ({split}); found "
                                f"{'; '.join(problems)}: pruned from other data, re-run `python -m pipeline.prune "
                                f"--collection {collection.slug}` (or `dvc repro`)")


def iter_split(pruned_dir: str | Path, collection_slug: str, split: str, mmap: bool = True):
    """Yield the PrunedGraph of every graph of one split, in index order."""
    table = read_index(pruned_dir, collection_slug)
    for graph_id in table.loc[table["split"] == split, "graph_id"]:
        yield load_pruned_graph(graph_dir(pruned_dir, collection_slug, split, graph_id), mmap=mmap)


def spread_summary(spreads: Iterable[np.ndarray]) -> dict:
    """The duplicate-runtime spread of a split, pooled over its graphs: {"groups": number of groups of identical
    configurations, "percentiles": the spread at SPREAD_PERCENTILES (0..100), or None without any group}."""
    pooled = np.concatenate([np.asarray(s, dtype=np.float64) for s in spreads] or [np.zeros(0)])
    table = np.percentile(pooled, SPREAD_PERCENTILES).tolist() if len(pooled) else None
    return {"groups": int(len(pooled)), "percentiles": table}


def spread_quantile(summary: dict, quantile: float, where: str) -> float | None:
    """The spread at `quantile` (0..1, linear between the table's percentiles); None when no group was found.

    Raises PipelineError naming `where` when the summary is not a `spread_summary` (a spread is a relative runtime
    difference: a number >= 0, the percentiles non-decreasing)."""
    table = summary.get("percentiles", "missing") if isinstance(summary, dict) else "missing"
    if table is None:
        return None
    expected = (f"{where}: duplicate_spread.percentiles must list {len(SPREAD_PERCENTILES)} numbers >= 0, "
                f"non-decreasing (re-run stage prune), found")
    if not isinstance(table, list) or len(table) != len(SPREAD_PERCENTILES):
        raise PipelineError(f"{expected} {shortened(table)}")
    bad = [i for i, v in enumerate(table) if not is_number(v, low=0) or (i and is_number(table[i - 1]) and
                                                                         v < table[i - 1])]
    if bad:
        raise PipelineError(f"{expected} {shortened(table[bad[0]])} at index {bad[0]}")
    groups = summary.get("groups")
    if type(groups) is not int or groups < 1:
        raise PipelineError(f"{where}: duplicate_spread.groups must count the groups measured (an integer >= 1; "
                            f"re-run stage prune), found {shortened(groups)}")
    return float(np.interp(100.0 * quantile, SPREAD_PERCENTILES, [float(v) for v in table]))
