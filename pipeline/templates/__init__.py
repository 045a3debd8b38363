"""The template generator: synthetic layout graphs from hand-written templates (`graphs`) and fused tile kernels
(`tiles`), written as a whole dataset (`dataset`); used by `data=synthetic_full` and the benchmarks, apart from the
program zoo (`pipeline.synth`)."""
