"""How long the GNN trains: the learning-rate schedule and early stopping on the validation metric.

Training runs at most `gnn.epochs` epochs (the budget). After every epoch the collection's validation metric
updates a `Plateau`: an epoch *gains* when its score beats the score of the last gaining epoch by more than
`gnn.min_delta`; training stops once `gnn.patience` epochs in a row did not gain (stop reason `plateau`), or at
the budget (`budget`), but never on an epoch that scores above every earlier one: a run still improving, by less
than min_delta, goes on until an epoch does not, so the selected (best-scoring) epoch is never the last one of a
plateau stop (it was on 8 of 36 members of the default repro, docs/decisions.md). Model selection is separate:
the best-scoring epoch is kept whatever the stop.

The schedule (`gnn.schedule`) must not force a plateau: `cosine` (warm-up, then cosine decay to 0 at the end of
the budget) flattens every curve near the budget whether the model converged or not. `constant` (linear warm-up,
then the peak rate) and `plateau` (the same, multiplied by `gnn.lr_decay` after every `gnn.lr_patience` epochs
without a gain: reduce-on-plateau, driven by the same validation metric) leave the stop to the data.
GST's head fine-tuning runs at `finetune_scale` of the peak.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pipeline.choices import GNN_SCHEDULES

SCHEDULES = GNN_SCHEDULES
STOP_PLATEAU = "plateau"
STOP_BUDGET = "budget"


class LrSchedule:
    """LR factor per optimiser step (a callable object, so LambdaLR checkpoints its state with the optimiser).

    `total_steps` spans the budget; `warmup_frac` of them warm up linearly. Once `finetune` is set (GST's head
    fine-tuning), every step gets `finetune_scale`. `scale` (reduce-on-plateau) multiplies the post-warm-up rate.
    """

    def __init__(self, kind: str, total_steps: int, warmup_frac: float, finetune_scale: float = 0.0) -> None:
        self.kind, self.total_steps, self.finetune_scale = kind, int(total_steps), float(finetune_scale)
        self.warmup = max(1, int(round(total_steps * warmup_frac)))
        self.finetune = False
        self.scale = 1.0

    def reduce(self, plateau: "Plateau", lr_patience: int, lr_decay: float) -> bool:
        """`plateau` schedule: multiply the rate by lr_decay when the stall reaches a multiple of lr_patience
        epochs; returns whether it did."""
        if self.kind != "plateau" or plateau.stall == 0 or plateau.stall % lr_patience:
            return False
        self.scale *= lr_decay
        return True

    def __call__(self, step: int) -> float:
        if self.finetune:
            return self.finetune_scale
        if step < self.warmup:
            return (step + 1) / self.warmup
        if self.kind != "cosine":
            return self.scale
        progress = min(1.0, (step - self.warmup) / max(1, self.total_steps - self.warmup))
        return 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass
class Plateau:
    """Early-stopping state: the score of the last gaining epoch, how many epochs since did not gain, and the best
    score so far."""

    patience: int                    # epochs without a gain that end training
    min_delta: float                 # a gain beats the reference score by more than this
    reference: float = -math.inf     # score of the last gaining epoch
    stall: int = 0                   # epochs since then
    best: float = -math.inf          # highest score so far (a new one defers the stop)

    def update(self, score: float) -> bool:
        """Record one epoch's validation score; True when training should stop (a NaN score never gains,
        so training without valid graphs runs to the budget: see `stop_reason`). An epoch scoring above every
        earlier one never stops training, even when it gains less than min_delta."""
        new_best = not math.isnan(score) and score > self.best
        if new_best:
            self.best = score
        if not math.isnan(score) and score > self.reference + self.min_delta:
            self.reference, self.stall = score, 0
        else:
            self.stall += 1
        return self.stall >= self.patience and not math.isinf(self.reference) and not new_best

    def state_dict(self) -> dict:
        return {"reference": self.reference, "stall": self.stall, "best": self.best}

    def load_state_dict(self, state: dict) -> None:
        self.reference, self.stall = float(state["reference"]), int(state["stall"])
        self.best = float(state.get("best", self.reference))   # checkpoints written before `best` existed


def stop_reason(plateau: Plateau, score: float, epoch: int, budget: int) -> str | None:
    """After epoch `epoch` (0-based) of a `budget`-epoch run: `plateau`, `budget` or None (go on)."""
    if plateau.update(score):
        return STOP_PLATEAU
    return STOP_BUDGET if epoch + 1 >= budget else None

