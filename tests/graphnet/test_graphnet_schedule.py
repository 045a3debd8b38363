"""LR schedules and early stopping on hand-made validation curves, and on a tiny model trained by `fit`."""
from __future__ import annotations

import math

import pytest
import torch
from pruned_graphs import gnn_cfg, make_layout_graph, spec_of, train_of

from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.model import build_model
from pipeline.graphnet.schedule import STOP_BUDGET, STOP_PLATEAU, LrSchedule, Plateau, stop_reason
from pipeline.graphnet.train_loop import fit


def replay(scores: list[float], patience: int, min_delta: float, budget: int) -> tuple[int, str]:
    """(last epoch, stop reason) of a run whose validation curve is `scores` (what `fit` would do)."""
    plateau = Plateau(patience, min_delta)
    for epoch, score in enumerate(scores[:budget]):
        reason = stop_reason(plateau, score, epoch, budget)
        if reason is not None:
            return epoch, reason
    raise ValueError(f"a curve of {len(scores)} epochs neither plateaus nor reaches the budget of {budget}")


def test_cosine_decays_to_zero_at_the_budget_and_constant_stays_at_the_peak():
    cosine, constant = LrSchedule("cosine", 100, 0.1), LrSchedule("constant", 100, 0.1)
    for f in (cosine, constant):
        assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0) and f(10) == pytest.approx(1.0)
    assert cosine(55) == pytest.approx(0.5) and cosine(100) == pytest.approx(0.0)
    assert constant(55) == 1.0 and constant(100) == 1.0 and constant(10_000) == 1.0
    constant.finetune, constant.finetune_scale = True, 0.25            # GST head fine-tuning
    assert constant(3) == 0.25


def test_reduce_on_plateau_decays_the_rate_every_lr_patience_stalled_epochs():
    schedule, plateau = LrSchedule("plateau", 100, 0.1), Plateau(patience=10, min_delta=0.0)
    decays = []
    for score in (0.5, 0.4, 0.4, 0.6, 0.3, 0.3, 0.3, 0.3):   # stalls 0 1 2 0 1 2 3 4
        plateau.update(score)
        decays.append(schedule.reduce(plateau, lr_patience=2, lr_decay=0.5))
    assert decays == [False, False, True, False, False, True, False, True]
    assert schedule.scale == 0.125 and schedule(50) == 0.125 and schedule(0) == pytest.approx(0.1)   # warm-up
    cosine = LrSchedule("cosine", 100, 0.1)
    assert not cosine.reduce(plateau, lr_patience=1, lr_decay=0.5) and cosine.scale == 1.0


def test_a_plateau_stops_after_patience_epochs_without_a_gain_above_min_delta():
    # gains at epochs 0, 1, 3 (0.5 -> 0.6 -> 0.7); 0.705 and 0.709 are within min_delta=0.01 of 0.7
    curve = [0.5, 0.6, 0.55, 0.7, 0.705, 0.709, 0.69, 0.8]
    assert replay(curve, patience=3, min_delta=0.01, budget=10) == (6, STOP_PLATEAU)
    assert replay(curve, patience=3, min_delta=0.0, budget=8) == (7, STOP_BUDGET)      # 0.705, 0.709 gain too
    # patience 4 outlasts epochs 4-6; 0.8 gains at epoch 7, then 4 stalled epochs end the run at epoch 11
    assert replay(curve + [0.79] * 6, patience=4, min_delta=0.01, budget=20) == (11, STOP_PLATEAU)


def test_an_epoch_above_every_earlier_one_never_stops_training():
    # gain at epoch 1 (0.6); epochs 2-4 gain less than min_delta, so epoch 4 is the third stalled epoch, but it is
    # the best so far (0.603): training goes on, and 0.59 at epoch 5 ends it
    curve = [0.5, 0.6, 0.601, 0.602, 0.603, 0.59]
    assert replay(curve, patience=3, min_delta=0.01, budget=10) == (5, STOP_PLATEAU)
    # a tie with the best is no new best: the stop comes at the third stalled epoch
    assert replay([0.5, 0.6, 0.6, 0.6, 0.6], patience=3, min_delta=0.01, budget=10) == (4, STOP_PLATEAU)
    # a still rising run ends at the budget
    assert replay([0.5, 0.6, 0.601, 0.602, 0.603, 0.604], patience=3, min_delta=0.01, budget=6) == (5, STOP_BUDGET)


