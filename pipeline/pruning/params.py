"""The pruning settings of one collection (`conf/prune`), shared by stage prune, command predict and the pruning of
each graph (pipeline.pruning.graph); built once by `pipeline.settings.prune.prune_settings`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.pruning.normalize import log_mask as columns_mask


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

    @property
    def log_mask(self) -> np.ndarray:
        """bool [140]: the node_feat columns logged before the train statistics (`log_columns`)."""
        return columns_mask(self.log_columns)
