"""Objective adapters: the trained models of one collection as scorers of candidate layouts.

A member (`GnnMember`, `LgbmMember`, `HeuristicMember`) gives raw scores (lower = faster) to every config of a
pruned graph, through the model's own inference path (GNN: every member seed of `gnn.seeds`, the chunked CPU
forward, raw outputs averaged; LightGBM: `predict_graph`). Raw scores are not runtimes, so each member is
calibrated on the valid split (`fit_calibration`, by stage autotune in `measure_guard`, stored in the guard file the
tool reads): per graph, scores and log runtimes centred, the least-squares slope through the origin, pooled over
graphs. `ModelScorer` then maps candidates node_config_feat [B, NC, 18] to
the predicted log(runtime / default runtime): slope x (score - score of the default), the default scored in the
same batch (a GNN score depends on its batch). The ensemble is the weighted mean of its members' predictions with
the weights stage `ensemble` chose. Missing models name the stage that writes them; a model of another
collection is refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch
from omegaconf import DictConfig

from pipeline.choices import AUTOTUNE_MODELS
from pipeline.pruned import PrunedGraph, iter_split
from pipeline.tpugraphs.dataset import Collection
from pipeline.heuristic_model.scores import default_block_counts, tile_scores as heuristic_tile_scores
from pipeline.lgbm_model.infer import predict_graph as lgbm_predict_graph
from pipeline.config import data_fingerprint
from pipeline.trained import PredictError, ensemble_weights
from pipeline.tuning.evidence import sibling_valid_graphs
from pipeline.tuning.guard import (REGION_KEYS, GuardSettings, ValidSample, guard_file, model_guard, read_guard,
                                   sample_valid, trust_region)
from pipeline.tuning.search import Guard
from pipeline.tuning.program import with_configs

MODELS = AUTOTUNE_MODELS
CALIBRATION_SPLIT = "valid"


class GnnMember:
    """Every member seed's layout GNN, raw outputs averaged. Models trained with Graph Segment Training
    (`gnn.mode=gst`) score a graph segment by segment, as stage gnn's inference does (exact, memory bounded by one
    segment)."""

    name = "gnn"

    def __init__(self, cfg: DictConfig, collection: Collection):
        from pipeline.graphnet import checkpoint as ckpt
        from pipeline.graphnet.members import member_dir
        from pipeline.graphnet.scoring import check_node_feat_columns
        from pipeline.pruned import NORMALIZER_FILE, collection_dir
        from pipeline.pruning.normalize import Normalizer
        from pipeline.settings.gnn import gnn_settings

        settings = gnn_settings(cfg, collection)
        model_dir = Path(cfg.paths.models_dir) / "gnn" / collection.slug
        normalizer = collection_dir(cfg.paths.pruned_dir, collection.slug) / NORMALIZER_FILE
        columns = [len(Normalizer.load(normalizer).columns)] if normalizer.is_file() else []
        self.nets = []
        for member in settings.members:
            path = member_dir(model_dir, member) / ckpt.MODEL_FILE
            if not path.is_file():
                raise PredictError(f"{path}: missing; run stage gnn@{collection.slug} first (dvc repro)")
            net, meta = ckpt.load_model(path, map_location="cpu", infer_chunk_mb=settings.infer_chunk_mb)
            if meta.get("collection", collection.name) != collection.name:
                raise PredictError(f"{path}: a model of {meta['collection']}, not of {collection.name}")
            check_node_feat_columns(net, path, columns, collection.slug)
            self.nets.append(net.eval())
        self._tensors: dict[tuple[str, str], object] = {}
        self.segments = None
        if settings.gst is not None:
            from pipeline.graphnet.gst import SegmentCache
            self.segments = SegmentCache(settings.gst, self.nets[0].spec.layers + 1, torch.device("cpu"))
        self.kind = collection.kind

    @torch.no_grad()
    def raw(self, graph: PrunedGraph) -> np.ndarray:
        from pipeline.graphnet.data import config_batch, graph_tensors

        configs = config_batch(self.kind, graph, np.arange(graph.n_kept))
        if self.segments is not None:                # GST models: segment by segment (kept per graph)
            from pipeline.graphnet.gst import segmented_scores

            parts = self.segments.get(graph)
            return np.mean([segmented_scores(net, parts, configs, graph.n_nodes).float().numpy()
                            for net in self.nets], axis=0)
        key = (graph.split, graph.graph_id)          # valid graphs (calibration) and test-split templates
        if key not in self._tensors:
            self._tensors[key] = graph_tensors(graph)
        return np.mean([net(self._tensors[key], configs).float().numpy() for net in self.nets], axis=0)


class LgbmMember:
    name = "lgbm"

    def __init__(self, cfg: DictConfig, collection: Collection):
        from pipeline.lgbm_model.infer import load_booster
        from pipeline.settings.lgbm import lgbm_settings

        path = Path(cfg.paths.models_dir) / "lgbm" / collection.slug / "model.txt"
        if not path.is_file():
            raise PredictError(f"{path}: missing; run stage lgbm@{collection.slug} first (dvc repro)")
        self.booster, self.path = load_booster(path.parent), path   # a model file cut short or edited: one line
        settings = lgbm_settings(cfg, collection)
        self.spec, self.threads = settings.features, settings.num_threads
        self.kind = collection.kind

    def raw(self, graph: PrunedGraph) -> np.ndarray:
        try:
            return lgbm_predict_graph(self.booster, graph, self.kind, self.spec, self.threads, self.path)
        except ValueError as err:
            raise PredictError(f"lgbm model of another collection or feature set: {err}") from None


class HeuristicMember:
    name = "heuristic"

    def __init__(self, cfg: DictConfig, collection: Collection):
        self.kind = collection.kind

    def raw(self, graph: PrunedGraph) -> np.ndarray:
        if self.kind == "tile":
            return np.asarray(heuristic_tile_scores(np.asarray(graph.config_feat)), dtype=np.float64)
        return -default_block_counts(np.asarray(graph.node_config_feat)).astype(np.float64)


MEMBERS = {"gnn": GnnMember, "lgbm": LgbmMember, "heuristic": HeuristicMember}


@dataclass
class Calibration:
    """log runtime per unit of raw score (slope) and the correlation of the two on valid (centred per graph)."""

    slope: float
    correlation: float
    configs: int


def fit_calibration(samples: Sequence[ValidSample], name: str) -> Calibration:
    """Least-squares slope through the origin of centred log runtime on member `name`'s centred raw score, pooled
    over the graphs' samples."""
    xs = [s.raw[name] - s.raw[name].mean() for s in samples]
    ys = [s.log_runtime - s.log_runtime.mean() for s in samples]
    x, y = (np.concatenate(xs), np.concatenate(ys)) if xs else (np.zeros(0), np.zeros(0))
    sxx, syy = float(x @ x), float(y @ y)
    if sxx == 0:
        return Calibration(0.0, 0.0, len(x))
    return Calibration(float(x @ y) / sxx, float(x @ y) / np.sqrt(sxx * syy) if syy > 0 else 0.0, len(x))


