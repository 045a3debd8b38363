"""The GNN's one inference entry point: load the members stage gnn saved and score pruned graphs with them.

A member scores graphs on the stage's inference path (`member_predictions`: TTA orderings from the member's seed,
GST segments when gnn.mode=gst on a layout collection); the seed ensemble rank-averages its members
(`seed_ensemble_scores`, pipeline/graphnet/members.py). Stage `gnn`, command `predict` and the tools built on the
model all score through these functions, so they rank a graph identically.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import torch
from torch import nn

from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.gst import SegmentCache
from pipeline.graphnet.infer import predict_graphs
from pipeline.graphnet.members import member_dir, member_seed, rank_mean
from pipeline.graphnet.settings import GnnSettings
from pipeline.graphnet.train_loop import pick_device
from pipeline.predictions import Predictions
from pipeline.pruned import PrunedGraph


def load_member(model_dir: str | Path, member: int, device: torch.device, infer_chunk_mb,
                graphs: Sequence[PrunedGraph] = ()) -> nn.Module:
    """Member `member`'s best model from a collection's model folder (`<models_dir>/gnn/<slug>`), on `device`;
    FileNotFoundError naming the file when stage gnn has not written it, CheckpointError naming it when it reads
    another number of node_feat columns than `graphs` carry (prune re-ran on other data since it was trained)."""
    model_file = member_dir(model_dir, member) / ckpt.MODEL_FILE
    if not model_file.is_file():
        raise FileNotFoundError(f"{model_file}: missing; run stage gnn for this collection first (with this gnn.seeds)")
    net, _ = ckpt.load_model(model_file, map_location=device, infer_chunk_mb=infer_chunk_mb)
    check_node_feat_columns(net, model_file, (g.node_feat.shape[1] for g in graphs), Path(model_dir).name)
    return net


def check_node_feat_columns(net: nn.Module, model_file: Path, widths: Iterable[int], slug: str) -> None:
    """CheckpointError naming `model_file` unless each of `widths` (the pruned graphs' node_feat columns) is the
    number the model was built for (a stale model beside a pruned collection of other data ended in a torch
    shape-mismatch traceback)."""
    other = sorted({int(w) for w in widths} - {int(net.spec.node_feat_dim)})
    if other:
        raise ckpt.CheckpointError(f"{model_file}: a model of {net.spec.node_feat_dim} node_feat columns, but the "
                                   f"pruned graphs of {slug} have {other[0]} (prune ran on other data or settings "
                                   f"since stage gnn trained it); run stage gnn again (dvc repro)")


def member_predictions(model: nn.Module, kind: str, graphs: Sequence[PrunedGraph], settings: GnnSettings,
                       seed: int, device: torch.device, progress: bool = False) -> Predictions:
    """One member's scores of every config of `graphs` (TTA orderings from the member's `seed`; `settings.infer`,
    GST segments when `settings.gst`)."""
    gst = settings.gst
    segments = None if gst is None else SegmentCache(gst, model.spec.layers + 1, device, keep=False)
    return predict_graphs(model.to(device), kind, graphs, settings.infer, seed, device,
                          progress=progress, segments=segments)


def seed_ensemble_scores(settings: GnnSettings, model_dir: str | Path, kind: str,
                         graphs: Sequence[PrunedGraph]) -> Predictions:
    """Every member of gnn.seeds (`settings.members`) loaded from `model_dir`, scoring `graphs`, rank-averaged as
    stage gnn averages them."""
    device = pick_device(settings.device)
    members = [member_predictions(load_member(model_dir, member, device, settings.infer_chunk_mb, graphs), kind,
                                  graphs, settings, member_seed(settings.seed, member), device)
               for member in settings.members]
    return rank_mean(members)
