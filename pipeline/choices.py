"""Every closed set of choices a setting may take, declared once, in a module that imports nothing.

The schema (pipeline/settings_schema.py) checks settings against these tuples and the libraries that act on the
choices import the same tuples, so loading a config imports neither torch nor any stage's library and no choice is
spelled twice.
"""
from __future__ import annotations

GNN_NORMS = ("instance", "layer", "none")             # pipeline.graphnet.layers
GNN_MIXERS = ("gate", "center")                       # pipeline.graphnet.attention (MIXERS maps them to modules)
GNN_REDUCTIONS = ("sum", "mean")                      # pipeline.graphnet.model
GNN_LOSSES = ("pairwise_hinge", "listmle")            # pipeline.graphnet.losses
GNN_MODES = ("pruned", "gst")                         # pipeline.graphnet.gst
GNN_SCHEDULES = ("plateau", "constant", "cosine")     # pipeline.graphnet.schedule
GST_SEGMENTATIONS = ("contiguous", "node_splits")     # pipeline.graphnet.segments
GNN_DEVICES = ("auto", "cpu", "cuda")                 # pipeline.graphnet.train_loop.pick_device
VALID_METRICS = ("score", "order")    # per-epoch selection (gnn.valid_metric, pipeline.graphnet.train_loop): the
                                      # collection's own score, or Kendall tau for every kind (the layout score)
PRUNE_WHOLE_GRAPH = "all"                             # prune.hops value that keeps every node (what GST trains on)
PRUNE_DEDUP_MODES = ("min", "mean")                   # pipeline.pruning.dedup
LGBM_NODE_STATS = ("mean", "std", "min", "max")       # pipeline.features.table (NODE_STATS maps them to numpy)
LGBM_GRAPH_GROUPS = ("graph_counts", "opcodes", "node_stats")                        # pipeline.features.table
LGBM_TILE_GROUPS = ("tile_config", "tile_derived", "tile_relative")                  # pipeline.features.tile
LGBM_LAYOUT_GROUPS = ("layout_default", "layout_perm", "layout_disagree", "layout_minor",
                      "layout_top_nodes")                                                  # pipeline.features.layout
LGBM_FEATURE_GROUPS = LGBM_GRAPH_GROUPS + LGBM_TILE_GROUPS + LGBM_LAYOUT_GROUPS
LGBM_LAYOUT_REFERENCES = ("none", "default", "both")  # pipeline.features.table: layout config features as they are, minus
                                                   # the compiler default's, or both side by side
LGBM_OBJECTIVES = ("lambdarank", "rank_xendcg", "pairwise")   # pipeline.lgbm_model.train
LGBM_LABEL_GAINS = ("linear", "exponential")          # pipeline.lgbm_model.train
LIGHTGBM_MAX_QUERY_ROWS = 10000     # LightGBM: "Number of rows ... exceeds upper limit of 10000 for a query"
LIGHTGBM_MAX_LEAVES = 131072       # LightGBM: "Check failed: (num_leaves) <= (131072)"
C_INT_MAX = 2**31 - 1               # LightGBM's integer parameters (and its seed) are C ints
LIGHTGBM_XENDCG_GRADES = 31         # rank_xendcg's gain 2^label is an int: labels 0..30 (pipeline.lgbm_model.train)
ENSEMBLE_WEIGHTINGS = ("grid", "equal")               # pipeline.ensembling.blend
ENSEMBLE_TIE_BREAKS = ("even", "order")               # pipeline.ensembling.blend.choose_weights
ZOO_DTYPES = ("f32", "bf16")                         # pipeline.zoo.common.DTYPES: a size grid's dtypes
SYNTH_BUILDERS = ("programs", "templates")            # pipeline.synthesize: the program zoo, the template generator
AUTOTUNE_MODELS = ("ensemble", "gnn", "lgbm")         # pipeline.tuning.scorers: the guides a search can use
AUTOTUNE_ALGORITHMS = ("evolution", "local", "coordinate", "random")   # pipeline.tuning.search
MODEL_STAGES = ("heuristic", "lgbm", "gnn")           # dvc.yaml's model stages: the ensemble's possible members
MODELS = ("ensemble", *MODEL_STAGES)                  # what predict, submit and summary can name (pipeline.trained)
WORLD_SPREAD_CONSTANTS = ("flops_per_ns", "f32_slowdown", "bytes_per_ns", "op_overhead_ns", "copy_overhead_ns",
                          "launch_overhead_ns", "offpair_penalty")   # synthesize.world.spread: the scalar fields of
                                                                     # pipeline.costmodel.layout.LayoutCostParams
