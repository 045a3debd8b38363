"""The TPU-inspired cost models that label the built-in data: layout.py, tile.py (docs/cost-model.md)."""