def test_the_budget_stops_a_curve_that_still_rises():
    assert replay([0.1, 0.2, 0.3, 0.4], patience=2, min_delta=0.0, budget=3) == (2, STOP_BUDGET)
    with pytest.raises(ValueError, match="neither plateaus nor reaches the budget of 9"):
        replay([0.1, 0.2], patience=5, min_delta=0.0, budget=9)


def test_without_valid_graphs_training_runs_to_the_budget():
    plateau = Plateau(patience=1, min_delta=0.0)
    assert not any(plateau.update(math.nan) for _ in range(5)) and plateau.stall == 5


def test_plateau_state_round_trips():
    a = Plateau(3, 0.0)
    a.update(0.4), a.update(0.3)
    b = Plateau(3, 0.0)
    b.load_state_dict(a.state_dict())
    assert (b.reference, b.stall, b.best) == (0.4, 1, 0.4) and b.update(0.2) == a.update(0.2) == False   # noqa: E712
    assert b.update(0.1) and a.update(0.1)


def _fit(tmp_path, gnn, max_epochs=None):
    train = [make_layout_graph(f"g{i}", n_configs=10, seed=i) for i in range(3)]
    valid = [make_layout_graph("v0", "valid", n_configs=9, seed=7)]
    spec = spec_of(gnn)
    torch.manual_seed(0)
    return fit(build_model(spec), spec, train, valid, train_of(gnn), None, seed=5,
               checkpoint_path=tmp_path / "checkpoint.pt", device=torch.device("cpu"), max_epochs=max_epochs)


def test_fit_stops_on_a_plateau_and_records_why(tmp_path):
    """lr=0: the valid score never changes, so with patience 2 the run ends after epoch 2 (gain at 0, stall 1, 2);
    the tied epochs select the last one."""
    result = _fit(tmp_path, gnn_cfg(lr=0.0, epochs=50, patience=2, min_delta=0.0, dropout=0.0))
    assert (result.stopped, result.last_epoch, len(result.curve), result.best_epoch) == (STOP_PLATEAU, 2, 3, 2)
    state = ckpt.load_checkpoint(tmp_path / "checkpoint.pt")
    assert (state["stopped"], state["epoch"], state["main_epochs"]) == (STOP_PLATEAU, 2, 3)


def test_fit_reduces_the_rate_on_a_plateau(tmp_path):
    """schedule=plateau, lr_patience 1: each stalled epoch halves the rate; the curve's lr column shows it."""
    result = _fit(tmp_path, gnn_cfg(lr=0.0, epochs=50, patience=3, min_delta=0.0, dropout=0.0, schedule="plateau",
                                   lr_patience=1, warmup_frac=0.0))
    assert result.stopped == STOP_PLATEAU and len(result.curve) == 4
    state = ckpt.load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["scheduler"]["lr_lambdas"][0]["scale"] == 0.125        # halved after epochs 1, 2 and 3


def test_fit_stops_at_the_budget_and_a_resume_continues_the_stopper(tmp_path):
    result = _fit(tmp_path / "a", gnn_cfg(epochs=3, patience=100))
    assert (result.stopped, result.last_epoch, len(result.curve)) == (STOP_BUDGET, 2, 3)
    _fit(tmp_path / "b", gnn_cfg(lr=0.0, epochs=50, patience=2, min_delta=0.0, dropout=0.0), max_epochs=2)
    resumed = _fit(tmp_path / "b", gnn_cfg(lr=0.0, epochs=50, patience=2, min_delta=0.0, dropout=0.0, resume=True))
    assert (resumed.stopped, resumed.last_epoch, len(resumed.curve)) == (STOP_PLATEAU, 2, 3)
    again = _fit(tmp_path / "b", gnn_cfg(lr=0.0, epochs=50, patience=2, min_delta=0.0, dropout=0.0, resume=True))
    assert again.curve == resumed.curve and again.last_epoch == 2          # a finished run trains no further epoch
