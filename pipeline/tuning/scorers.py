"""Objective adapters: the trained models of one collection as scorers of candidate layouts.

A member (`GnnMember`, `LgbmMember`, `HeuristicMember`) gives raw scores (lower = faster) to every config of a
pruned graph, through the model's own inference path (GNN: every member seed of `gnn.seeds`, the chunked CPU
forward, raw outputs averaged; LightGBM: `predict_graph`). Raw scores are not runtimes, so each member is
calibrated once on the valid split (`calibrate`): per graph, scores and log runtimes centred, the least-squares
slope through the origin, pooled over graphs. `ModelScorer` then maps candidates node_config_feat [B, NC, 18] to
the predicted log(runtime / default runtime): slope x (score - score of the default), the default scored in the
same batch (a GNN score depends on its batch). The ensemble is the weighted mean of its members' predictions with
the weights stage `ensemble` chose. Missing models name the stage that writes them; a model of another
collection is refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from omegaconf import DictConfig

from pipeline.choices import AUTOTUNE_MODELS
from pipeline.pruned import PrunedGraph, iter_split
from pipeline.tpugraphs.dataset import Collection
from pipeline.heuristic_model.scores import default_block_counts, tile_scores as heuristic_tile_scores
from pipeline.lgbm_model.infer import predict_graph as lgbm_predict_graph
from pipeline.trained import PredictError, ensemble_weights
from pipeline.tuning.program import with_configs

MODELS = AUTOTUNE_MODELS
CALIBRATION_SPLIT = "valid"


class GnnMember:
    """Every member seed's layout GNN, raw outputs averaged."""

    name = "gnn"

    def __init__(self, cfg: DictConfig, collection: Collection):
        from pipeline.graphnet import checkpoint as ckpt
        from pipeline.graphnet.members import member_dir
        from pipeline.settings.gnn import gnn_settings

        settings = gnn_settings(cfg, collection)
        if settings.gst is not None:
            raise PredictError(f"gnn.mode=gst: autotune scores whole pruned graphs; use gnn.mode=pruned models")
        model_dir = Path(cfg.paths.models_dir) / "gnn" / collection.slug
        self.nets = []
        for member in settings.members:
            path = member_dir(model_dir, member) / ckpt.MODEL_FILE
            if not path.is_file():
                raise PredictError(f"{path}: missing; run stage gnn@{collection.slug} first (dvc repro)")
            net, meta = ckpt.load_model(path, map_location="cpu", infer_chunk_mb=settings.infer_chunk_mb)
            if meta.get("collection", collection.name) != collection.name:
                raise PredictError(f"{path}: a model of {meta['collection']}, not of {collection.name}")
            self.nets.append(net.eval())
        self._tensors: dict[tuple[str, str], object] = {}
        self.kind = collection.kind

    @torch.no_grad()
    def raw(self, graph: PrunedGraph) -> np.ndarray:
        from pipeline.graphnet.data import config_batch, graph_tensors

        key = (graph.split, graph.graph_id)          # valid graphs (calibration) and test-split templates
        if key not in self._tensors:
            self._tensors[key] = graph_tensors(graph)
        configs = config_batch(self.kind, graph, np.arange(graph.n_kept))
        return np.mean([net(self._tensors[key], configs).float().numpy() for net in self.nets], axis=0)


class LgbmMember:
    name = "lgbm"

    def __init__(self, cfg: DictConfig, collection: Collection):
        import lightgbm as lgb
        from pipeline.settings.lgbm import lgbm_settings

        path = Path(cfg.paths.models_dir) / "lgbm" / collection.slug / "model.txt"
        if not path.is_file():
            raise PredictError(f"{path}: missing; run stage lgbm@{collection.slug} first (dvc repro)")
        self.booster = lgb.Booster(model_file=str(path))
        settings = lgbm_settings(cfg, collection)
        self.spec, self.threads = settings.features, settings.num_threads
        self.kind = collection.kind

    def raw(self, graph: PrunedGraph) -> np.ndarray:
        try:
            return lgbm_predict_graph(self.booster, graph, self.kind, self.spec, self.threads)
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


@dataclass
class Calibration:
    """log runtime per unit of raw score (slope) and the correlation of the two on valid (centred per graph)."""

    slope: float
    correlation: float
    configs: int


def calibrate(member, graphs: Sequence[PrunedGraph], max_configs: int, batch: int,
              rng: np.random.Generator) -> Calibration:
    """Least-squares slope through the origin of centred log runtime on centred raw score, pooled over graphs."""
    xs, ys = [], []
    for graph in graphs:
        rows = np.sort(rng.permutation(graph.n_kept)[:max_configs])
        feat = np.asarray(graph.config_feat if graph.config_feat is not None else graph.node_config_feat)[rows]
        score = np.concatenate([member.raw(with_configs(graph, feat[lo:lo + batch]))
                                for lo in range(0, len(rows), batch)])
        y = np.log(np.asarray(graph.config_runtime, dtype=np.float64)[rows])
        xs.append(score - score.mean())
        ys.append(y - y.mean())
    x, y = np.concatenate(xs), np.concatenate(ys)
    sxx, syy = float(x @ x), float(y @ y)
    if sxx == 0:
        return Calibration(0.0, 0.0, len(x))
    return Calibration(float(x @ y) / sxx, float(x @ y) / np.sqrt(sxx * syy) if syy > 0 else 0.0, len(x))


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
    """A collection's model as a search guide: members, their weights and valid calibrations."""

    model: str
    collection: Collection
    members: list
    weights: list[float]
    calibrations: list[Calibration]

    def scorer(self, template: PrunedGraph) -> ModelScorer:
        return ModelScorer(template, self.members, self.weights, self.calibrations)


def load_guide(cfg: DictConfig, model: str, collection: Collection, max_configs: int, batch: int,
               seed: int) -> Guide:
    """Load `model` (ensemble | gnn | lgbm) of `collection` and calibrate its members on the valid split."""
    if model not in MODELS:
        raise PredictError(f"--model {model!r}: expected one of {MODELS}")
    makers = {"gnn": GnnMember, "lgbm": LgbmMember, "heuristic": HeuristicMember}
    weights = ensemble_weights(cfg, collection) if model == "ensemble" else {model: 1.0}
    unknown = set(weights) - set(makers)
    if unknown:
        raise PredictError(f"ensemble members {sorted(unknown)}: autotune scores with {sorted(makers)} only")
    used = {name: w for name, w in weights.items() if w > 0}
    members = [makers[name](cfg, collection) for name in used]
    try:
        valid = list(iter_split(cfg.paths.pruned_dir, collection.slug, CALIBRATION_SPLIT, mmap=False))
    except FileNotFoundError:
        raise PredictError(f"{cfg.paths.pruned_dir}/{collection.slug}: missing; run stage prune@{collection.slug} "
                           f"first (dvc repro)") from None
    calibrations = [calibrate(m, valid, max_configs, batch, np.random.default_rng(seed)) for m in members]
    return Guide(model, collection, members, list(used.values()), calibrations)
