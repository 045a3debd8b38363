"""Stage prune's settings for one collection: `prune_settings(cfg, collection)` reads conf/prune once (`prune.hops`
by search through `pipeline.config.prune_hops`, which stage gnn reads too; `prune.normalize.min_std` by search)."""
from __future__ import annotations

from typing import Mapping

from pipeline.config import by_search, prune_hops
from pipeline.pruning.params import PruneParams
from pipeline.tpugraphs.dataset import Collection


def prune_settings(cfg, collection: Collection, saved: Mapping | None = None) -> PruneParams:
    """conf/prune for `collection`; `saved` (the `params` a pruned collection's report.json records) overrides
    `hops`, `pad_value` and `dedup` with what stage prune ran with, as the tools prune a new graph."""
    prune = cfg.prune
    hops, pad_value, dedup = prune.hops, prune.pad_value, prune.dedup
    if saved is not None:
        hops, pad_value, dedup = saved["hops"], saved["pad_value"], saved["dedup"]
    return PruneParams(hops=prune_hops(hops, collection), pad_value=float(pad_value), dedup=str(dedup),
                       log_columns=tuple(prune.normalize.log_columns),
                       drop_constant=bool(prune.normalize.drop_constant),
                       min_std=float(by_search(prune.normalize.min_std, "prune.normalize.min_std", collection.kind,
                                               collection.search)),
                       workers=int(prune.workers),
                       chunk_size=int(prune.chunk_size), skip_invalid_train=bool(prune.skip_invalid_train))
