"""Each stage's settings, resolved once: one builder per stage group, `<group>_settings(cfg, collection)`.

A builder is the one place that reads a stage's config group: it picks the by-search values (`gnn.lr`,
`prune.hops`, ... through `pipeline.config.by_search`) for the collection and returns one frozen, typed object that
the stage module passes down; the libraries take these objects and never see a DictConfig. The values were checked
once, by the schema (pipeline/settings_schema.py), when the config loaded, so the builders check nothing.

- `pipeline.settings.prune.prune_settings` -> `pipeline.pruning.params.PruneParams` (stage prune, the tools' pruning
  of a new graph);
- `pipeline.settings.gnn.gnn_settings` -> `pipeline.graphnet.settings.GnnSettings` (stage gnn, its inference entry
  point for the tools);
- `pipeline.settings.lgbm.lgbm_settings` -> `pipeline.lgbm_model.settings.LgbmSettings` (stage lgbm, its inference
  entry point for the tools);
- `pipeline.settings.programs.program_settings` / `pipeline.settings.templates.template_settings` ->
  `ProgramSettings` / `templates.dataset.Settings` (stage synthesize, by generator builder; autotune's programs);
- `pipeline.settings.featurize.featurize_settings` -> `FeaturizeSettings` (commands featurize and predict);
- `pipeline.settings.sections`: the sections those share (layout search, cost models, tile search).

The modules import nothing here, so a stage that imports one builder depends on that builder only.
"""
