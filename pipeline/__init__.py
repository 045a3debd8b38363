"""tpugraphs-pipeline: learned cost models that rank XLA compiler configurations (TpuGraphs)."""
