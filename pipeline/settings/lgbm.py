"""Stage lgbm's settings for one collection: `lgbm_settings(cfg, collection)` reads the `lgbm` group once (with
`lgbm.<kind>` picked for the collection's kind) into a `pipeline.lgbm_model.settings.LgbmSettings`."""
from __future__ import annotations

from pipeline.features.table import FeatureSpec
from pipeline.lgbm_model.settings import LgbmSettings
from pipeline.tpugraphs.dataset import Collection


def feature_spec(lgbm) -> FeatureSpec:
    """lgbm.features (group -> bool), lgbm.node_stats, lgbm.max_perm_rank, lgbm.feature_chunk, lgbm.top_nodes,
    lgbm.layout_reference."""
    return FeatureSpec(groups=frozenset(g for g, on in lgbm.features.items() if on),
                       node_stats=tuple(lgbm.node_stats), max_perm_rank=int(lgbm.max_perm_rank),
                       feature_chunk=int(lgbm.feature_chunk), top_nodes=int(lgbm.top_nodes),
                       layout_reference=str(lgbm.layout_reference))


def lgbm_settings(cfg, collection: Collection) -> LgbmSettings:
    """Everything stage lgbm and the ranker's inference read, for `collection` (the schema checked the values)."""
    return kind_settings(cfg.lgbm, collection.kind)


def kind_settings(lgbm, kind: str) -> LgbmSettings:
    """The `lgbm` group with `lgbm.<kind>` picked for a collection kind (the benchmarks time a kind)."""
    per_kind = lgbm[kind]
    return LgbmSettings(kind=kind, features=feature_spec(lgbm), objective=str(per_kind.objective),
                        label_grades=int(per_kind.label_grades), label_gain=str(per_kind.label_gain),
                        lambdarank_truncation_level=int(per_kind.lambdarank_truncation_level),
                        configs_per_graph=int(per_kind.configs_per_graph),
                        valid_configs_per_graph=int(per_kind.valid_configs_per_graph),
                        num_leaves=int(lgbm.num_leaves), learning_rate=float(lgbm.learning_rate),
                        min_data_in_leaf=int(lgbm.min_data_in_leaf), feature_fraction=float(lgbm.feature_fraction),
                        bagging_fraction=float(lgbm.bagging_fraction), bagging_freq=int(lgbm.bagging_freq),
                        lambda_l2=float(lgbm.lambda_l2), max_bin=int(lgbm.max_bin),
                        num_threads=int(lgbm.num_threads), eval_metric=str(lgbm.eval_metric),
                        eval_at=tuple(int(k) for k in lgbm.eval_at), num_boost_round=int(lgbm.num_boost_round),
                        early_stopping_rounds=int(lgbm.early_stopping_rounds),
                        max_query_rows=int(lgbm.max_query_rows), importance_top=int(lgbm.importance_top))
