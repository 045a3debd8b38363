"""The guard's evidence from sibling collections: the valid graphs of every other layout collection of the same
source, pruned as the model's own collection prunes (its saved hops, padding, dedup and train-fitted normaliser).

A `random` collection's valid configurations lie far from the compiler default (on the built-in data the nearest
is ~100 blocks away), so its own split cannot say how wrong its models are for the few-block changes a search
makes first; the `default` collection of the same programs samples exactly that region, with measured runtimes.
Both are the user's data (`data.collections`); nothing here reads a cost model or a built-in program.
"""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from omegaconf import DictConfig

from pipeline.pruned import NORMALIZER_FILE, REPORT_FILE, PrunedGraph, collection_dir, load_pruned_graph
from pipeline.pruning.graph import prune_file, write_normalized
from pipeline.pruning.normalize import Normalizer
from pipeline.settings.prune import prune_settings
from pipeline.tpugraphs.dataset import Collection, graph_paths
from pipeline.trained import PredictError, saved_prune_params

SPLIT = "valid"


def siblings(cfg: DictConfig, collection: Collection) -> list[Collection]:
    """The other layout collections of `collection`'s source among data.collections (none for tile)."""
    if collection.kind != "layout":
        return []
    found = (Collection.parse(c) for c in cfg.data.collections)
    return [c for c in found if c.kind == "layout" and c.source == collection.source and c.slug != collection.slug]


def sibling_valid_graphs(cfg: DictConfig, collection: Collection) -> list[PrunedGraph]:
    """Every sibling's valid graph pruned for `collection` (one-line PredictError when its prune is missing)."""
    saved = collection_dir(cfg.paths.pruned_dir, collection.slug)
    report, normalizer = saved / REPORT_FILE, saved / NORMALIZER_FILE
    for needed in (report, normalizer):
        if not needed.is_file():
            raise PredictError(f"{needed}: missing; run stage prune@{collection.slug} first (dvc repro)")
    params = prune_settings(cfg, collection, saved_prune_params(report, collection))
    norm = Normalizer.load(normalizer)
    graphs = []
    with tempfile.TemporaryDirectory(prefix="autotune-evidence-") as work:
        for sibling in siblings(cfg, collection):
            out = Path(work) / sibling.slug
            out.mkdir()
            for path in graph_paths(cfg.data.root, sibling, SPLIT):
                result = prune_file(path, collection, SPLIT, str(path), params, out)
                if result.error is not None:
                    raise result.error
                write_normalized(out / result.graph_id, norm, path)
                graph = load_pruned_graph(out / result.graph_id, mmap=False)
                graphs.append(dataclasses.replace(graph, graph_id=f"{sibling.slug}/{graph.graph_id}"))   # own key
    return graphs
