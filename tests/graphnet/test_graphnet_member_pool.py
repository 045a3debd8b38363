"""Members trained side by side (gnn.member_workers) are bit for bit the members trained alone."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_gnn import overrides, write_collection

from pipeline import gnn as gnn_stage
from pipeline.graphnet.checkpoint import load_model
from pipeline.graphnet.member_pool import Recorder, member_threads, pool_size, run_pool
from pipeline.graphnet.members import rank_mean
from pipeline.predictions import load_predictions, predictions_path
from pipeline.tpugraphs.dataset import Collection

COLLECTION = Collection.parse("layout-xla-random")


def train(root: Path, seeds: str, workers: int, threads: int) -> None:
    """Stage gnn on the tiny collection under `root` with members `seeds` (e.g. "[0,1]")."""
    write_collection(root, COLLECTION)
    gnn_stage.main(["--collection", COLLECTION.slug, *overrides(root), f"gnn.seeds={seeds}", "gnn.epochs=3",
                    f"gnn.member_workers={workers}", f"gnn.num_threads={threads}"])


def weights(root: Path, member: int) -> dict[str, torch.Tensor]:
    model, meta = load_model(root / "models" / "gnn" / COLLECTION.slug / f"seed{member}" / "model.pt")
    assert meta["member"] == member
    return model.state_dict()


def predictions(root: Path, split: str):
    return load_predictions(predictions_path(root / "predictions", "gnn", COLLECTION.slug, split))


def test_members_in_the_pool_are_the_members_trained_alone(tmp_path, monkeypatch, capfd):
    """3 members on 2 workers (gnn.num_threads=2 shared: 1, 1, then 2 threads for the last one alone) against each
    member alone with those threads: equal weights, curves and blended predictions; the members differ (a shared or
    swapped seed fails)."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    pool, alone = tmp_path / "pool", {m: tmp_path / f"alone{m}" for m in (0, 1, 2)}
    train(pool, "[0,1,2]", workers=2, threads=2)
    out = capfd.readouterr().out                                   # the workers write to the stage's stdout
    assert "3 members, 2 at a time (torch threads: 1, 1, 2)" in out
    for member in range(3):                                        # one line per epoch per member, prefixed
        assert [f"seed {member} ({member + 1}/3) epoch {e}/3" in out for e in (1, 2, 3)] == [True] * 3
    for member, root in alone.items():
        train(root, f"[{member}]", workers=1, threads=1 if member < 2 else 2)
    for member, root in alone.items():
        mine, theirs = weights(pool, member), weights(root, member)
        assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    members = [weights(pool, m) for m in range(3)]
    for a, b in ((0, 1), (0, 2), (1, 2)):
        assert any(not torch.equal(members[a][k], members[b][k]) for k in members[a])
    curve = pd.read_csv(pool / "plots" / "gnn" / COLLECTION.slug / "curve.csv")
    for member, root in alone.items():
        solo = pd.read_csv(root / "plots" / "gnn" / COLLECTION.slug / "curve.csv")
        pd.testing.assert_frame_equal(curve[curve["seed"] == member].reset_index(drop=True), solo)
    for split in ("valid", "test"):
        expected = rank_mean([predictions(root, split) for root in alone.values()])
        stage = predictions(pool, split)
        assert sorted(stage) == sorted(expected)
        for graph in stage:
            np.testing.assert_array_equal(stage[graph], expected[graph])


def test_pool_size_and_threads():
    assert pool_size(2, 3, distributed=False, device_type="cpu") == 2
    assert pool_size(4, 3, distributed=False, device_type="cpu") == 3          # no idle worker
    assert pool_size(2, 3, distributed=True, device_type="cpu") == 1           # torchrun: one at a time
    assert pool_size(2, 3, distributed=False, device_type="cuda") == 1
    assert [member_threads(2, 2, 3, p) for p in range(3)] == [1, 1, 2]         # the last round alone: both threads
    assert [member_threads(8, 3, 4, p) for p in range(4)] == [2, 2, 2, 8]
    assert [member_threads(1, 2, 2, p) for p in range(2)] == [1, 1]             # never 0 threads


def _square_or_fail(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative {x}")
    return x * x


def test_run_pool_keeps_the_order_and_raises_a_worker_error():
    assert run_pool(_square_or_fail, [3, 1, 2], workers=2) == [9, 1, 4]
    with pytest.raises(ValueError, match="negative -1"):
        run_pool(_square_or_fail, [2, -1], workers=2)
    recorder = Recorder()
    row = {"epoch": 0}
    recorder.log(row)
    row["epoch"] = 1
    assert recorder.rows == [{"epoch": 0}]
