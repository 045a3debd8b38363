"""The pieces autotune shares with the other tools and the stages, imported in one place from their libraries."""
from __future__ import annotations

from pipeline.config import STAGE_OUTPUT_PATHS
from pipeline.featurizer.dataset import program_stem
from pipeline.graphnet.gst import gst_settings
from pipeline.heuristic_model.scores import default_block_counts, tile_scores as heuristic_tile_scores
from pipeline.lgbm_model.infer import predict_graph as lgbm_predict_graph
from pipeline.trained import PredictError, ensemble_weights, prune_new_graph

__all__ = ["program_stem", "heuristic_tile_scores", "STAGE_OUTPUT_PATHS", "gst_settings", "default_block_counts",
           "lgbm_predict_graph", "PredictError", "ensemble_weights", "prune_new_graph"]
