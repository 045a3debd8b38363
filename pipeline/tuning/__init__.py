"""Autotune: search a program's layout (and tile) configuration space with a trained model as the objective.

- `space`: the configuration space (per configurable node and block: compiler default or a minor-to-major
  permutation), candidates as choice indices, their `node_config_feat` rows and their JSON layouts;
- `search`: model-guided search (evolution, local search, coordinate descent, random baseline) and the guard rule;
- `chain`: guarded steps (`autotune.guard.chain`): moves from the default, each kept by the guard from where it starts;
- `guard`: the guard's margin and region, measured on the valid split by stage autotune (the file the tool reads);
- `scorers`: the objective adapters (GNN / LightGBM / ensemble of the current `data=`), calibrated on valid to
  predicted log runtime ratios against the compiler default;
- `oracle`: the true cost model (`pipeline.costmodel`) as the objective, for verification on built-in programs;
- `program`: HLO text -> the graphs the models read; `tiles`: per fused kernel, every tile size scored;
- `report`: the JSON the tool writes and the stage's metrics; `verify`, `verify_tiles`: stage autotune's checks of
  the layout and tile picks with the cost model.
"""
