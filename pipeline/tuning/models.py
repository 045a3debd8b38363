"""The one place autotune imports from stage and tool modules (issue 25 moves their functions into packages;
repoint these imports when it does). Everything else in `pipeline.tuning` imports packages only."""
from __future__ import annotations

from pipeline.gnn import gst_settings
from pipeline.featurize import program_stem
from pipeline.heuristic import default_block_counts, tile_scores as heuristic_tile_scores
from pipeline.lgbm import predict_graph as lgbm_predict_graph
from pipeline.predict import STAGE_OUTPUT_PATHS, PredictError, ensemble_weights, prune_new_graph

__all__ = ["program_stem", "heuristic_tile_scores", "STAGE_OUTPUT_PATHS", "gst_settings", "default_block_counts",
           "lgbm_predict_graph", "PredictError", "ensemble_weights", "prune_new_graph"]
