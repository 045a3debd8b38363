"""The weights' moving average (gnn.ema_epochs): hand-checked updates, the swap in and out, and fit's use of it."""
from __future__ import annotations

import pytest
import torch
from pruned_graphs import gnn_cfg, make_layout_graph, spec_of, train_of
from torch import nn

from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.ema import WeightAverage, step_decay
from pipeline.graphnet.model import build_model
from pipeline.graphnet.train_loop import fit

CPU = torch.device("cpu")


def _scalar_model(value: float) -> nn.Linear:
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(value)
    return model


def test_step_decay_has_a_time_constant_of_ema_epochs():
    assert step_decay(2.0, 50) == pytest.approx(0.99)
    assert step_decay(0.01, 3) == 0.0            # under one step: no averaging


def test_updates_follow_the_warm_up_then_the_decay():
    model = _scalar_model(0.0)
    ema = WeightAverage(model, decay=0.5)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema.update(model)                 # d_0 = min(0.5, 1/10) = 0.1: 0 + 0.9 * (1 - 0) = 0.9
    assert ema.shadow["weight"].item() == pytest.approx(0.9)
    with torch.no_grad():
        model.weight.fill_(2.0)
    ema.update(model)                 # d_1 = min(0.5, 2/11): 0.9 + 9/11 * (2 - 0.9) = 1.8
    assert ema.shadow["weight"].item() == pytest.approx(1.8)
    for _ in range(20):               # d_n reaches the decay 0.5 from n = 8 on
        ema.update(model)
    assert ema.current_decay() == 0.5
    assert ema.shadow["weight"].item() == pytest.approx(2.0, abs=1e-5)


def test_applied_swaps_the_average_in_and_the_trained_weights_back():
    model = _scalar_model(0.0)
    ema = WeightAverage(model, decay=0.9)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema.update(model)
    with ema.applied(model):
        assert model.weight.item() == pytest.approx(0.9)
    assert model.weight.item() == 1.0
    with pytest.raises(RuntimeError):
        with ema.applied(model):
            raise RuntimeError("validation failed")
    assert model.weight.item() == 1.0            # restored after an error too


def _train(tmp_path, gnn, valid=True, max_epochs=None):
    train = [make_layout_graph(f"g{i}", n_configs=10, seed=i) for i in range(3)]
    valids = [make_layout_graph("v0", "valid", n_configs=9, seed=7)] if valid else []
    spec = spec_of(gnn, "layout")
    torch.manual_seed(0)
    return fit(build_model(spec), spec, train, valids, train_of(gnn), None, seed=5,
               checkpoint_path=tmp_path / "checkpoint.pt", device=CPU, max_epochs=max_epochs)


def test_fit_keeps_the_averaged_weights_not_the_last_steps(tmp_path):
    result = _train(tmp_path, gnn_cfg(ema_epochs=1.0), valid=False)   # no valid graphs: the last epoch is kept
    state = ckpt.load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["ema"]["updates"] == 4 * 2                          # 4 epochs of 2 steps (3 graphs, 2 per step)
    differs = 0
    for name, avg in state["ema"]["shadow"].items():
        assert torch.equal(result.best_state[name], avg), name
        differs += not torch.equal(avg, state["model"][name])
    assert differs > 0                                                # the average is not the trained weights


def test_resume_with_ema_matches_uninterrupted(tmp_path):
    full = _train(tmp_path / "a", gnn_cfg(ema_epochs=1.0))
    _train(tmp_path / "b", gnn_cfg(ema_epochs=1.0), max_epochs=2)
    resumed = _train(tmp_path / "b", gnn_cfg(ema_epochs=1.0, resume=True))
    assert [r["valid_score"] for r in full.curve] == [r["valid_score"] for r in resumed.curve]
    for name, value in full.best_state.items():
        assert torch.equal(value, resumed.best_state[name]), name


def test_resume_without_ema_state_is_refused(tmp_path):
    _train(tmp_path, gnn_cfg(), max_epochs=1)
    with pytest.raises(ValueError, match=r"checkpoint of another run \(gnn.ema_epochs None -> 1.0\); delete it"):
        _train(tmp_path, gnn_cfg(ema_epochs=1.0, resume=True))
