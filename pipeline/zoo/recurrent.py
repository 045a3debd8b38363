"""Sequence and dense families: an Elman RNN and an LSTM over `extent` time steps (`lax.scan`, so the HLO holds
a while loop), and a plain MLP.

The recurrent models read random feature vectors of FEATURES per step and classify the sequence from the last
hidden state; the MLP classifies random vectors of FEATURES through `depth` hidden layers of `width`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from pipeline.zoo.common import Family, Size, dense, dense_init, softmax_xent

FEATURES, CLASSES = 16, 10


def sequence_data(key, s: Size) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (s.extent, s.batch, FEATURES), jnp.float32).astype(s.jnp_dtype)   # time-major
    return x, jax.random.randint(ky, (s.batch,), 0, CLASSES)


def rnn_init(key, s: Size, gates: int = 1) -> dict:
    keys = jax.random.split(key, 2 * s.depth + 1)
    layers = [{"x": dense_init(keys[2 * i], FEATURES if i == 0 else s.width, gates * s.width, s.jnp_dtype),
               "h": dense_init(keys[2 * i + 1], s.width, gates * s.width, s.jnp_dtype)} for i in range(s.depth)]
    return {"layers": layers, "head": dense_init(keys[-1], s.width, CLASSES, s.jnp_dtype)}


def rnn_loss(params, x, labels):
    seq = x
    for p in params["layers"]:
        def cell(h, x_t, p=p):
            h = jnp.tanh(dense(p["x"], x_t) + h @ p["h"]["w"])
            return h, h
        h0 = jnp.zeros((x.shape[1], p["h"]["w"].shape[0]), x.dtype)
        _, seq = lax.scan(cell, h0, seq)
    return softmax_xent(dense(params["head"], seq[-1]), labels)


def lstm_init(key, s: Size) -> dict:
    return rnn_init(key, s, gates=4)


def lstm_loss(params, x, labels):
    seq = x
    for p in params["layers"]:
        def cell(carry, x_t, p=p):
            h, c = carry
            i, f, g, o = jnp.split(dense(p["x"], x_t) + h @ p["h"]["w"], 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        width = p["h"]["w"].shape[0]
        zeros = jnp.zeros((x.shape[1], width), x.dtype)
        _, seq = lax.scan(cell, (zeros, zeros), seq)
    return softmax_xent(dense(params["head"], seq[-1]), labels)


def mlp_init(key, s: Size) -> dict:
    keys = jax.random.split(key, s.depth + 1)
    widths = [FEATURES * s.extent] + [s.width] * s.depth
    return {"layers": [dense_init(k, a, b, s.jnp_dtype) for k, a, b in zip(keys, widths, widths[1:])],
            "head": dense_init(keys[-1], s.width, CLASSES, s.jnp_dtype)}


def mlp_data(key, s: Size) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (s.batch, FEATURES * s.extent), jnp.float32).astype(s.jnp_dtype)
    return x, jax.random.randint(ky, (s.batch,), 0, CLASSES)


def mlp_loss(params, x, labels):
    h = x
    for p in params["layers"]:
        h = jax.nn.relu(dense(p, h))
    return softmax_xent(dense(params["head"], h), labels)


FAMILIES = (
    Family("rnn", rnn_init, sequence_data, rnn_loss, "momentum", 0.02),
    Family("lstm", lstm_init, sequence_data, lstm_loss, "adam", 0.003),
    Family("mlp", mlp_init, mlp_data, mlp_loss, "momentum", 0.02),
)
