"""Blending model predictions (`blend`): normalisation, weights and the blend itself, shared by stage `ensemble`
and the tools that rank with the ensemble."""
