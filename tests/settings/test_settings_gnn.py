"""pipeline.settings.gnn: one GnnSettings per collection, by-search values picked, the GST group only in GST mode."""
from __future__ import annotations

from dataclasses import replace

from pipeline.config import compose
from pipeline.settings.gnn import gnn_settings
from pipeline.tpugraphs.dataset import Collection

RANDOM, TILE = Collection.parse("layout-xla-random"), Collection.parse("tile-xla")


def test_one_object_holds_what_the_stage_reads():
    cfg = compose(["data=programs_ci", "gnn.seeds=[4,2]", "seed=3", "gnn.lr={tile: 0.5, random: 0.25, default: 1}",
                   "prune.hops={random: all, default: 2}"])
    layout, tile = gnn_settings(cfg, RANDOM), gnn_settings(cfg, TILE)
    assert (layout.train.lr, tile.train.lr) == (0.25, 0.5)
    assert layout.members == (4, 2) and layout.seed == 3 and layout.prune_hops is None
    assert layout.model.kind == "layout" and layout.model.node_feat_dim == 0 and layout.spec(9).node_feat_dim == 9
    assert tile.model.node_reduce is None and layout.model.node_reduce is not None
    assert layout.train.valid == replace(layout.infer, tta=int(cfg.gnn.valid_tta)) and layout.gst is None


def test_the_gst_group_only_in_gst_mode_on_layout_collections():
    cfg = compose(["data=programs_ci", "gnn=gst"])
    assert gnn_settings(cfg, RANDOM).gst.segment_size == int(cfg.gnn.gst.segment_size)
    assert gnn_settings(cfg, TILE).gst is None


def test_model_selection_orderings_null_are_the_final_inference():
    assert gnn_settings(compose(["data=programs_ci", "gnn.tta=3", "gnn.valid_tta=null"]), RANDOM).train.valid.tta == 3
    cheap = gnn_settings(compose(["data=programs_ci", "gnn.tta=3", "gnn.valid_tta=1"]), RANDOM)
    assert (cheap.train.valid.tta, cheap.infer.tta, cheap.train.valid.infer_batch) == (1, 3, cheap.infer.infer_batch)
    member = gnn_settings(compose(["data=programs_ci", "gnn.member_workers=3", "gnn.num_threads=4"]), RANDOM)
    assert (member.member_workers, member.num_threads) == (3, 4)


def test_layout_inputs_by_search_need_no_tile_entry():
    cfg = compose(["data=programs_ci", "gnn.layout_padding={random: true, default: false}",
                   "gnn.layout_roles={random: false, default: true}"])
    default = Collection.parse("layout-nlp-default")
    assert (gnn_settings(cfg, RANDOM).model.layout_padding, gnn_settings(cfg, default).model.layout_padding) == (True, False)
    assert (gnn_settings(cfg, RANDOM).model.layout_roles, gnn_settings(cfg, default).model.layout_roles) == (False, True)
    tile = gnn_settings(cfg, TILE).model
    assert not tile.layout_padding and not tile.layout_roles
