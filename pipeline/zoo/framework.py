"""Families written in other frameworks' conventions, for extra train programs (`data.generator.extra_programs`).

The core families (cnn, transformer, recurrent) follow JAX/TensorFlow conventions: NHWC activations and HWIO
kernels, attention through dense layers over [batch, seq, width]. Real programs also come from PyTorch (NCHW
activations, OIHW kernels, strided convolutions for downsampling), from vision Transformers (a strided patch
convolution, then attention as 4-d einsums over [batch, seq, heads, head_dim]) and from sequence models built of
1-d convolutions (NCW, dilated). Each dimension order gives the compiler other default layouts and the layout
cost model other choices, so these families widen what a model trains on. They are not in the built-in presets'
rotation (valid and test hold the core families only): `pipeline.zoo.registry.extra_programs` adds them to train.

Sizes: `width` channels (model dim), `depth` blocks, `extent` the image side (the 1-d signal: STEPS_PER_EXTENT x it).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from pipeline.zoo.cnn import image_data
from pipeline.zoo.common import Family, Size, dense, dense_init, softmax_xent
from pipeline.zoo.transformer import MLP_RATIO, layer_norm, ln_init

CLASSES, IMAGE_CHANNELS, PATCH, HEAD_DIM, DILATIONS = 10, 3, 4, 8, (1, 2, 4)
STEPS_PER_EXTENT = 4          # temporal_cnn: sequence length = 4 x extent (a 1-d signal is longer than an image side)
NCHW = ("NCHW", "OIHW", "NCHW")
NCW = ("NCH", "OIH", "NCH")


def oihw_init(key, k: int, cin: int, cout: int, dtype) -> jax.Array:
    """OIHW kernel [cout, cin, k, k], He-normal."""
    return (jax.random.normal(key, (cout, cin, k, k), jnp.float32) * jnp.sqrt(2.0 / (k * k * cin))).astype(dtype)


def conv_nchw(x: jax.Array, w: jax.Array, stride: int = 1) -> jax.Array:
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=NCHW)


def nchw_data(key, s: Size) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (s.batch, IMAGE_CHANNELS, s.extent, s.extent), jnp.float32).astype(s.jnp_dtype)
    return x, jax.random.randint(ky, (s.batch,), 0, CLASSES)


# -- nchw_cnn: a PyTorch-style ResNet: NCHW / OIHW, each block 3x3 -> 3x3; every second block halves the resolution
# with stride 2 instead of pooling (while the side exceeds 2), its shortcut a strided 1x1 convolution
def nchw_strides(s: Size) -> list[int]:
    """Each block's stride: 2 on every second block while the image side it receives exceeds 2, else 1."""
    strides, side = [], s.extent
    for i in range(s.depth):
        strides.append(2 if i % 2 == 1 and side > 2 else 1)
        side = -(-side // strides[-1])                                   # "SAME" padding: ceil(side / stride)
    return strides


def nchw_init(key, s: Size) -> dict:
    keys = jax.random.split(key, 3 * s.depth + 2)
    blocks = [{"a": oihw_init(keys[3 * i], 3, s.width, s.width, s.jnp_dtype),
               "b": oihw_init(keys[3 * i + 1], 3, s.width, s.width, s.jnp_dtype),
               **({"short": oihw_init(keys[3 * i + 2], 1, s.width, s.width, s.jnp_dtype)} if stride > 1 else {})}
              for i, stride in enumerate(nchw_strides(s))]
    return {"stem": oihw_init(keys[-2], 3, IMAGE_CHANNELS, s.width, s.jnp_dtype), "blocks": blocks,
            "head": dense_init(keys[-1], s.width, CLASSES, s.jnp_dtype)}


def nchw_loss(params, x, labels):
    h = jax.nn.relu(conv_nchw(x, params["stem"]))                        # [batch, width, side, side]
    for b in params["blocks"]:
        stride = 2 if "short" in b else 1                                # nchw_strides decided it
        inner = conv_nchw(jax.nn.relu(conv_nchw(h, b["a"], stride)), b["b"])
        h = jax.nn.relu(inner + (conv_nchw(h, b["short"], stride) if stride > 1 else h))
    return softmax_xent(dense(params["head"], jnp.mean(h, axis=(2, 3))), labels)


# -- vit: a strided PATCH x PATCH convolution (NHWC) to tokens, pre-LN blocks with attention as 4-d einsums
def vit_heads(width: int) -> tuple[int, int]:
    """(heads, head_dim) of a model width: the most heads, at most width / HEAD_DIM, that divide it (at least one)."""
    heads = max(h for h in range(1, max(1, width // HEAD_DIM) + 1) if width % h == 0)
    return heads, width // heads


def vit_init(key, s: Size) -> dict:
    keys = jax.random.split(key, s.depth + 2)
    heads, head_dim = vit_heads(s.width)
    patch = jax.random.normal(keys[0], (PATCH, PATCH, IMAGE_CHANNELS, s.width), jnp.float32)
    blocks = []
    for k in keys[1:-1]:
        kq, kk, kv, ko, k1, k2 = jax.random.split(k, 6)
        qkv = {n: (jax.random.normal(kn, (s.width, heads, head_dim), jnp.float32) / jnp.sqrt(s.width))
               .astype(s.jnp_dtype) for n, kn in (("q", kq), ("k", kk), ("v", kv))}
        blocks.append({**qkv, "o": (jax.random.normal(ko, (heads, head_dim, s.width), jnp.float32)
                                    / jnp.sqrt(s.width)).astype(s.jnp_dtype),
                       "ln1": ln_init(s.width, s.jnp_dtype), "ln2": ln_init(s.width, s.jnp_dtype),
                       "up": dense_init(k1, s.width, MLP_RATIO * s.width, s.jnp_dtype),
                       "down": dense_init(k2, MLP_RATIO * s.width, s.width, s.jnp_dtype)})
    return {"patch": (patch / jnp.sqrt(PATCH * PATCH * IMAGE_CHANNELS)).astype(s.jnp_dtype), "blocks": blocks,
            "ln": ln_init(s.width, s.jnp_dtype), "head": dense_init(keys[-1], s.width, CLASSES, s.jnp_dtype)}


def vit_attention(p: dict, x: jax.Array) -> jax.Array:
    q, k, v = (jnp.einsum("bsw,whd->bshd", x, p[n]) for n in ("q", "k", "v"))   # [batch, seq, heads, head_dim]
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(q.shape[-1])
    weights = jax.nn.softmax(logits, axis=-1).astype(x.dtype)
    return jnp.einsum("bqhd,hdw->bqw", jnp.einsum("bhqk,bkhd->bqhd", weights, v), p["o"])


def vit_loss(params, x, labels):
    tokens = lax.conv_general_dilated(x, params["patch"], (PATCH, PATCH), "VALID",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))
    h = tokens.reshape(tokens.shape[0], -1, tokens.shape[-1])            # [batch, patches, width]
    for b in params["blocks"]:
        h = h + vit_attention(b, layer_norm(h, b["ln1"]))
        h = h + dense(b["down"], jax.nn.gelu(dense(b["up"], layer_norm(h, b["ln2"]))))
    return softmax_xent(dense(params["head"], jnp.mean(layer_norm(h, params["ln"]), axis=1)), labels)


# -- temporal_cnn: 1-d convolutions over [batch, channels, length] (NCW / OIW), kernel 3, dilations 1, 2, 4, ...
def temporal_init(key, s: Size) -> dict:
    keys = jax.random.split(key, s.depth + 2)
    layers = [(jax.random.normal(k, (s.width, s.width, 3), jnp.float32) * jnp.sqrt(2.0 / (3 * s.width)))
              .astype(s.jnp_dtype) for k in keys[1:-1]]
    stem = jax.random.normal(keys[0], (s.width, IMAGE_CHANNELS, 1), jnp.float32) / jnp.sqrt(IMAGE_CHANNELS)
    return {"stem": stem.astype(s.jnp_dtype), "layers": layers,
            "head": dense_init(keys[-1], s.width, CLASSES, s.jnp_dtype)}


def sequence_data(key, s: Size) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (s.batch, IMAGE_CHANNELS, STEPS_PER_EXTENT * s.extent), jnp.float32).astype(s.jnp_dtype)
    return x, jax.random.randint(ky, (s.batch,), 0, CLASSES)


def temporal_loss(params, x, labels):
    h = lax.conv_general_dilated(x, params["stem"], (1,), "SAME", dimension_numbers=NCW)   # [batch, width, length]
    for i, w in enumerate(params["layers"]):
        d = DILATIONS[i % len(DILATIONS)]
        h = h + jax.nn.relu(lax.conv_general_dilated(h, w, (1,), "SAME", rhs_dilation=(d,), dimension_numbers=NCW))
    return softmax_xent(dense(params["head"], jnp.max(h, axis=2)), labels)


FAMILIES = (
    Family("nchw_cnn", nchw_init, nchw_data, nchw_loss, "momentum", 0.02),
    Family("vit", vit_init, image_data, vit_loss, "adam", 0.003),
    Family("temporal_cnn", temporal_init, sequence_data, temporal_loss, "adam", 0.003),
)