def calibrate(member, graphs: Sequence[PrunedGraph], max_configs: int, batch: int,
              rng: np.random.Generator) -> Calibration:
    """`fit_calibration` of one member on up to max_configs configurations per graph."""
    return fit_calibration(sample_valid(graphs, [member], max_configs, batch, rng), member.name)


class ModelScorer:
    """Candidates -> predicted log(runtime / default runtime), from calibrated members (see the module docstring)."""

    def __init__(self, template: PrunedGraph, members: Sequence, weights: Sequence[float],
                 calibrations: Sequence[Calibration]):
        """The template's first config is the default every batch is scored against."""
        self.template, self.members = template, list(members)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.calibrations = list(calibrations)
        configs = template.config_feat if template.config_feat is not None else template.node_config_feat
        self.default = np.asarray(configs)[:1]                                   # [1, NC, 18] or [1, 24]

    def __call__(self, node_config_feat: np.ndarray) -> np.ndarray:
        graph = with_configs(self.template, np.concatenate([self.default, node_config_feat]))   # [1 + B, ...]
        total = np.zeros(len(node_config_feat))
        for member, weight, cal in zip(self.members, self.weights, self.calibrations):
            if weight == 0:
                continue
            raw = member.raw(graph)
            total += weight * cal.slope * (raw[1:] - raw[0])
        return total


@dataclass
class Guide:
    """A collection's model as a search guide: members, their weights, valid calibrations and the guard's margin."""

    model: str
    collection: Collection
    members: list
    weights: list[float]
    calibrations: list[Calibration]
    rule: Guard = Guard(0.0)

    def scorer(self, template: PrunedGraph) -> ModelScorer:
        return ModelScorer(template, self.members, self.weights, self.calibrations)


def model_weights(cfg: DictConfig, model: str, collection: Collection) -> dict[str, float]:
    """The members a model blends and their weights (> 0): the ensemble's chosen by stage ensemble, else {model: 1}."""
    if model not in MODELS:
        raise PredictError(f"--model {model!r}: expected one of {MODELS}")
    weights = ensemble_weights(cfg, collection) if model == "ensemble" else {model: 1.0}
    unknown = set(weights) - set(MEMBERS)
    if unknown:
        raise PredictError(f"ensemble members {sorted(unknown)}: autotune scores with {sorted(MEMBERS)} only")
    return {name: float(w) for name, w in weights.items() if w > 0}


