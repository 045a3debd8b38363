"""Ranking data for LightGBM: one query per graph, its configurations sampled, labelled and chunked.

Train configurations (de-duplicated kept rows) are sampled per graph (`configs_per_graph`) and chunked into queries
of at most `lgbm.max_query_rows` rows (LightGBM refuses more than 10000). Relevance labels are runtime-quantile
grades within the graph: with q = (configs of the graph strictly faster) / (configs of the graph),
label = G - 1 - floor(q * G) for G = `label_grades`, so the fastest get G - 1, ties share a grade and each grade
holds about 1/G of the graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
from tqdm import tqdm

from pipeline.choices import LIGHTGBM_MAX_QUERY_ROWS
from pipeline.features.table import FeatureSpec, GraphFeaturizer
from pipeline.pruned import PrunedGraph

def relevance_labels(runtime: np.ndarray, grades: int) -> np.ndarray:
    """int32 [configs] runtime-quantile grades in 0..grades-1, fastest = grades-1 (see module docstring)."""
    runtime = np.asarray(runtime, dtype=np.float64)
    faster = np.searchsorted(np.sort(runtime), runtime, side="left")          # configs strictly faster
    return (grades - 1 - np.floor(faster * grades / max(len(runtime), 1))).astype(np.int32)


def sample_rows(n_rows: int, limit: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted row indices: all rows when limit <= 0 or n_rows <= limit, else `limit` drawn without replacement."""
    if limit <= 0 or n_rows <= limit:
        return np.arange(n_rows)
    return np.sort(rng.choice(n_rows, size=limit, replace=False))


def split_queries(rows: np.ndarray, max_query_rows: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle `rows` and cut them into the fewest near-equal queries of at most max_query_rows (each sorted)."""
    n_queries = -(-len(rows) // max_query_rows)
    return [np.sort(part) for part in np.array_split(rng.permutation(rows), n_queries)] if len(rows) else []


@dataclass
class RankData:
    """Rows of one split, contiguous per query and per graph."""

    features: np.ndarray     # [rows, features] float32
    label: np.ndarray        # [rows] int32 relevance grade
    group: list[int]         # query sizes in row order
    graph_offsets: np.ndarray  # [graphs + 1] row offsets of each graph
    runtime: np.ndarray      # [rows] float64 (tile: normalised)
    names: list[str]


def build_rank_data(graphs: Iterable[PrunedGraph], kind: str, spec: FeatureSpec, configs_per_graph: int,
                    label_grades: int, max_query_rows: int, rng: np.random.Generator, desc: str = "",
                    total: int | None = None) -> RankData:
    """Sample, label, chunk and featurise the configurations of every graph into one ranking data set."""
    features, labels, runtimes, group, offsets, names = [], [], [], [], [0], None
    for graph in tqdm(graphs, desc=desc, unit="graph", leave=False, total=total):
        featurizer = GraphFeaturizer(graph, kind, spec)
        if names is not None and featurizer.names != names:
            raise ValueError(f"graph {graph.graph_id!r}: feature columns differ from the collection's first graph")
        names = featurizer.names
        runtime = np.asarray(graph.config_runtime, dtype=np.float64)
        grade = relevance_labels(runtime, label_grades)
        queries = split_queries(sample_rows(graph.n_kept, configs_per_graph, rng), max_query_rows, rng)
        group += [len(q) for q in queries]
        rows = np.concatenate(queries) if queries else np.zeros(0, dtype=np.int64)
        features.append(featurizer.matrix(rows))
        labels.append(grade[rows])
        runtimes.append(runtime[rows])
        offsets.append(offsets[-1] + len(rows))
    if names is None:
        raise ValueError(f"{desc}: no graphs to build a ranking data set from")
    return RankData(np.concatenate(features), np.concatenate(labels), group, np.asarray(offsets),
                    np.concatenate(runtimes), names)
