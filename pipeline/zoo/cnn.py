"""Convolutional families (NHWC activations, HWIO kernels): plain, residual, depthwise-separable and
multi-branch (Inception-like) classifiers, and a U-Net trained on per-pixel regression.

Classifiers: a stem convolution to `width` channels, `depth` blocks (every second one halves the resolution),
global average pooling and a dense head over CLASSES classes. Images are `extent` x `extent` x IMAGE_CHANNELS.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pipeline.zoo.common import Family, Size, dense, dense_init, softmax_xent

CLASSES, IMAGE_CHANNELS = 10, 3
DIMS = ("NHWC", "HWIO", "NHWC")


def conv_init(key, k: int, cin: int, cout: int, dtype, groups: int = 1) -> jax.Array:
    """HWIO kernel [k, k, cin / groups, cout], He-normal."""
    w = jax.random.normal(key, (k, k, cin // groups, cout), jnp.float32) * jnp.sqrt(2.0 / (k * k * cin // groups))
    return w.astype(dtype)


def conv(x: jax.Array, w: jax.Array, stride: int = 1, groups: int = 1) -> jax.Array:
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=DIMS,
                                    feature_group_count=groups)


def avg_pool(x: jax.Array) -> jax.Array:
    """2x2 average pooling, stride 2 (a reduce-window)."""
    return lax.reduce_window(x, np.zeros((), x.dtype), lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4


def max_pool3(x: jax.Array) -> jax.Array:
    return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")


def image_data(key, s: Size) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (s.batch, s.extent, s.extent, IMAGE_CHANNELS), jnp.float32).astype(s.jnp_dtype)
    return x, jax.random.randint(ky, (s.batch,), 0, CLASSES)


def _head_init(key, s: Size, blocks) -> dict:
    k_stem, k_head = jax.random.split(key)
    return {"stem": conv_init(k_stem, 3, IMAGE_CHANNELS, s.width, s.jnp_dtype), "blocks": blocks,
            "head": dense_init(k_head, s.width, CLASSES, s.jnp_dtype)}


def _classify(params, x, labels, block_fn) -> jax.Array:
    h = jax.nn.relu(conv(x, params["stem"]))
    for i, block in enumerate(params["blocks"]):
        h = block_fn(block, h)
        if i % 2 == 1 and h.shape[1] > 2:
            h = avg_pool(h)
    return softmax_xent(dense(params["head"], jnp.mean(h, axis=(1, 2))), labels)


# -- plain: conv 3x3 + relu
def plain_init(key, s: Size) -> dict:
    keys = jax.random.split(key, s.depth + 1)
    return _head_init(keys[0], s, [conv_init(k, 3, s.width, s.width, s.jnp_dtype) for k in keys[1:]])


def plain_loss(params, x, labels):
    return _classify(params, x, labels, lambda w, h: jax.nn.relu(conv(h, w)))


# -- residual: relu(h + conv(relu(conv(h))))
def residual_init(key, s: Size) -> dict:
    keys = jax.random.split(key, 2 * s.depth + 1)
    blocks = [{"a": conv_init(keys[2 * i + 1], 3, s.width, s.width, s.jnp_dtype),
               "b": conv_init(keys[2 * i + 2], 3, s.width, s.width, s.jnp_dtype)} for i in range(s.depth)]
    return _head_init(keys[0], s, blocks)


def residual_loss(params, x, labels):
    return _classify(params, x, labels, lambda b, h: jax.nn.relu(h + conv(jax.nn.relu(conv(h, b["a"])), b["b"])))


# -- depthwise-separable: depthwise 3x3 (one group per channel) then pointwise 1x1
def depthwise_init(key, s: Size) -> dict:
    keys = jax.random.split(key, 2 * s.depth + 1)
    blocks = [{"dw": conv_init(keys[2 * i + 1], 3, s.width, s.width, s.jnp_dtype, groups=s.width),
               "pw": conv_init(keys[2 * i + 2], 1, s.width, s.width, s.jnp_dtype)} for i in range(s.depth)]
    return _head_init(keys[0], s, blocks)


def depthwise_loss(params, x, labels):
    def block(b, h):
        return jax.nn.relu(conv(jax.nn.relu(conv(h, b["dw"], groups=h.shape[-1])), b["pw"]))
    return _classify(params, x, labels, block)


# -- multi-branch: 1x1 | 3x3 | 5x5 | maxpool+1x1, concatenated back to width channels
def multibranch_init(key, s: Size) -> dict:
    quarter = s.width // 4
    blocks = []
    for k in jax.random.split(key, s.depth):
        k1, k3, k5, kp = jax.random.split(k, 4)
        blocks.append({"b1": conv_init(k1, 1, s.width, quarter, s.jnp_dtype),
                       "b3": conv_init(k3, 3, s.width, quarter, s.jnp_dtype),
                       "b5": conv_init(k5, 5, s.width, quarter, s.jnp_dtype),
                       "bp": conv_init(kp, 1, s.width, s.width - 3 * quarter, s.jnp_dtype)})
    return _head_init(jax.random.fold_in(key, 1), s, blocks)


def multibranch_loss(params, x, labels):
    def block(b, h):
        parts = [conv(h, b["b1"]), conv(h, b["b3"]), conv(h, b["b5"]), conv(max_pool3(h), b["bp"])]
        return jax.nn.relu(jnp.concatenate(parts, axis=-1))
    return _classify(params, x, labels, block)


# -- U-Net: depth levels down (conv, pool) and up (upsample, concat skip, conv); per-pixel regression
def unet_init(key, s: Size) -> dict:
    keys = jax.random.split(key, 2 * s.depth + 2)
    widths = [s.width * 2 ** i for i in range(s.depth + 1)]
    down = [conv_init(keys[i], 3, IMAGE_CHANNELS if i == 0 else widths[i - 1], widths[i], s.jnp_dtype)
            for i in range(s.depth)]
    up = [conv_init(keys[s.depth + i], 3, widths[i + 1] + widths[i], widths[i], s.jnp_dtype)
          for i in range(s.depth)]
    return {"down": down, "mid": conv_init(keys[-2], 3, widths[s.depth - 1], widths[s.depth], s.jnp_dtype),
            "up": up, "out": conv_init(keys[-1], 1, s.width, 1, s.jnp_dtype)}


def unet_data(key, s: Size) -> tuple[jax.Array, jax.Array]:
    x, _ = image_data(key, s)
    return x, jnp.mean(x, axis=-1, keepdims=True)


def unet_loss(params, x, target):
    skips, h = [], x
    for w in params["down"]:
        h = jax.nn.relu(conv(h, w))
        skips.append(h)
        h = avg_pool(h)
    h = jax.nn.relu(conv(h, params["mid"]))
    for w, skip in reversed(list(zip(params["up"], skips))):
        h = jnp.repeat(jnp.repeat(h, 2, axis=1), 2, axis=2)   # nearest-neighbour upsampling
        h = jax.nn.relu(conv(jnp.concatenate([h, skip], axis=-1), w))
    pred = conv(h, params["out"])
    return jnp.mean((pred.astype(jnp.float32) - target.astype(jnp.float32)) ** 2)


FAMILIES = (
    Family("plain_cnn", plain_init, image_data, plain_loss, "momentum", 0.02),
    Family("residual_cnn", residual_init, image_data, residual_loss, "momentum", 0.02),
    Family("depthwise_cnn", depthwise_init, image_data, depthwise_loss, "adam", 0.003),
    Family("multibranch_cnn", multibranch_init, image_data, multibranch_loss, "adam", 0.003),
    Family("unet", unet_init, unet_data, unet_loss, "adam", 0.003),
)
