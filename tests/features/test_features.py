"""Feature values of pipeline.features.table* on hand-built graphs, checked by hand."""
from __future__ import annotations

import numpy as np

from pipeline.features import layout as features_layout, tile as features_tile, top_nodes as features_top_nodes
from pipeline.features.table import FeatureSpec, GraphFeaturizer, graph_feature_names, graph_features
from pipeline.pruned import PrunedGraph

ALL = frozenset({"graph_counts", "opcodes", "node_stats", "tile_config", "tile_derived", "tile_relative",
                 "layout_default", "layout_top_nodes",
                 "layout_perm", "layout_disagree", "layout_minor"})
PAD = [-1] * 6


def raw_row(shape, layout, is_root=0):
    """A -1 padded raw node_feat row with shape_dimensions (21-26) and layout_minor_to_major (134-139)."""
    row = np.zeros(140, dtype=np.float32)
    row[0] = is_root
    row[21:27] = list(shape) + [-1] * (6 - len(shape))
    row[134:140] = list(layout) + [-1] * (6 - len(layout))
    return row


def block(*perm):
    return list(perm) + [-1] * (6 - len(perm))


def two_config_layout_graph() -> PrunedGraph:
    """parameter(0) -> conv(1) -> reshape(2); configurable: conv and reshape; two configurations.

    config 0: conv out 3210, in 2310 (disagrees with the parameter's HLO layout 3210), kernel 3210;
              reshape out 10, in 3210 (= conv out: no copy), kernel default.
    config 1: conv out 0123, in default, kernel default; reshape out default, in 3210 (!= conv out 0123: a copy).
    """
    raw = np.stack([raw_row([2, 3, 256, 8], [3, 2, 1, 0]), raw_row([1, 4, 4, 128], [3, 2, 1, 0]),
                    raw_row([16, 128], [1, 0], is_root=1)])
    node_config_feat = np.array([
        [block(3, 2, 1, 0) + block(2, 3, 1, 0) + block(3, 2, 1, 0), block(1, 0) + block(3, 2, 1, 0) + PAD],
        [block(0, 1, 2, 3) + PAD + PAD, PAD + block(3, 2, 1, 0) + PAD],
    ], dtype=np.int8)                                                   # [configs, NC, 18]
    return PrunedGraph(
        graph_id="g", split="train", node_feat=np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 8.0]], dtype=np.float32),
        node_feat_raw=raw, node_opcode=np.array([63, 26, 75]), edge_index=np.array([[1, 0], [2, 1]]),
        node_ids=np.arange(3), config_runtime=np.array([1.0, 2.0]), config_count=np.ones(2, dtype=np.int64),
        config_inverse=np.arange(2), node_config_ids=np.array([1, 2]), node_config_feat=node_config_feat)


def layout_values(graph, groups):
    ctx = features_layout.layout_context(graph)
    values = features_layout.layout_features(ctx, graph.node_config_feat, set(groups), max_perm_rank=4)
    names = features_layout.layout_feature_names(set(groups), 4)
    assert values.shape == (2, len(names))
    return dict(zip(names, values.T))


def test_layout_top_nodes_by_hand():
    """conv and reshape both hold 2048 elements: slot 0 is the conv (node order breaks the tie), slot 2 is empty."""
    graph = two_config_layout_graph()
    ctx = features_layout.layout_context(graph)
    values = features_layout.layout_features(ctx, graph.node_config_feat, {"layout_top_nodes"}, 4, top_nodes=3)
    names = features_layout.layout_feature_names({"layout_top_nodes"}, 4, top_nodes=3)
    assert values.shape == (2, len(names)) == (2, 3 * 23)
    f = dict(zip(names, values.T))
    assert list(f["top0_log2_elements"]) == [11, 11] and list(f["top0_kind"]) == [0, 0]     # conv
    assert list(f["top1_kind"]) == [2, 2]                                                  # reshape
    assert [f[f"top0_output_{d}"][0] for d in range(6)] == [3, 2, 1, 0, -1, -1]
    assert [f[f"top0_input_{d}"][1] for d in range(6)] == [-1] * 6                         # config 1: default
    assert f["top1_input_0"][0] == 3
    # conv out 3210: minor dims 128 and 4, padded to 128 x 8: ratio 2; out 0123: minor 1 and 4 pad to 128 x 8
    assert list(f["top0_minor0_log2"]) == [7, 0] and list(f["top0_minor1_log2"]) == [2, 2]
    assert np.allclose(f["top0_pad_ratio"], [2.0, 256.0])
    # reshape out 10 and its default (HLO layout 10): minor dims 128 and 16, no padding
    assert list(f["top1_minor0_log2"]) == [7, 7] and np.allclose(f["top1_pad_ratio"], [1.0, 1.0])
    assert np.isnan(values[:, names.index("top2_log2_elements"):]).all()


