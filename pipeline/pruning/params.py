"""The pruning settings of one collection (`conf/prune`), shared by stage prune, command predict and the pruning of
each graph (pipeline.pruning.graph)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.pruned import prune_hops
from pipeline.pruning.normalize import log_mask as columns_mask
from pipeline.tpugraphs.dataset import Collection


@dataclass(frozen=True)
class PruneParams:
    """conf/prune for one collection: what stage prune and every graph's pruning depend on."""

    hops: int | None             # None = whole graph (`hops: all`), resolved for one collection
    pad_value: float
    dedup: str
    log_columns: tuple[str, ...]
    drop_constant: bool
    min_std: float               # floor of the train standard deviation node_feat columns are divided by
    workers: int
    chunk_size: int
    skip_invalid_train: bool

    @classmethod
    def from_cfg(cls, prune, collection: Collection | None = None) -> "PruneParams":
        """conf/prune for `collection`: `prune.hops` may be one value or a mapping by search (like gnn.lr); tile
        graphs are always kept whole, so a tile collection needs no entry. A mapping needs the collection. The values
        are checked once, by the schema, when the config loads (pipeline/settings_schema.py)."""
        return cls(hops=prune_hops(prune.hops, collection), pad_value=float(prune.pad_value), dedup=str(prune.dedup),
                   log_columns=tuple(prune.normalize.log_columns), drop_constant=bool(prune.normalize.drop_constant),
                   min_std=float(prune.normalize.min_std),
                   workers=int(prune.workers), chunk_size=int(prune.chunk_size),
                   skip_invalid_train=bool(prune.skip_invalid_train))

    @property
    def log_mask(self) -> np.ndarray:
        """bool [140]: the node_feat columns logged before the train statistics (`log_columns`)."""
        return columns_mask(self.log_columns)
