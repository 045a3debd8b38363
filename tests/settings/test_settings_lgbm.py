"""pipeline.settings.lgbm: the `lgbm` group read once, with `lgbm.<kind>` picked by the collection's kind."""
from __future__ import annotations

from pipeline.config import compose
from pipeline.settings.lgbm import lgbm_settings
from pipeline.tpugraphs.dataset import Collection


def test_the_collection_kind_picks_its_entry():
    cfg = compose(["data=programs_ci", "lgbm.tile.label_grades=5", "lgbm.layout.label_grades=7",
                   "lgbm.eval_at=[3,9]", "lgbm.features.opcodes=false"])
    tile, layout = (lgbm_settings(cfg, Collection.parse(s)) for s in ("tile-xla", "layout-nlp-default"))
    assert (tile.kind, tile.label_grades, layout.kind, layout.label_grades) == ("tile", 5, "layout", 7)
    assert tile.objective == cfg.lgbm.tile.objective and layout.objective == cfg.lgbm.layout.objective
    assert layout.eval_at == (3, 9) and "opcodes" not in layout.features.groups
    assert layout.features == tile.features and layout.num_threads == int(cfg.lgbm.num_threads)
