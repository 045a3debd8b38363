"""Attention and mixing families: Transformer encoder (sequence classification), Transformer decoder (causal
language model) and MLP-Mixer (image classification over patches).

Transformer blocks are pre-LayerNorm: h + attention(ln(h)), then h + mlp(ln(h)) with a 4x GELU MLP; `width`
is the model dimension, split into heads of HEAD_DIM (at least one head); `extent` is the sequence length.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from pipeline.zoo.common import Family, Size, dense, dense_init, softmax_xent

VOCAB, HEAD_DIM, MLP_RATIO, CLASSES = 256, 16, 4, 10
PATCH, IMAGE_CHANNELS = 4, 3


def layer_norm(x: jax.Array, p: dict) -> jax.Array:
    x32 = x.astype(jnp.float32)
    mean = jnp.mean(x32, axis=-1, keepdims=True)
    var = jnp.mean((x32 - mean) ** 2, axis=-1, keepdims=True)
    return ((x32 - mean) * jax.lax.rsqrt(var + 1e-5)).astype(x.dtype) * p["scale"] + p["bias"]


def ln_init(width: int, dtype) -> dict:
    return {"scale": jnp.ones((width,), dtype), "bias": jnp.zeros((width,), dtype)}


def block_init(key, width: int, dtype) -> dict:
    kq, kk, kv, ko, k1, k2 = jax.random.split(key, 6)
    return {"ln1": ln_init(width, dtype), "ln2": ln_init(width, dtype),
            "q": dense_init(kq, width, width, dtype), "k": dense_init(kk, width, width, dtype),
            "v": dense_init(kv, width, width, dtype), "o": dense_init(ko, width, width, dtype),
            "up": dense_init(k1, width, MLP_RATIO * width, dtype), "down": dense_init(k2, MLP_RATIO * width, width, dtype)}


def attention(p: dict, x: jax.Array, causal: bool) -> jax.Array:
    batch, seq, width = x.shape
    heads = max(1, width // HEAD_DIM)

    def split(t):   # [batch, seq, width] -> [batch, heads, seq, width / heads]
        return t.reshape(batch, seq, heads, width // heads).transpose(0, 2, 1, 3)

    q, k, v = split(dense(p["q"], x)), split(dense(p["k"], x)), split(dense(p["v"], x))
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(width // heads)
    if causal:
        logits = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), logits, -1e9)
    weights = jax.nn.softmax(logits, axis=-1).astype(x.dtype)
    out = jnp.einsum("bhqk,bhkd->bhqd", weights, v).transpose(0, 2, 1, 3).reshape(batch, seq, width)  # [b, s, w]
    return dense(p["o"], out)


def block(p: dict, h: jax.Array, causal: bool) -> jax.Array:
    h = h + attention(p, layer_norm(h, p["ln1"]), causal)
    return h + dense(p["down"], jax.nn.gelu(dense(p["up"], layer_norm(h, p["ln2"]))))


def lm_init(key, s: Size) -> dict:
    keys = jax.random.split(key, s.depth + 3)
    embed = (jax.random.normal(keys[0], (VOCAB, s.width), jnp.float32) * 0.02).astype(s.jnp_dtype)
    pos = (jax.random.normal(keys[1], (s.extent, s.width), jnp.float32) * 0.02).astype(s.jnp_dtype)
    return {"embed": embed, "pos": pos, "blocks": [block_init(k, s.width, s.jnp_dtype) for k in keys[3:]],
            "ln": ln_init(s.width, s.jnp_dtype), "head": dense_init(keys[2], s.width, CLASSES, s.jnp_dtype)}


def token_data(key, s: Size) -> tuple[jax.Array, jax.Array]:
    tokens = jax.random.randint(key, (s.batch, s.extent), 0, VOCAB)
    return tokens, (tokens % CLASSES)


def _trunk(params, tokens, causal: bool) -> jax.Array:
    h = params["embed"][tokens] + params["pos"][:tokens.shape[1]]
    for p in params["blocks"]:
        h = block(p, h, causal)
    return layer_norm(h, params["ln"])


def encoder_loss(params, tokens, labels):
    """Sequence classification from the mean token (label = first token's class)."""
    return softmax_xent(dense(params["head"], jnp.mean(_trunk(params, tokens, False), axis=1)), labels[:, 0])


def decoder_init(key, s: Size) -> dict:
    params = lm_init(key, s)
    return {**params, "head": dense_init(jax.random.fold_in(key, 7), s.width, VOCAB, s.jnp_dtype)}


def decoder_loss(params, tokens, _labels):
    """Next-token prediction with a causal mask."""
    logits = dense(params["head"], _trunk(params, tokens[:, :-1], True))
    return softmax_xent(logits, tokens[:, 1:])


# -- MLP-Mixer: patches -> tokens; token-mixing and channel-mixing MLPs
def mixer_init(key, s: Size) -> dict:
    tokens = (s.extent // PATCH) ** 2
    keys = jax.random.split(key, 4 * s.depth + 2)
    blocks = [{"ln1": ln_init(s.width, s.jnp_dtype), "ln2": ln_init(s.width, s.jnp_dtype),
               "tok_up": dense_init(keys[4 * i], tokens, 2 * tokens, s.jnp_dtype),
               "tok_down": dense_init(keys[4 * i + 1], 2 * tokens, tokens, s.jnp_dtype),
               "ch_up": dense_init(keys[4 * i + 2], s.width, MLP_RATIO * s.width, s.jnp_dtype),
               "ch_down": dense_init(keys[4 * i + 3], MLP_RATIO * s.width, s.width, s.jnp_dtype)}
              for i in range(s.depth)]
    return {"patch": dense_init(keys[-2], PATCH * PATCH * IMAGE_CHANNELS, s.width, s.jnp_dtype), "blocks": blocks,
            "ln": ln_init(s.width, s.jnp_dtype), "head": dense_init(keys[-1], s.width, CLASSES, s.jnp_dtype)}


def mixer_data(key, s: Size) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (s.batch, s.extent, s.extent, IMAGE_CHANNELS), jnp.float32).astype(s.jnp_dtype)
    return x, jax.random.randint(ky, (s.batch,), 0, CLASSES)


def mixer_loss(params, x, labels):
    b, side = x.shape[0], x.shape[1] // PATCH
    patches = x.reshape(b, side, PATCH, side, PATCH, IMAGE_CHANNELS).transpose(0, 1, 3, 2, 4, 5)
    h = dense(params["patch"], patches.reshape(b, side * side, -1))   # [batch, tokens, width]
    for p in params["blocks"]:
        t = layer_norm(h, p["ln1"]).transpose(0, 2, 1)                 # [batch, width, tokens]
        h = h + dense(p["tok_down"], jax.nn.gelu(dense(p["tok_up"], t))).transpose(0, 2, 1)
        h = h + dense(p["ch_down"], jax.nn.gelu(dense(p["ch_up"], layer_norm(h, p["ln2"]))))
    return softmax_xent(dense(params["head"], jnp.mean(layer_norm(h, params["ln"]), axis=1)), labels)


FAMILIES = (
    Family("transformer_encoder", lm_init, token_data, encoder_loss, "adam", 0.003),
    Family("transformer_decoder", decoder_init, token_data, decoder_loss, "adam", 0.003),
    Family("mlp_mixer", mixer_init, mixer_data, mixer_loss, "adam", 0.003),
)
