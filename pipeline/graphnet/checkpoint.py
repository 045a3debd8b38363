"""Checkpoints: the best model (weights + spec) and a resumable training state, both written atomically.

Nothing is unpickled: files are read with `torch.load(weights_only=True)`, which rebuilds only tensors and plain
containers (dict, list, tuple, str, int, float, bool, None) and refuses any other object a planted file carries
before it is constructed. numpy arrays in the state (GST's segment cycles and table rows) are stored as tensors
tagged with `NUMPY_TAG` and turned back into arrays on load; numpy scalars are stored as Python numbers.

The resumable state holds model, optimiser and scheduler state, the epoch reached, the best model so far, the
training curve and every random state (torch CPU/CUDA and the numpy sampling generator, one per DDP rank), so an
interrupted run continues exactly where it stopped. It also holds the `resume_record` it was written with: a
checkpoint of another run (settings, seed, data) is refused instead of continued (`record_changes`).
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from pipeline.errors import PipelineError
from pipeline.files import atomic_path
from pipeline.graphnet.model import ModelSpec, build_model

MODEL_FILE = "model.pt"
CHECKPOINT_FILE = "checkpoint.pt"
NUMPY_TAG = "__numpy_array__"


class CheckpointError(PipelineError):
    """A model or checkpoint file that is not a plain tensor/container payload written by this module."""


def to_plain(obj):
    """`obj` with numpy arrays replaced by tagged tensors and numpy scalars by Python numbers (recursively)."""
    if isinstance(obj, np.ndarray):
        return {NUMPY_TAG: torch.from_numpy(np.ascontiguousarray(obj).copy())}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {key: to_plain(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_plain(value) for value in obj)
    return obj


def from_plain(obj):
    """Inverse of `to_plain`."""
    if isinstance(obj, dict):
        if set(obj) == {NUMPY_TAG}:
            return obj[NUMPY_TAG].numpy()
        return {key: from_plain(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(from_plain(value) for value in obj)
    return obj


def load_plain(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """A payload written by `save_atomic`, read with weights_only=True (no code in the file can run).

    Raises CheckpointError naming the file when it holds anything but tensors and plain containers, or is no
    torch file at all.
    """
    path = Path(path)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises UnpicklingError, RuntimeError, EOFError ... for a foreign file
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"{path}: refused, not a plain tensor checkpoint written by this pipeline "
                              f"(weights-only load failed: {first[:200]})") from None
    if not isinstance(payload, dict):
        raise CheckpointError(f"{path}: expected a dict payload, found {type(payload).__name__}")
    return from_plain(payload)


def save_atomic(payload: dict, path: str | Path) -> None:
    """torch.save to a temp file in the same folder, then rename over `path`."""
    with atomic_path(path) as tmp:
        torch.save(to_plain(payload), tmp)


def rng_state(rng: np.random.Generator) -> dict:
    """Every random state one process uses during training."""
    state = {"torch": torch.get_rng_state(), "numpy": rng.bit_generator.state}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict, rng: np.random.Generator) -> None:
    """Inverse of `rng_state` (the numpy generator is restored in place)."""
    torch.set_rng_state(state["torch"])
    rng.bit_generator.state = state["numpy"]
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_model(model: nn.Module, spec: ModelSpec, path: str | Path, meta: dict | None = None) -> None:
    """The deployable model: spec + weights (+ e.g. best epoch and valid score)."""
    weights = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    save_atomic({"spec": spec.to_dict(), "state_dict": weights, "meta": dict(meta or {})}, path)


def load_model(path: str | Path, map_location: str | torch.device = "cpu",
               infer_chunk_mb: float | None = None) -> tuple[nn.Module, dict]:
    """Rebuild a model saved by `save_model`; returns (model in eval mode, meta). `infer_chunk_mb` as in
    `build_model` (`gnn.infer_chunk_mb`: the stage's own inference path, so scores match its predictions)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no GNN model here; run the gnn stage")
    payload = load_plain(path, map_location)
    for key in ("spec", "state_dict"):
        if key not in payload:
            raise CheckpointError(f"{path}: key {key!r} missing; expected a model written by save_model")
    model = build_model(ModelSpec(**payload["spec"]), infer_chunk_mb)
    model.load_state_dict(payload["state_dict"])
    return model.eval(), payload.get("meta", {})


def load_checkpoint(path: str | Path) -> dict | None:
    """The resumable training state, or None when there is none."""
    path = Path(path)
    if not path.exists():
        return None
    payload = load_plain(path)
    missing = {"epoch", "model", "optimizer", "scheduler", "rng", "spec"} - set(payload)
    if missing:
        raise CheckpointError(f"{path}: keys {sorted(missing)} missing; expected a gnn checkpoint")
    return payload


def resume_record(settings, gst, seed: int, graphs: Sequence) -> dict:
    """What a checkpoint must have been written with to be resumed: every training setting (a dataclass) but
    `resume`, GST's (None without), the member seed, and a digest of the graphs (split, id, nodes, configs), so
    that a checkpoint of another experiment, preset, learning rate or budget is never continued as this run."""
    train = {k: v for k, v in dataclasses.asdict(settings).items() if k != "resume"}
    shapes = repr([(g.split, g.graph_id, g.n_nodes, g.n_kept) for g in graphs]).encode()
    return {"train": train, "gst": None if gst is None else dataclasses.asdict(gst), "seed": int(seed),
            "graphs": hashlib.sha256(shapes).hexdigest()}


def record_changes(written: dict | None, now: dict) -> list[str]:
    """What differs between a checkpoint's `resume_record` (None: it has none) and this run's, as `gnn.<key> old ->
    new` items (empty: the same run)."""
    if written is None:
        return ["it records no settings (written before they were recorded)"]
    changed = [f"gnn.{k} {written['train'].get(k)!r} -> {v!r}" for k, v in now["train"].items()
               if written["train"].get(k) != v]
    changed += [f"{name} {written.get(name)!r} -> {now[name]!r}" for name in ("gst", "seed")
                if written.get(name) != now[name]]
    if written.get("graphs") != now["graphs"]:
        changed.append("the train or valid graphs (another dataset, preset or pruning)")
    return changed
