"""Checkpoints: the best model (weights + spec) and a resumable training state, both written atomically.

The resumable state holds model, optimiser and scheduler state, the epoch reached, the best model so far, the
training curve and every random state (torch CPU/CUDA and the numpy sampling generator, one per DDP rank), so an
interrupted run continues exactly where it stopped.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from pipeline.files import atomic_path
from pipeline.graphnet.model import ModelSpec, build_model

MODEL_FILE = "model.pt"
CHECKPOINT_FILE = "checkpoint.pt"


def save_atomic(payload: dict, path: str | Path) -> None:
    """torch.save to a temp file in the same folder, then rename over `path`."""
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


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


def load_model(path: str | Path, map_location: str | torch.device = "cpu") -> tuple[nn.Module, dict]:
    """Rebuild a model saved by `save_model`; returns (model in eval mode, meta)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no GNN model here; run the gnn stage")
    payload = torch.load(path, map_location=map_location, weights_only=False)
    for key in ("spec", "state_dict"):
        if key not in payload:
            raise ValueError(f"{path}: key {key!r} missing; expected a model written by save_model")
    model = build_model(ModelSpec(**payload["spec"]))
    model.load_state_dict(payload["state_dict"])
    return model.eval(), payload.get("meta", {})


def load_checkpoint(path: str | Path) -> dict | None:
    """The resumable training state, or None when there is none."""
    path = Path(path)
    if not path.exists():
        return None
    payload = torch.load(path, map_location="cpu", weights_only=False)
    missing = {"epoch", "model", "optimizer", "scheduler", "rng", "spec"} - set(payload)
    if missing:
        raise ValueError(f"{path}: keys {sorted(missing)} missing; expected a gnn checkpoint")
    return payload
