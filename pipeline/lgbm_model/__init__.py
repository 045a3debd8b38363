"""The LightGBM ranker: ranking data (`rank_data`), training (`train`), the one inference entry point
(`infer`) and feature importance (`importance`), shared by stage `lgbm`, command `predict` and the benchmarks."""
