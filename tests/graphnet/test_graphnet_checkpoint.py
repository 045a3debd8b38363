"""Checkpoints load with weights_only: a planted pickle is refused and nothing it carries runs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from pruned_graphs import gnn_cfg, spec_of

from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.model import build_model


class Planted:
    """Pickles as a call to Path.touch(marker): unpickling it creates the marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def plant(path: Path, marker: Path, payload: dict) -> None:
    torch.save({**payload, "evil": Planted(marker)}, path)     # torch.save only pickles (writes), nothing is loaded


@pytest.mark.parametrize("loader", ["checkpoint", "model"])
def test_planted_pickle_is_refused_and_never_runs(tmp_path, loader):
    marker = tmp_path / "pwned"
    path = tmp_path / f"{loader}.pt"
    plant(path, marker, {"epoch": 0, "model": {}, "optimizer": {}, "scheduler": {}, "rng": [], "spec": {},
                         "state_dict": {}})
    load = ckpt.load_checkpoint if loader == "checkpoint" else ckpt.load_model
    with pytest.raises(ckpt.CheckpointError, match=f"{path.name}: refused, not a plain tensor checkpoint"):
        load(path)
    assert not marker.exists()


def test_garbage_and_non_dict_files_are_refused(tmp_path):
    (tmp_path / "garbage.pt").write_bytes(b"not a torch file")
    with pytest.raises(ckpt.CheckpointError, match="garbage.pt: refused"):
        ckpt.load_checkpoint(tmp_path / "garbage.pt")
    torch.save([torch.zeros(2)], tmp_path / "list.pt")
    with pytest.raises(ckpt.CheckpointError, match="expected a dict payload, found list"):
        ckpt.load_checkpoint(tmp_path / "list.pt")
    torch.save({"epoch": 1}, tmp_path / "partial.pt")
    with pytest.raises(ckpt.CheckpointError, match="keys .*'model'.* missing"):
        ckpt.load_checkpoint(tmp_path / "partial.pt")


def test_numpy_state_roundtrips_through_plain_tensors(tmp_path):
    """GST's cycles hold numpy arrays and the rng state big ints: both come back equal, with their types."""
    rng = np.random.default_rng(7)
    state = {"epoch": 2, "model": {"w": torch.arange(3.0)}, "optimizer": {}, "scheduler": {}, "spec": {},
             "rng": [ckpt.rng_state(rng)], "curve": [{"loss": np.float64(0.5)}],
             "gst": [{"cycles": {"g": {"rows": np.array([3, 1], dtype=np.int64), "order": np.array([1, 0]),
                                       "position": 1}},
                      "table": {("g", 0): (None, torch.ones(1, 2)), ("g", 1): (np.array([4]), torch.zeros(1, 2))}}]}
    ckpt.save_atomic(state, tmp_path / "checkpoint.pt")
    back = ckpt.load_checkpoint(tmp_path / "checkpoint.pt")
    rows = back["gst"][0]["cycles"]["g"]["rows"]
    assert isinstance(rows, np.ndarray) and rows.dtype == np.int64 and rows.tolist() == [3, 1]
    assert back["gst"][0]["table"][("g", 1)][0].tolist() == [4] and back["gst"][0]["table"][("g", 0)][0] is None
    assert back["curve"] == [{"loss": 0.5}] and type(back["curve"][0]["loss"]) is float
    restored = np.random.default_rng(0)
    ckpt.restore_rng_state(back["rng"][0], restored)
    assert restored.random() == rng.random()
    assert not list(tmp_path.glob("*.tmp"))


def test_model_file_roundtrips(tmp_path):
    spec = spec_of(gnn_cfg(), "tile")
    torch.manual_seed(0)
    model = build_model(spec)
    ckpt.save_model(model, spec, tmp_path / "model.pt", {"best_epoch": np.int64(3)})
    loaded, meta = ckpt.load_model(tmp_path / "model.pt")
    assert meta == {"best_epoch": 3}
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
