"""The LightGBM ranker's settings for one collection, resolved once by the config layer
(`pipeline.settings.lgbm.lgbm_settings`): stage lgbm, the inference entry point and the tools pass it down."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.features.table import FeatureSpec


@dataclass(frozen=True)
class LgbmSettings:
    """The `lgbm` group with `lgbm.<kind>` picked for the collection's kind (tile or layout)."""

    kind: str                         # the collection's kind: which `lgbm.<kind>` entry this holds
    features: FeatureSpec             # the feature table (groups, node statistics, chunk)
    objective: str                    # lgbm.<kind>.objective: lambdarank | rank_xendcg | pairwise
    label_grades: int                 # relevance grades of the runtime quantiles
    label_gain: str                   # linear | exponential
    lambdarank_truncation_level: int
    configs_per_graph: int            # train configs sampled per graph (0 = all)
    valid_configs_per_graph: int      # valid configs sampled per graph (0 = all)
    num_leaves: int
    learning_rate: float
    min_data_in_leaf: int
    feature_fraction: float
    bagging_fraction: float
    bagging_freq: int
    lambda_l2: float
    max_bin: int
    num_threads: int
    eval_metric: str                  # score (the collection's own, a custom eval) | order (Kendall tau) | ndcg
    eval_at: tuple[int, ...]          # ndcg@k
    num_boost_round: int              # the budget
    early_stopping_rounds: int        # the patience
    max_query_rows: int               # most rows of one LightGBM query
    importance_top: int               # features drawn in the importance plot
