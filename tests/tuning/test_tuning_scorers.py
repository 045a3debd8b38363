"""Calibration of a member's raw scores on valid, and the scorer's predicted log runtime ratio against the default."""
from __future__ import annotations

import numpy as np
import pytest
from pruned_graphs import make_layout_graph

from pipeline.tuning.program import with_configs
from pipeline.tuning.scorers import ModelScorer, calibrate


class LogRuntimeTimes:
    """A member whose raw score is `factor` x log runtime of the graph's own formula (make_layout_graph)."""

    name = "fake"

    def __init__(self, factor: float):
        self.factor = factor

    def raw(self, graph):
        feat = np.asarray(graph.node_config_feat, dtype=np.float64)
        runtime = 100.0 + 10 * feat[:, 0, 0] + 3 * feat[:, 1, 6] + feat[:, :, 12].sum(1)
        return self.factor * np.log(runtime)


def test_calibration_recovers_the_slope_of_log_runtime_on_score():
    graphs = [make_layout_graph(f"g{i}", "valid", n_configs=40, seed=i) for i in range(3)]
    cal = calibrate(LogRuntimeTimes(4.0), graphs, max_configs=30, batch=7, rng=np.random.default_rng(0))
    assert cal.slope == pytest.approx(0.25) and cal.correlation == pytest.approx(1.0) and cal.configs == 90


def test_scorer_predicts_the_log_runtime_ratio_against_the_default_row():
    template = with_configs(make_layout_graph("prog", "test"), np.full((1, 2, 18), -1, dtype=np.int8))
    member = LogRuntimeTimes(4.0)
    cal = calibrate(member, [make_layout_graph("v", "valid", n_configs=40)], 40, 16, np.random.default_rng(0))
    scorer = ModelScorer(template, [member], [1.0], [cal])
    feat = make_layout_graph("c", "test", n_configs=5, seed=9).node_config_feat
    runtime = lambda f: 100.0 + 10 * f[:, 0, 0] + 3 * f[:, 1, 6] + f[:, :, 12].sum(1)
    default = runtime(np.full((1, 2, 18), -1.0))
    np.testing.assert_allclose(scorer(feat), np.log(runtime(feat.astype(np.float64)) / default), rtol=1e-9)
    assert scorer(np.full((2, 2, 18), -1, dtype=np.int8)).tolist() == [0.0, 0.0]
    unused = ModelScorer(template, [member, member], [0.0, 1.0], [cal, cal])   # a zero-weight member is skipped
    np.testing.assert_allclose(unused(feat), scorer(feat))


def test_a_gst_model_is_scored_segment_by_segment_as_on_the_whole_graph():
    """The autotune scorer takes GST models (`gnn.mode=gst`, the README's `dvc exp run -S gnn=gst ...`, whose stage
    autotune used to stop with 'autotune scores whole pruned graphs'): segment by segment, the scores of the
    whole-graph forward, with the graph's segments built once and kept for the search's later batches."""
    import torch
    from pruned_graphs import layout_model, long_graph

    from pipeline.graphnet.gst import GSTSettings, SegmentCache
    from pipeline.tuning.scorers import GnnMember

    graph, model = long_graph(n_nodes=50), layout_model().eval()
    member = GnnMember.__new__(GnnMember)                   # the loaded state, without a models folder
    member.nets, member._tensors, member.kind, member.segments = [model], {}, "layout", None
    whole = member.raw(graph)
    gst = GSTSettings(segment_size=8, segmentation="contiguous", segments_per_step=1, stale_dropout=0.5,
                      finetune_epochs=0, finetune_lr_scale=0.1)
    member.segments = SegmentCache(gst, model.spec.layers + 1, torch.device("cpu"))
    segmented = member.raw(graph)
    assert len(member.segments.get(graph)) >= 5 and member.segments.get(graph) is member.segments.get(graph)
    np.testing.assert_allclose(segmented, whole, rtol=1e-5, atol=1e-4)
    assert np.ptp(whole) > 0                                # configs told apart: the comparison can fail


def test_a_gnn_member_of_other_node_feat_columns_than_the_pruned_collection_is_named(tmp_path):
    """A model trained before prune re-ran on other data (another count of normalised node_feat columns) ended the
    search in a torch shape-mismatch traceback; it is refused on loading, naming the model file."""
    from omegaconf import OmegaConf

    from pipeline.config import compose
    from pipeline.graphnet import checkpoint as ckpt
    from pipeline.graphnet.members import member_dir
    from pipeline.pruned import NORMALIZER_FILE, collection_dir
    from pipeline.pruning.normalize import Normalizer
    from pipeline.tpugraphs.dataset import Collection
    from pipeline.tuning.scorers import GnnMember
    from pruned_graphs import layout_model

    cfg = compose([f"paths.models_dir={tmp_path / 'models'}", f"paths.pruned_dir={tmp_path / 'pruned'}"])
    cfg.gnn = OmegaConf.merge(cfg.gnn, {"seeds": [0], "mode": "pruned"})
    collection = Collection.parse("layout-xla-random")
    model = layout_model()
    path = member_dir(tmp_path / "models/gnn" / collection.slug, 0) / ckpt.MODEL_FILE
    ckpt.save_model(model, model.spec, path, {"collection": collection.name})
    columns = model.spec.node_feat_dim
    folder = collection_dir(tmp_path / "pruned", collection.slug)
    folder.mkdir(parents=True)
    for kept in (columns, columns - 1):
        Normalizer(columns=list(range(kept)), log=[False] * kept, mean=[0.0] * kept, std=[1.0] * kept,
                   pad_value=-1.0, train_nodes=10).save(folder / NORMALIZER_FILE)
        if kept == columns:
            assert len(GnnMember(cfg, collection).nets) == 1
            continue
        with pytest.raises(ckpt.CheckpointError) as refusal:
            GnnMember(cfg, collection)
        assert str(refusal.value) == (f"{path}: a model of {columns} node_feat columns, but the pruned graphs of "
                                      f"layout-xla-random have {kept} (prune ran on other data or settings since "
                                      f"stage gnn trained it); run stage gnn again (dvc repro)")
