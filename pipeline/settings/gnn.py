"""Stage gnn's settings for one collection: `gnn_settings(cfg, collection)` reads the `gnn` group (the by-search
values `lr`, `epochs`, `norm`, `node_reduce`, `configs_per_graph` picked for the collection), `prune.hops` and the
global `seed` once, into a `pipeline.graphnet.settings.GnnSettings`."""
from __future__ import annotations

from dataclasses import replace

from pipeline.config import by_search, prune_hops
from pipeline.graphnet.gst import GSTSettings
from pipeline.graphnet.infer import InferSettings
from pipeline.graphnet.model import ModelSpec
from pipeline.graphnet.settings import GnnSettings
from pipeline.graphnet.train_loop import TrainSettings
from pipeline.tpugraphs.dataset import Collection


def model_spec(gnn, collection: Collection, node_feat_dim: int = 0) -> ModelSpec:
    """The model's architecture from the `gnn` group (`node_feat_dim`: the pruned graphs' normalised node feature
    columns, 0 until the data gives it); `node_reduce` only for layout models."""
    kind, search = collection.kind, collection.search
    node_reduce = None if kind == "tile" else str(by_search(gnn.node_reduce, "gnn.node_reduce", kind, search))
    return ModelSpec(kind=kind, node_feat_dim=int(node_feat_dim), hidden=int(gnn.hidden),
                     opcode_dim=int(gnn.opcode_dim), config_value_dim=int(gnn.config_value_dim),
                     layers=int(gnn.layers), dropout=float(gnn.dropout),
                     norm=str(by_search(gnn.norm, "gnn.norm", kind, search)), residual=bool(gnn.residual),
                     cross_attention=bool(gnn.cross_attention), attention_heads=int(gnn.attention_heads),
                     cross_mixer=str(gnn.cross_mixer), cross_pooled=bool(gnn.cross_pooled),
                     effective_layout=bool(gnn.effective_layout), edge_mismatch=bool(gnn.edge_mismatch),
                     node_reduce=node_reduce, pooled_head=bool(gnn.pooled_head),
                     tile_geometry=bool(gnn.tile_geometry), layout_roles=kind == "layout" and bool(
                         by_search(gnn.layout_roles, "gnn.layout_roles", kind, search)),
                     layout_padding=kind == "layout" and bool(
                         by_search(gnn.layout_padding, "gnn.layout_padding", kind, search)))


def train_settings(gnn, collection: Collection, infer: InferSettings) -> TrainSettings:
    """Training's settings (`lr`, `epochs`, `configs_per_graph`, `ema_epochs` by search); validation scores as
    `infer`, with `gnn.valid_tta` orderings when set."""
    kind, search = collection.kind, collection.search
    return TrainSettings(lr=float(by_search(gnn.lr, "gnn.lr", kind, search)), weight_decay=float(gnn.weight_decay),
                         warmup_frac=float(gnn.warmup_frac), schedule=str(gnn.schedule),
                         epochs=int(by_search(gnn.epochs, "gnn.epochs", kind, search)),
                         lr_patience=int(gnn.lr_patience), lr_decay=float(gnn.lr_decay),
                         patience=int(gnn.patience), min_delta=float(gnn.min_delta),
                         steps_per_epoch=int(gnn.steps_per_epoch) if gnn.steps_per_epoch else None,
                         graphs_per_step=max(1, int(gnn.graphs_per_step)),
                         configs_per_graph=int(by_search(gnn.configs_per_graph, "gnn.configs_per_graph",
                                                         kind, search)),
                         grad_clip=float(gnn.grad_clip) if gnn.grad_clip else None, loss=str(gnn.loss),
                         margin=float(gnn.margin), min_gap=float(gnn.min_gap), resume=bool(gnn.resume),
                         amp=bool(gnn.amp), valid_max_configs=int(gnn.valid_max_configs),
                         ema_epochs=_optional_float(by_search(gnn.ema_epochs, "gnn.ema_epochs", kind, search)),
                         valid_metric=str(gnn.valid_metric),
                         valid=infer if gnn.valid_tta is None else replace(infer, tta=int(gnn.valid_tta)))


def _optional_float(value) -> float | None:
    return None if value is None else float(value)


def infer_settings(gnn) -> InferSettings:
    """How the final inference (and the per-epoch validation) scores configs."""
    return InferSettings(infer_batch=int(gnn.infer_batch), tta=int(gnn.tta), amp=bool(gnn.amp))


def gst_settings(gnn, collection: Collection) -> GSTSettings | None:
    """The `gnn.gst` group when gnn.mode=gst and the collection is a layout one (tile graphs train whole), else None."""
    if str(gnn.mode) != "gst" or collection.kind != "layout":
        return None
    return gst_group(gnn.gst)


def gst_group(gst) -> GSTSettings:
    """The `gnn.gst` group itself, whatever gnn.mode (the benchmarks time GST with it)."""
    return GSTSettings(segment_size=int(gst.segment_size), segmentation=str(gst.segmentation),
                       segments_per_step=int(gst.segments_per_step), stale_dropout=float(gst.stale_dropout),
                       finetune_epochs=int(gst.finetune_epochs), finetune_lr_scale=float(gst.finetune_lr_scale))


def gnn_settings(cfg, collection: Collection) -> GnnSettings:
    """Everything stage gnn and the GNN's inference read, for `collection` (the schema checked the values)."""
    gnn = cfg.gnn
    infer = infer_settings(gnn)
    return GnnSettings(model=model_spec(gnn, collection), train=train_settings(gnn, collection, infer), infer=infer,
                       gst=gst_settings(gnn, collection),
                       infer_chunk_mb=_optional_float(gnn.infer_chunk_mb),
                       device=str(gnn.device), num_threads=int(gnn.num_threads),
                       member_workers=int(gnn.member_workers),
                       members=tuple(int(s) for s in gnn.seeds), seed=int(cfg.seed),
                       min_gap_quantile=_optional_float(gnn.min_gap_quantile),
                       prune_hops=prune_hops(cfg.prune.hops, collection),
                       joint_sources=collection.kind == "layout" and bool(
                           by_search(gnn.joint_sources, "gnn.joint_sources", collection.kind, collection.search)))
