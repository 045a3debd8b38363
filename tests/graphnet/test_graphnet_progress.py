"""The ETA of stage gnn's progress lines counts rounds of members when they train side by side."""
from __future__ import annotations

from pipeline.graphnet.progress import epoch_reporter, later_rounds


def test_later_rounds():
    assert [later_rounds(p, 3) for p in range(3)] == [2, 1, 0]                # one at a time: the members after it
    assert [later_rounds(p, 3, workers=2) for p in range(3)] == [1, 1, 0]     # rounds {0, 1}, {2}
    assert [later_rounds(p, 2, workers=2) for p in range(2)] == [0, 0]


def test_reporter_line_and_eta(capsys):
    class Run:
        rows: list = []

        def log(self, row):
            self.rows.append(row)

    run = Run()
    report = epoch_reporter("layout-xla-random", 1, 0, 3, budget=10, patience=2, run=run, workers=2)
    report({"epoch": 0, "best_epoch": 0, "loss": 0.5, "valid_score": 0.25, "lr": 1e-3, "configs_per_second": 100.0,
            "seconds": 2.0})
    # expected 2 more epochs of this member + 1 later round of (1 + 2) epochs, at 2 s each: 10 s; at most 9 + 10
    assert capsys.readouterr().out.strip() == (
        "[gnn layout-xla-random] seed 1 (1/3) epoch 1/10: loss 0.5000 valid 0.2500 lr 1.00e-03 100 configs/s, "
        "2.0 s/epoch, ETA 00:10 (at most 00:38)")
    assert run.rows[0]["seed"] == 1