def test_largest_nodes_breaks_ties_by_node_id():
    """Three nodes tie at 2048 elements: they come by increasing node id (3, 5, 7), not by stored position."""
    shape = np.array([[16, 128] + [-1] * 4, [2048] + [-1] * 5, [4, 512] + [-1] * 4, [8] + [-1] * 5], np.float64)
    ids = np.array([7, 3, 5, 1])
    assert features_top_nodes.largest_nodes(shape, ids, 3).tolist() == [1, 2, 0]
    assert features_top_nodes.largest_nodes(shape, ids, 9).tolist() == [1, 2, 0, 3]


def test_layout_features_do_not_depend_on_the_stored_order_of_node_config_ids():
    """conv (node 1) and reshape (node 2) tie at 2048 elements. Stored as [2, 1], with node_config_feat's node
    axis swapped to match, the file describes the same graph: every feature is the same bit for bit, and slot 0
    is still the conv (the lower node id)."""
    graph = two_config_layout_graph()
    swapped = PrunedGraph(**{**graph.__dict__, "node_config_ids": np.array([2, 1]),
                             "node_config_feat": graph.node_config_feat[:, ::-1].copy()})
    spec = FeatureSpec(groups=ALL, node_stats=("mean",), max_perm_rank=4, feature_chunk=1, top_nodes=3,
                       layout_reference="both")
    stored, reordered = GraphFeaturizer(graph, "layout", spec), GraphFeaturizer(swapped, "layout", spec)
    assert stored.names == reordered.names
    f = dict(zip(reordered.names, reordered.matrix().T))
    assert list(f["top0_kind"]) == [0, 0] and list(f["top1_kind"]) == [2, 2]               # conv, then reshape
    assert [f[f"top0_output_{d}"][0] for d in range(4)] == [3, 2, 1, 0]                    # the conv's block
    assert np.array_equal(stored.matrix(), reordered.matrix(), equal_nan=True)


def test_layout_disagreement_counts():
    f = layout_values(two_config_layout_graph(), ["layout_disagree"])
    assert list(f["disagree_edges"]) == [0, 1]              # conv out vs reshape in
    assert list(f["disagree_edges_one_default"]) == [0, 0]
    assert list(f["disagree_edges_effective"]) == [0, 1]
    assert list(f["disagree_fixed_producer"]) == [1, 0]     # conv in 2310 vs parameter HLO 3210
    assert list(f["disagree_own_hlo_layout"]) == [0, 1]     # conv out 0123 vs its HLO 3210
    assert np.allclose(f["copy_elements_log2"], [0, np.log2(1 + 2048)])          # the conv output is copied
    assert np.allclose(f["copy_elements_fixed_log2"], [np.log2(1 + 12288), 0])   # the parameter is copied


def test_explicit_recorded_layout_is_no_disagreement():
    """parameter(0) -> conv(1) -> reshape(2); the conv's recorded layout is feature-minor 1320.

    Configs: 0 all default; 1 conv output set explicitly to 1320; 2 reshape input set to 1320; 3 conv output
    row-major 3210 (the only layout change: the reshape's default input expects the recorded 1320)."""
    graph = two_config_layout_graph()
    raw = graph.node_feat_raw.copy()
    raw[1, 134:140] = block(1, 3, 2, 0)
    feat = np.full((4, 2, 18), -1, dtype=np.int8)
    feat[1, 0, 0:4], feat[2, 1, 6:10], feat[3, 0, 0:4] = (1, 3, 2, 0), (1, 3, 2, 0), (3, 2, 1, 0)
    ctx = features_layout.layout_context(PrunedGraph(**{**graph.__dict__, "node_feat_raw": raw}))
    names = features_layout.layout_feature_names({"layout_disagree"}, 4)
    f = dict(zip(names, features_layout.layout_features(ctx, feat, {"layout_disagree"}, 4).T))
    assert list(f["disagree_edges_effective"]) == [0, 0, 0, 1]
    assert list(f["disagree_own_hlo_layout"]) == [0, 0, 0, 1]
    assert list(f["disagree_edges"]) == [0, 0, 0, 0]                  # never both explicit


