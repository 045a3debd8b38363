"""An exponential moving average of the model's weights (`gnn.ema_epochs`), validated and kept in place of the raw
weights.

With few train graphs an optimiser step moves the weights by the noise of one graph's sampled configurations, and
the raw weights' valid score jumps from epoch to epoch; the reduce-on-plateau schedule then decays the rate on
those dips. The average over the last ~`ema_epochs` epochs of steps smooths both the weights and the curve.

Contract: after every optimiser step `update(model)` moves each floating-point parameter's average towards the
parameter, `avg <- avg + (1 - d_n) * (param - avg)`, where `d_n = min(decay, (1 + n) / (10 + n))` for the n-th
update (so the first updates follow the fast-moving early weights) and `decay = 1 - 1 / (ema_epochs *
steps_per_epoch)` (a time constant of `ema_epochs` epochs). `applied(model)` puts the averages into the model for
the duration of a `with` block (validation, model selection) and restores the trained weights after it. Buffers
and non-float parameters are not averaged. The state (averages, n; not the decay, which the settings give) is part
of the checkpoint.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

WARMUP_OFFSET = 10      # d_n = (1 + n) / (WARMUP_OFFSET + n) while below the decay


def step_decay(ema_epochs: float, steps_per_epoch: int) -> float:
    """The per-step decay whose time constant is `ema_epochs` epochs of `steps_per_epoch` steps."""
    return 1.0 - 1.0 / max(1.0, float(ema_epochs) * steps_per_epoch)


class WeightAverage:
    """Exponential moving averages of a model's floating-point parameters (see the module docstring)."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay must be in [0, 1), got {decay}")
        self.decay = float(decay)
        self.updates = 0
        self.shadow = {name: p.detach().clone() for name, p in model.named_parameters() if p.is_floating_point()}

    def current_decay(self) -> float:
        """d_n of the next update."""
        return min(self.decay, (1.0 + self.updates) / (WARMUP_OFFSET + self.updates))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move every average towards its parameter (call after each optimiser step)."""
        weight = 1.0 - self.current_decay()
        for name, p in model.named_parameters():
            if name in self.shadow:
                self.shadow[name].lerp_(p.detach(), weight)
        self.updates += 1

    @contextmanager
    def applied(self, model: nn.Module) -> Iterator[nn.Module]:
        """The model with the averaged weights inside the block; the trained weights are restored after it."""
        params = dict(model.named_parameters())
        saved = {name: params[name].detach().clone() for name in self.shadow}
        with torch.no_grad():
            for name, avg in self.shadow.items():
                params[name].copy_(avg)
        try:
            yield model
        finally:
            with torch.no_grad():
                for name, value in saved.items():
                    params[name].copy_(value)

    def state_dict(self) -> dict:
        return {"updates": self.updates, "shadow": {k: v.detach().cpu().clone() for k, v in self.shadow.items()}}

    def load_state_dict(self, state: dict) -> None:
        if set(state["shadow"]) != set(self.shadow):
            raise ValueError("EMA state holds other parameters than the model")
        self.updates = int(state["updates"])      # the decay comes from the settings, as at the start
        for name, value in state["shadow"].items():
            self.shadow[name].copy_(value)
