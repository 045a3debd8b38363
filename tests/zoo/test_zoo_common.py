"""Every zoo family lowers to HLO and trains: a few steps of its own update lower the loss (tiny sizes)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pipeline.zoo.common import Size, example_args, lowered_text, optimizer_init, optimizer_update, train_step
from pipeline.zoo.registry import FAMILIES

TINY = Size(batch=4, width=8, depth=1, extent=8, dtype="f32")
STEPS = 4


FAST_FAMILY = "mlp"          # the fast tier lowers and trains one family; every family runs in the slow tier


@pytest.mark.parametrize("name", [n if n == FAST_FAMILY else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(FAMILIES)])
def test_family_lowers_and_trains(name):
    family = FAMILIES[name]
    params, state, x, y = example_args(family, TINY)
    lowered = jax.jit(train_step(family)).lower(params, state, x, y)
    text = lowered.as_text(dialect="hlo")
    assert text.startswith("HloModule") and ("dot(" in text or "convolution(" in text)
    step = lowered.compile()
    losses = []
    for _ in range(STEPS):
        loss, params, state = step(params, state, x, y)
        losses.append(float(loss))
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses


@pytest.mark.parametrize("name", ["transformer_decoder", "lstm", "depthwise_cnn"])
def test_bf16_variant_lowers_in_bf16(name):
    text = lowered_text(FAMILIES[name], Size(2, 8, 1, 8, "bf16"))
    assert "bf16[" in text


def test_momentum_update_by_hand():
    params, grads = {"w": jnp.array([1.0, 2.0])}, {"w": jnp.array([0.5, -1.0])}
    state = optimizer_init("momentum", params)
    params, state = optimizer_update("momentum", 0.1, params, grads, state)
    params, state = optimizer_update("momentum", 0.1, params, grads, state)
    # v1 = g, v2 = 0.9 g + g = 1.9 g; w = w0 - 0.1 (g + 1.9 g) = w0 - 0.29 g
    np.testing.assert_allclose(params["w"], [1.0 - 0.145, 2.0 + 0.29], rtol=1e-6)


def test_adam_first_step_moves_by_lr_times_sign():
    params, grads = {"w": jnp.array([1.0, 2.0])}, {"w": jnp.array([0.5, -3.0])}
    params, state = optimizer_update("adam", 0.01, params, grads, optimizer_init("adam", params))
    np.testing.assert_allclose(params["w"], [0.99, 2.01], rtol=1e-5)
    assert int(state["t"]) == 1


def test_unknown_optimizer_is_named():
    with pytest.raises(ValueError, match="optimizer"):
        optimizer_init("lion", {"w": jnp.zeros(2)})
