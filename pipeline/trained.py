"""The trained models of the current `data=` applied to a new graph: one entry point for every model.

A new graph (a user's file, a featurised program, a configuration searched by autotune) is pruned the way stage
`prune` pruned its collection (the hops, padding and train-fitted node-feature normaliser saved in
`<pruned_dir>/<slug>/`) and scored by the model a stage wrote under `<models_dir>/<model>/<slug>/`, through that
model's own inference library; the ensemble blends its members with the weights stage `ensemble` chose on valid
(`<metrics_dir>/ensemble/<slug>.json`). Tools (`predict`, `autotune`) share these functions.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from pipeline.choices import MODELS, PRUNE_DEDUP_MODES
from pipeline.config import data_fingerprint
from pipeline.errors import PipelineError, shortened
from pipeline.files import is_number, read_json
from pipeline.pruned import NORMALIZER_FILE, REPORT_FILE, WHOLE_GRAPH, PrunedGraph, collection_dir, load_pruned_graph
from pipeline.pruning.graph import prune_file, write_normalized
from pipeline.pruning.normalize import Normalizer
from pipeline.scoring.evaluate import metrics_file
from pipeline.settings.prune import prune_settings
from pipeline.tpugraphs.dataset import Collection, load_graph

SPLIT = "test"          # new graphs are pruned like test graphs: no de-duplication, every config kept in order


class PredictError(PipelineError):
    """A graph or model the tools cannot score (one line: the file and what was expected)."""


def prune_new_graph(cfg: DictConfig, path: Path, collection: Collection, work_dir: Path) -> PrunedGraph:
    """Prune one new file with the settings and train-fitted normaliser stage prune saved for its collection."""
    saved = collection_dir(cfg.paths.pruned_dir, collection.slug)
    report_path, normalizer_path = saved / REPORT_FILE, saved / NORMALIZER_FILE
    for needed in (report_path, normalizer_path):
        if not needed.is_file():
            raise PredictError(f"{needed}: missing; run stage prune for {collection.slug} first (dvc repro)")
    params = prune_settings(cfg, collection, saved_prune_params(report_path, collection))
    work_dir.mkdir(parents=True, exist_ok=True)
    result = prune_file(path, collection, SPLIT, str(path), params, work_dir)
    if result.error is not None:
        raise result.error
    folder = work_dir / result.graph_id
    write_normalized(folder, Normalizer.load(normalizer_path), path)
    return load_pruned_graph(folder, mmap=False)


def saved_prune_params(report_path: Path, collection: Collection) -> dict:
    """What stage prune ran with (report.json's `params`: hops, pad_value, dedup); PredictError naming the file when
    it is not the report the stage writes (cut short, edited: a JSONDecodeError or KeyError traceback before)."""
    saved = read_json(report_path).get("params")
    hops = saved.get("hops") if isinstance(saved, dict) else None
    if not isinstance(saved, dict) or not (hops == WHOLE_GRAPH or isinstance(hops, int) and hops >= 0) \
            or saved.get("dedup") not in PRUNE_DEDUP_MODES or not is_number(saved.get("pad_value")):
        raise PredictError(f"{report_path}: key 'params': expected what stage prune ran with (hops a count or "
                           f"{WHOLE_GRAPH!r}, a finite pad_value, dedup one of {PRUNE_DEDUP_MODES}); found "
                           f"{shortened(saved)}; run stage prune for {collection.slug} again (dvc repro)")
    return saved


def member_scores(cfg: DictConfig, model: str, collection: Collection, path: Path, graph: PrunedGraph) -> np.ndarray:
    """float64 [configs] scores of one single model (lower = predicted faster), in the file's config order, through
    the model's own inference entry point (the one its stage predicts with)."""
    model_dir = Path(cfg.paths.models_dir) / model / collection.slug
    try:
        if model == "heuristic":
            from pipeline.heuristic_model.scores import graph_scores
            return graph_scores(load_graph(path, collection, SPLIT), collection.kind, cfg.heuristic.chunk_size)
        if model == "lgbm":
            from pipeline.lgbm_model.infer import load_booster, model_file, predict_graph
            from pipeline.settings.lgbm import lgbm_settings
            settings = lgbm_settings(cfg, collection)
            return predict_graph(load_booster(model_dir), graph, collection.kind, settings.features,
                                 settings.num_threads, model_file(model_dir))
        if model == "gnn":
            from pipeline.graphnet.scoring import seed_ensemble_scores
            from pipeline.settings.gnn import gnn_settings
            return seed_ensemble_scores(gnn_settings(cfg, collection), model_dir, collection.kind,
                                        [graph])[graph.graph_id]
    except FileNotFoundError as error:
        raise PredictError(f"{error} ({collection.slug})") from None
    raise PredictError(f"--model {model!r}: expected one of {MODELS}")


def ensemble_weights(cfg: DictConfig, collection: Collection) -> dict[str, float]:
    """The member weights stage ensemble chose on valid for this collection (its metrics file), refused when they
    were chosen on other data settings (the `data_fingerprint` the stage recorded with them)."""
    from pipeline.ensembling.blend import read_weights
    try:
        return read_weights(metrics_file(cfg.paths.metrics_dir, "ensemble", collection.slug),
                            data_fingerprint(cfg.data))
    except (FileNotFoundError, ValueError) as error:
        raise PredictError(str(error)) from None


def graph_scores(cfg: DictConfig, model: str, collection: Collection, path: Path, graph: PrunedGraph) -> np.ndarray:
    """float64 [configs]: the model's scores; the ensemble blends its members with the stage's weights."""
    if model != "ensemble":
        return member_scores(cfg, model, collection, path, graph)
    from pipeline.ensembling.blend import blend_graph
    weights = ensemble_weights(cfg, collection)
    members = {name: member_scores(cfg, name, collection, path, graph) for name in weights}
    return blend_graph(members, weights, str(cfg.ensemble.normalize))