def test_layout_default_block_counts():
    f = layout_values(two_config_layout_graph(), ["layout_default"])
    assert list(f["default_output"]) == [0, 1]
    assert list(f["default_input"]) == [0, 1]
    assert list(f["default_kernel"]) == [1, 2]
    assert list(f["default_output_reshape"]) == [0, 1]
    assert list(f["default_output_conv"]) == [0, 0]


def test_layout_permutation_counts():
    f = layout_values(two_config_layout_graph(), ["layout_perm"])
    assert list(f["perm_output_conv_3210"]) == [1, 0]
    assert list(f["perm_output_conv_0123"]) == [0, 1]
    assert list(f["perm_input_conv_2310"]) == [1, 0]
    assert list(f["perm_output_reshape_10"]) == [1, 0]
    assert list(f["perm_input_reshape_3210"]) == [1, 1]
    total = sum(v for k, v in f.items())
    assert list(total) == [6 - 1, 6 - 4]                    # every non-default block counted once


def test_layout_minor_dims_and_padding_waste():
    f = layout_values(two_config_layout_graph(), ["layout_minor"])
    # config 0: conv minor dims 128 and 4 (pad 4 -> 8: 2048 -> 4096 elements); reshape 128 x 16 exact (2048).
    # config 1: conv minor dims 1 and 4 (1 -> 128, 4 -> 8: 2048 -> 524288); reshape default = HLO layout 10.
    assert np.allclose(f["minor0_log2_sum"], [7 + 7, 0 + 7])
    assert np.allclose(f["minor1_log2_sum"], [2 + 4, 2 + 4])
    assert list(f["minor0_aligned128"]) == [2, 1]
    assert list(f["minor1_aligned8"]) == [1, 1]
    assert np.allclose(f["minor0_log2_weighted"], [7, 3.5])  # both nodes hold 2048 elements
    assert np.allclose(f["pad_ratio"], [6144 / 4096, (524288 + 2048) / 4096])
    assert np.allclose(f["pad_waste_log2"], [np.log2(1 + 2048), np.log2(1 + 524288 - 2048)])


def test_tile_derived_features():
    shape = np.array([100, 200, -1, -1, -1, -1], dtype=np.float64)
    config_feat = np.zeros((2, 24), dtype=np.float32)
    config_feat[0, 8:10] = [64, 128]        # 2 x 2 tiles of 64 x 128 cover 128 x 256 for 100 x 200
    config_feat[1, 8:10] = [100, 0]         # untiled second dim: one tile of 100 x 200
    names = features_tile.tile_feature_names({"tile_derived"})
    f = dict(zip(names, features_tile.tile_features(shape, config_feat, {"tile_derived"}).T))
    assert list(f["tiles_0"]) == [2, 1] and list(f["tiles_1"]) == [2, 1]
    assert np.allclose(f["tiles_log2"], [2, 0])
    assert np.allclose(f["pad_ratio"], [128 * 256 / 20000, 1.0])
    assert list(f["tile_minor"]) == [128, 200]
    assert list(f["tile_minor_aligned128"]) == [1, 0]


def test_tile_relative_features_are_logs_of_the_tile_against_its_output():
    shape = np.array([100, 200, -1, -1, -1, -1], dtype=np.float64)
    config_feat = np.zeros((2, 24), dtype=np.float32)
    config_feat[0, 8:10] = [64, 128]        # 2 x 2 tiles of 64 x 128 cover 128 x 256 for 100 x 200
    config_feat[1, 8:10] = [100, 0]         # one tile of 100 x 200
    names = features_tile.tile_feature_names({"tile_relative"})
    f = dict(zip(names, features_tile.tile_features(shape, config_feat, {"tile_relative"}).T))
    assert len(names) == 13 and not any(n.startswith("output_bounds") for n in names)
    assert np.allclose(f["rel_log_tiles"], [np.log(4), 0])
    assert np.allclose(f["rel_log_pad_ratio"], [np.log(128 * 256 / 20000), 0])
    assert np.allclose(f["rel_log_tile_fraction"], [np.log(64 * 128 / 20000), 0])
    assert np.allclose(f["rel_minor_rem128"], [0, 72 / 128])
    # the same tiles on an output 10x larger per dim: every ratio moves by its log, nothing saturates
    big = features_tile.tile_features(shape * np.array([10, 10, 1, 1, 1, 1]), config_feat, {"tile_relative"})
    assert np.isclose(dict(zip(names, big.T))["rel_log_tiles"][0] - f["rel_log_tiles"][0], np.log(16 * 16 / 4))


