"""The LightGBM ranker's one inference entry point: load a booster and score the configurations of pruned graphs.

Scores are minus the predicted relevance (lower = faster), expanded to every original config through
`config_inverse`. Stage `lgbm`, command `predict` and any tool built on the model score through `predict_graph`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
from tqdm import tqdm

from pipeline.config import first_line
from pipeline.errors import PipelineError
from pipeline.features.table import FeatureSpec, GraphFeaturizer
from pipeline.predictions import Predictions
from pipeline.pruned import PrunedGraph

MODEL_FILE = "model.txt"            # <models_dir>/lgbm/<slug>/model.txt
END_MARKERS = ("end of trees", "end of parameters")   # lines every complete model.txt holds


def model_file(model_dir: str | Path) -> Path:
    """The booster file of one collection's model folder (`<models_dir>/lgbm/<slug>`)."""
    return Path(model_dir) / MODEL_FILE


def load_booster(model_dir: str | Path):
    """The booster stage lgbm saved in `model_dir`; FileNotFoundError naming the file when it is missing,
    PipelineError naming it when it is cut short (no END_MARKERS line: LightGBM itself would load the trees before
    the cut) or LightGBM refuses it."""
    import lightgbm as lgb

    path = model_file(model_dir)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; run stage lgbm for this collection first")
    text = path.read_bytes()
    lines = set(text.decode(errors="replace").splitlines())
    missing = [marker for marker in END_MARKERS if marker not in lines]
    try:
        if missing:
            raise lgb.basic.LightGBMError(f"no '{missing[0]}' line: the file is truncated")
        problem = format_problem(text)
        if problem:
            raise lgb.basic.LightGBMError(problem)
        return lgb.Booster(model_file=str(path))
    except lgb.basic.LightGBMError as error:
        raise PipelineError(f"{path}: expected a LightGBM model as stage lgbm saves it; found "
                            f"{first_line(error)}; run stage lgbm for this collection again") from None


HEADER_COUNTS = ("num_class", "num_tree_per_iteration")   # header keys LightGBM reads as a count (1 for a ranker)


def format_problem(text: bytes) -> str | None:
    """What in a model file LightGBM would misread, or None: a header count that is not 1 (num_class=x loads as 0
    classes, then predicts an empty array), or `tree_sizes` that do not cut the trees apart (a tree edited by hand:
    LightGBM's C++ parser then aborts the process, status 134, without naming the file)."""
    header = dict(line.split(b"=", 1) for line in text.split(b"\n\n", 1)[0].splitlines() if b"=" in line)
    for key in HEADER_COUNTS:
        if header.get(key.encode(), b"1").strip() != b"1":
            return f"{key}={header[key.encode()].decode(errors='replace')[:20]!r} where a ranker has 1"
    sizes, start, end = header.get(b"tree_sizes", b"").split(), text.find(b"\nTree=0\n") + 1, text.find(b"end of trees")
    if not sizes or not start:
        return None
    if not all(size.isdigit() for size in sizes):
        return "a 'tree_sizes' line that is not a list of byte counts"
    offsets = np.cumsum([0] + [int(size) for size in sizes]) + start
    if offsets[-1] != end or any(text[offset:offset + 5] != b"Tree=" for offset in offsets[:-1]):
        return f"{len(sizes)} trees whose 'tree_sizes' do not match their text (a tree edited by hand)"
    return None


def column_names(names: list[str], shown: int = 2) -> str:
    """The first `shown` feature column names, then '...' when there are more."""
    return ", ".join(names[:shown] + (["..."] if len(names) > shown else []))


def predict_graph(booster, graph: PrunedGraph, kind: str, spec: FeatureSpec, num_threads: int,
                  model_path: str | Path = "the LightGBM model") -> np.ndarray:
    """float64 [original configs]: minus the predicted relevance (lower = faster), via config_inverse.
    PipelineError naming `model_path` when the graph's feature columns are not the model's (a model trained before
    prune re-ran on other data, or on other lgbm.features)."""
    featurizer = GraphFeaturizer(graph, kind, spec)
    model = booster.feature_name()
    if featurizer.names != model:
        raise PipelineError(f"{model_path}: a model of {len(model)} feature columns ({column_names(model)}), but "
                            f"graph {graph.graph_id!r} gives {len(featurizer.names)} "
                            f"({column_names(featurizer.names)}) (prune ran on other data or settings since stage "
                            f"lgbm trained it, or lgbm.features changed); run stage lgbm again (dvc repro)")
    relevance = np.empty(graph.n_kept, dtype=np.float64)
    for start, x in featurizer.iter_chunks():
        relevance[start:start + len(x)] = booster.predict(x, num_iteration=booster.best_iteration or None,
                                                          num_threads=num_threads)
    inverse = np.asarray(graph.config_inverse, dtype=np.int64)
    if inverse.size and (inverse.min() < 0 or inverse.max() >= graph.n_kept):
        raise ValueError(f"graph {graph.graph_id!r}: config_inverse outside 0..{graph.n_kept - 1}")
    return -relevance[inverse]


def predict_split(booster, graphs: Iterable[PrunedGraph], kind: str, spec: FeatureSpec, num_threads: int,
                  desc: str = "", total: int | None = None) -> Predictions:
    """Scores for every original config of every graph; checked to cover each exactly once."""
    preds, n_configs = Predictions(), {}
    for graph in tqdm(graphs, desc=desc, unit="graph", leave=False, total=total):
        preds[graph.graph_id] = predict_graph(booster, graph, kind, spec, num_threads)
        n_configs[graph.graph_id] = graph.n_configs
    preds.check_covers(n_configs, where=desc)
    return preds
