"""The tool's report: the changes worth most on the pick's own scale, and the blocks kept for want of evidence."""
from __future__ import annotations

import numpy as np
import pytest
from tuning_hlo import DOT_RESHAPE, space_of

from pipeline.tuning.report import changes, unmeasured


def test_worth_is_measured_on_the_scale_of_the_reported_prediction():
    space = space_of(DOT_RESHAPE)                                  # dot.3, reshape.5; rank 2 blocks, choice 1 = (0, 1)
    pick = np.array([[1, 0, 0], [1, 1, 0]], dtype=np.int16)        # 3 blocks changed
    saves = {(0, 0): 0.3, (1, 0): 0.2, (1, 1): 0.1}                # raw prediction: -sum of what each block saves

    def scorer(feat):
        cand = space.decode(feat)
        return -np.array([sum(v for (k, b), v in saves.items() if c[k, b]) for c in cand])

    half = lambda score, changed: 0.5 * score                    # noqa: E731  a shrinkage of 0.5 at every distance
    reported = half(-0.6, 3)                                       # the pick as the tool reports it: -0.3
    rows = changes(space, pick, scorer, reported, 2, 8, half)
    assert [(r["instruction"], r["block"]) for r in rows] == [("dot.3", "output"), ("reshape.5", "output")]
    assert [r["worth"] for r in rows] == [pytest.approx(0.15), pytest.approx(0.1)]   # halved savings, top 2
    assert rows[0]["default"] == [1, 0] and rows[0]["chosen"] == [0, 1]
    raw = changes(space, pick, scorer, -0.6, 3, 8)                 # without a calibration: the scorer's own scale
    assert [r["worth"] for r in raw] == [pytest.approx(0.3), pytest.approx(0.2), pytest.approx(0.1)]
    assert changes(space, space.default()[0], scorer, 0.0, 3, 8) == []


def test_unmeasured_lists_the_frozen_blocks_by_kind():
    space = space_of(DOT_RESHAPE)
    assert unmeasured(space) == []
    narrow = space.only_kinds([space.kinds[1][0], space.kinds[1][1]])       # the reshape's kinds: the dot frozen
    assert unmeasured(narrow) == [{"opcode": "dot", "block": "output", "rank": 2, "blocks": 1},
                                  {"opcode": "dot", "block": "input", "rank": 2, "blocks": 1}]