def test_graph_features_and_featurizer_rows():
    graph = two_config_layout_graph()
    spec = FeatureSpec(groups=ALL, node_stats=("mean", "max"), max_perm_rank=4, feature_chunk=1)
    values = dict(zip(graph_feature_names("layout", 2, spec), graph_features(graph, "layout", spec)))
    assert [values[k] for k in ("nodes", "edges", "configurable_nodes", "configs")] == [3, 2, 2, 2]
    assert values["opcode_26"] == 1 and values["opcode_63"] == 1 and values["opcode_0"] == 0
    assert np.isclose(values["node_mean_1"], 4.0) and values["node_max_0"] == 4.0
    assert np.isclose(values["config_node_mean_1"], 5.5)
    featurizer = GraphFeaturizer(graph, "layout", spec)
    matrix = featurizer.matrix()                             # chunks of one config, stacked
    assert matrix.shape == (2, len(featurizer.names))
    assert np.array_equal(matrix[1], featurizer.matrix(np.array([1]))[0])


def test_tile_featurizer_uses_the_root_output_shape():
    raw = np.stack([raw_row([7, 7], [1, 0]), raw_row([100, 200], [1, 0], is_root=1), raw_row([3], [0])])
    config_feat = np.full((2, 24), -1, dtype=np.float32)       # -1 re-padded past the rank, as prune writes it
    config_feat[:, 8:10] = [[64, 128], [100, 200]]
    graph = PrunedGraph(
        graph_id="t", split="valid", node_feat=np.zeros((3, 1), dtype=np.float32), node_feat_raw=raw,
        node_opcode=np.array([63, 41, 63]), edge_index=np.array([[1, 0]]), node_ids=np.arange(3),
        config_runtime=np.array([1.0, 0.5]), config_count=np.ones(2, dtype=np.int64),
        config_inverse=np.array([0, 1, 1]), config_feat=config_feat)
    assert features_tile.output_shape(graph).tolist() == [100, 200, -1, -1, -1, -1]
    spec = FeatureSpec(groups=ALL, node_stats=("mean",), max_perm_rank=4, feature_chunk=1024)
    featurizer = GraphFeaturizer(graph, "tile", spec)
    f = dict(zip(featurizer.names, featurizer.matrix().T))
    assert np.allclose(f["pad_ratio"], [128 * 256 / 20000, 1.0])
    assert list(f["tiles_2"]) == [1, 1] and list(f["output_bounds_0"]) == [64, 100]
    assert f["configs"][0] == 3 and "config_node_mean_0" not in f


def test_layout_features_against_the_compiler_default():
    graph = two_config_layout_graph()
    groups = frozenset({"layout_default", "layout_disagree"})
    rows = {}
    for reference in ("none", "default", "both"):
        spec = FeatureSpec(groups=groups, node_stats=(), max_perm_rank=4, feature_chunk=1,
                           layout_reference=reference)
        featurizer = GraphFeaturizer(graph, "layout", spec)
        rows[reference] = dict(zip(featurizer.names, featurizer.matrix().T))
    absolute, relative, both = rows["none"], rows["default"], rows["both"]
    assert set(relative) == {f"{name}_vs_default" for name in absolute}
    assert set(both) == set(absolute) | set(relative)
    # the all-default configuration has 2 default blocks per tensor, 1 default output per kind (conv, reshape)
    assert list(relative["default_output_vs_default"]) == [-2, -1]
    assert list(relative["default_kernel_vs_default"]) == [-1, 0]
    assert list(relative["default_output_reshape_vs_default"]) == [-1, 0]
    assert list(relative["default_output_conv_vs_default"]) == [-1, -1]
    # the default configuration inserts no copy: disagreement counts are the same either way
    assert list(relative["disagree_edges_vs_default"]) == list(absolute["disagree_edges"]) == [0, 1]
    for name in absolute:
        assert np.array_equal(both[name], absolute[name]) and np.array_equal(both[f"{name}_vs_default"],
                                                                             relative[f"{name}_vs_default"])
