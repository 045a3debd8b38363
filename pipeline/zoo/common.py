"""What every zoo program shares: its size, its family, hand-written optimizers and the training step.

A zoo program is one training step of one model: `jax.value_and_grad` of the model's loss followed by an
SGD-momentum or Adam update, written out here (no optax). `lowered_text` and `compiled_text` give the two HLO texts the
dataset is built from: the module as lowered (layout graphs) and the module as compiled on CPU (fused kernels).
Arguments are abstract (`jax.ShapeDtypeStruct`), so lowering a large variant allocates nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import jax
import jax.numpy as jnp

Params = Any
DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16}
OPTIMIZERS = ("momentum", "adam")
# Machine-code generation does not change the optimised HLO text (the fusions), only how long compiling takes:
# skipping LLVM's optimisations gives the same text about 2.5x faster.
METADATA = re.compile(r", metadata=\{[^{}]*\}")   # source locations: not featurised, half the text
FAST_CODEGEN = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@dataclass(frozen=True)
class Size:
    """One variant of a family: batch, width (channels / model dim), depth (blocks), extent (image side or
    sequence length) and dtype of parameters and activations ("f32" | "bf16")."""

    batch: int
    width: int
    depth: int
    extent: int
    dtype: str = "f32"

    @property
    def jnp_dtype(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"size dtype: expected one of {sorted(DTYPES)}, got {self.dtype!r}")
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class Family:
    """An architecture family: parameters, a batch of data and the loss, all functions of a `Size`.

    init(key, size) -> params pytree; data(key, size) -> (inputs, targets); loss(params, inputs, targets) -> f32
    scalar. `optimizer` is "momentum" or "adam"; `lr` its learning rate.
    """

    name: str
    init: Callable[[jax.Array, Size], Params]
    data: Callable[[jax.Array, Size], tuple]
    loss: Callable[[Params, jax.Array, jax.Array], jax.Array]
    optimizer: str
    lr: float


def dense_init(key: jax.Array, fan_in: int, fan_out: int, dtype) -> dict:
    """{"w": [fan_in, fan_out], "b": [fan_out]} with LeCun-normal weights."""
    w = jax.random.normal(key, (fan_in, fan_out), jnp.float32) / jnp.sqrt(fan_in)
    return {"w": w.astype(dtype), "b": jnp.zeros((fan_out,), dtype)}


def dense(p: dict, x: jax.Array) -> jax.Array:
    return x @ p["w"] + p["b"]


def softmax_xent(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean cross-entropy in f32 of logits [..., classes] against integer labels [...]."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


def optimizer_init(name: str, params: Params) -> Params:
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    if name == "momentum":
        return {"velocity": zeros}
    if name == "adam":
        return {"m": zeros, "v": jax.tree_util.tree_map(jnp.zeros_like, params), "t": jnp.zeros((), jnp.int32)}
    raise ValueError(f"optimizer: expected one of {OPTIMIZERS}, got {name!r}")


def optimizer_update(name: str, lr: float, params: Params, grads: Params, state: Params) -> tuple[Params, Params]:
    """One SGD-momentum (mu 0.9) or Adam (0.9, 0.999, eps 1e-8) update; returns (params, state)."""
    tree = jax.tree_util.tree_map
    if name == "momentum":
        velocity = tree(lambda v, g: 0.9 * v + g, state["velocity"], grads)
        return tree(lambda p, v: p - lr * v, params, velocity), {"velocity": velocity}
    t = state["t"] + 1
    m = tree(lambda m, g: 0.9 * m + 0.1 * g, state["m"], grads)
    v = tree(lambda v, g: 0.999 * v + 0.001 * g * g, state["v"], grads)
    tf = t.astype(jnp.float32)
    scale = lr * jnp.sqrt(1 - 0.999 ** tf) / (1 - 0.9 ** tf)
    new = tree(lambda p, m, v: p - (scale * m / (jnp.sqrt(v.astype(jnp.float32)) + 1e-8)).astype(p.dtype),
               params, m, v)
    return new, {"m": m, "v": v, "t": t}


def train_step(family: Family) -> Callable:
    """step(params, opt_state, inputs, targets) -> (loss, params, opt_state)."""
    def step(params, opt_state, inputs, targets):
        loss, grads = jax.value_and_grad(family.loss)(params, inputs, targets)
        params, opt_state = optimizer_update(family.optimizer, family.lr, params, grads, opt_state)
        return loss, params, opt_state
    return step


def example_args(family: Family, size: Size, seed: int = 0) -> tuple:
    """Concrete (params, opt_state, inputs, targets) for running a step (tests, tiny sizes)."""
    k_params, k_data = jax.random.split(jax.random.PRNGKey(seed))
    params = family.init(k_params, size)
    return (params, optimizer_init(family.optimizer, params), *family.data(k_data, size))


@lru_cache(maxsize=None)
def _lowered(family: Family, size: Size):
    abstract = jax.eval_shape(lambda: example_args(family, size))
    return jax.jit(train_step(family)).lower(*abstract)


def lowered_text_cache_clear() -> None:
    """Forget lowered programs (tests lowering the same program twice)."""
    _lowered.cache_clear()


def lowered_text(family: Family, size: Size) -> str:
    """HLO text of one training step as lowered from abstract arguments (no fusion; the layout graphs)."""
    return _lowered(family, size).as_text(dialect="hlo")


@lru_cache(maxsize=None)
def compiled_text(family: Family, size: Size) -> str:
    """HLO text of the same step after XLA's CPU compilation (fused kernels; the tile graphs), without the
    instructions' metadata (source locations). Takes seconds."""
    return METADATA.sub("", _lowered(family, size).compile(FAST_CODEGEN).as_text())