def load_members(cfg: DictConfig, names, collection: Collection) -> dict:
    """{name: member} of the trained models `names` of `collection` (missing ones name their stage)."""
    return {name: MEMBERS[name](cfg, collection) for name in names}


def valid_graphs(cfg: DictConfig, collection: Collection) -> list[PrunedGraph]:
    """The collection's pruned valid graphs (one line naming stage prune when they are missing)."""
    try:
        return list(iter_split(cfg.paths.pruned_dir, collection.slug, CALIBRATION_SPLIT, mmap=False))
    except FileNotFoundError:
        raise PredictError(f"{cfg.paths.pruned_dir}/{collection.slug}: missing; run stage prune@{collection.slug} "
                           f"first (dvc repro)") from None


def measure_guard(cfg: DictConfig, collection: Collection, max_configs: int, batch: int, seed: int,
                  settings: GuardSettings, models: Sequence[str] = MODELS) -> tuple[dict, dict]:
    """Stage autotune: (the guard file's table of `collection`, its loaded members). Every member any of `models`
    (default: every autotune model) uses is calibrated on the same valid sample of the collection, then each
    model's margin and the region are measured (`pipeline.tuning.guard`) on that sample plus, with
    `settings.siblings`, a sample of the valid graphs of the source's other layout collections
    (`pipeline.tuning.evidence`)."""
    per_model = {model: model_weights(cfg, model, collection) for model in models}
    names = sorted({name for weights in per_model.values() for name in weights})
    members = load_members(cfg, names, collection)
    rng = np.random.default_rng(seed)
    samples = sample_valid(valid_graphs(cfg, collection), list(members.values()), max_configs, batch, rng)
    calibrations = {name: fit_calibration(samples, name) for name in names}
    slopes = {name: cal.slope for name, cal in calibrations.items()}
    extra = (sample_valid(sibling_valid_graphs(cfg, collection), list(members.values()), max_configs, batch, rng)
             if settings.siblings else [])
    evidence = samples + extra
    table = {"collection": collection.name, "data_fingerprint": data_fingerprint(cfg.data),
             "split": CALIBRATION_SPLIT, "error_quantile": settings.error_quantile, "graphs": len(samples),
             "sibling_graphs": len(extra), **trust_region(evidence, settings.measured_blocks),
             "calibrations": {name: vars(cal) for name, cal in calibrations.items()},
             "models": {model: model_guard(evidence, weights, slopes, settings.error_quantile, settings.min_pairs,
                                          settings.shrink)
                        for model, weights in per_model.items()}}
    return table, members


def guide_of(table: Mapping, model: str, collection: Collection, members: Mapping, by_distance: bool = False) -> Guide:
    """A model's guide from a guard table (`measure_guard`, or the file the tool reads) and loaded members; with
    `by_distance` its margin goes by the pick's distance where the table measured one (layout)."""
    entry = table["models"][model]
    names = list(entry["weights"])
    steps = entry.get("margin_by_distance") if by_distance else None
    rule = Guard(float(entry["margin"]), table.get("max_gain"), table.get("max_changed"),
                 (tuple(steps["upto"]), tuple(steps["margin"])) if steps else None,
                 tuple(steps["shrink"]) if steps and "shrink" in steps else None,
                 None if table.get("measured_blocks") is None else tuple(map(tuple, table["measured_blocks"])),
                 table.get("min_nodes"))
    return Guide(model, collection, [members[n] for n in names], [entry["weights"][n] for n in names],
                 [Calibration(**table["calibrations"][n]) for n in names], rule)


def load_guide(cfg: DictConfig, model: str, collection: Collection) -> Guide:
    """The tool's guide: `model` of `collection` with the calibrations and margin stage autotune measured (refused
    when the guard file is missing, made on other data, or with other ensemble weights)."""
    weights = model_weights(cfg, model, collection)
    members = load_members(cfg, weights, collection)            # a missing model names its own stage first
    path = guard_file(cfg.paths.models_dir, collection.slug)
    entry = read_guard(cfg.paths.models_dir, collection.slug, model, data_fingerprint(cfg.data))
    if entry["weights"] != weights:
        raise PredictError(f"{path}: measured with weights {entry['weights']}, but the models now use {weights}; "
                           f"run stage autotune (dvc repro)")
    table = {"models": {model: entry}, "calibrations": entry["calibrations"], **{k: entry[k] for k in REGION_KEYS}}
    return guide_of(table, model, collection, members, bool(cfg.autotune.guard.by_distance))
