"""pipeline.lgbm_model.infer: a missing model is named with the stage that writes it."""
from __future__ import annotations

import pytest

from pipeline.lgbm_model import infer


def test_load_booster_names_the_missing_model(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"lgbm/tile-xla/model.txt: missing; run stage lgbm"):
        infer.load_booster(tmp_path / "lgbm" / "tile-xla")
