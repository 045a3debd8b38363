"""The GNN's settings for one collection, resolved once by the config layer (`pipeline.settings.gnn.gnn_settings`):
one frozen object that stage gnn, the inference entry point (pipeline.graphnet.scoring) and the tools pass down."""
from __future__ import annotations

from dataclasses import dataclass, replace

from pipeline.graphnet.gst import GSTSettings
from pipeline.graphnet.infer import InferSettings
from pipeline.graphnet.model import ModelSpec
from pipeline.graphnet.train_loop import TrainSettings


@dataclass(frozen=True)
class GnnSettings:
    """The `gnn` group (by-search values picked for the collection), the global seed and the collection's hops."""

    model: ModelSpec                  # node_feat_dim 0: the pruned graphs give it (`spec`)
    train: TrainSettings              # min_gap: gnn.min_gap (stage gnn sets prune's measured one, gnn.min_gap_quantile)
    infer: InferSettings              # the final inference (and the per-epoch validation)
    gst: GSTSettings | None           # gnn.mode=gst on a layout collection, else None (graphs train whole)
    infer_chunk_mb: float | None      # CPU inference in config chunks of this many MB (pipeline/graphnet/chunked.py)
    device: str                       # auto | cpu | cuda (train_loop.pick_device)
    num_threads: int                  # torch's CPU threads (shared by the member workers)
    member_workers: int               # members trained at once on a CPU (pipeline/graphnet/member_pool.py)
    members: tuple[int, ...]          # gnn.seeds: one model per member (pipeline/graphnet/members.py)
    seed: int                         # the global seed the member seeds derive from
    min_gap_quantile: float | None    # None: train.min_gap; else from the duplicate spread prune measured
    prune_hops: int | None            # prune.hops for this collection (None: whole graphs)
    joint_sources: bool               # layout: also train on the other source's train graphs of the same search

    def spec(self, node_feat_dim: int) -> ModelSpec:
        """The model spec for pruned graphs with `node_feat_dim` normalised node feature columns."""
        return replace(self.model, node_feat_dim=int(node_feat_dim))
