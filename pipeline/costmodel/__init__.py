"""The TPU-inspired cost models that label the built-in data: layout.py, tile.py (docs/cost-model.md)."""
from __future__ import annotations

from typing import Mapping, Sequence, TypeVar

P = TypeVar("P")


def params_from_cfg(cls: type[P], cfg: Mapping) -> P:
    """A frozen parameter dataclass from its config section; lists become tuples."""
    return cls(**{k: tuple(v) if isinstance(v, Sequence) and not isinstance(v, str) else v
                  for k, v in dict(cfg).items()})
