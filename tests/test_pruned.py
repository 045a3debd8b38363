"""pipeline.pruned: the per-collection index read back as the stages read it."""
from __future__ import annotations

import re

import numpy as np
import pytest

from pipeline.pruned import PrunedGraph, collection_dir, graph_dir, iter_split, read_index, save_pruned_graph, write_index

SLUG = "tile-xla"
NA_LIKE_IDS = ("NA", "None", "nan", "null", "0001")     # file stems pandas would read as missing, or as a number


def tiny_graph(graph_id: str) -> PrunedGraph:
    return PrunedGraph(graph_id=graph_id, split="train", node_feat=np.zeros((2, 3), np.float32),
                       node_feat_raw=np.zeros((2, 140), np.float32), node_opcode=np.array([1, 2]),
                       edge_index=np.array([[1, 0]]), node_ids=np.array([0, 1]), config_runtime=np.array([1.0]),
                       config_count=np.ones(1, np.int64), config_inverse=np.zeros(1, np.int64))


def test_graph_ids_that_look_missing_or_numeric_are_read_verbatim(tmp_path):
    rows = [{"split": "train", "graph_id": g, "source_file": f"tile/xla/train/{g}.npz", "nodes": 2, "edges": 1,
             "nodes_pruned": 2, "edges_pruned": 1, "configs": 1, "configs_dedup": 1} for g in NA_LIKE_IDS]
    write_index(rows, collection_dir(tmp_path, SLUG) / "index.csv")
    for graph_id in NA_LIKE_IDS:
        save_pruned_graph(tiny_graph(graph_id), graph_dir(tmp_path, SLUG, "train", graph_id))
    table = read_index(tmp_path, SLUG)
    assert sorted(table["graph_id"]) == sorted(NA_LIKE_IDS) and table["nodes"].dtype == np.int64
    assert sorted(g.graph_id for g in iter_split(tmp_path, SLUG, "train")) == sorted(NA_LIKE_IDS)


def test_a_pruned_collection_of_other_data_is_refused_naming_the_change(tmp_path):
    """Stage lgbm or gnn run by hand after data.root changed, prune not re-run: they trained on the old graphs,
    wrote model and predictions, then died in a ValueError traceback scoring them (check_pruned_from, before)."""
    import json

    import pytest
    from conftest import make_layout_arrays, write_layout_splits, write_npz
    from pipeline.errors import PipelineError
    from pipeline.config import compose
    from pipeline.prune import prune_collection
    from pipeline.pruned import check_pruned_from
    from pipeline.settings.prune import prune_settings
    from pipeline.tpugraphs.dataset import Collection

    collection, folder = Collection.parse("layout-xla-random"), tmp_path / "data/npz/layout/xla/random"
    write_layout_splits(folder)
    prune_collection(tmp_path / "data", collection, tmp_path / "pruned",
                     prune_settings(compose(["data=programs_ci"]), collection))
    check_pruned_from(tmp_path / "pruned", collection, tmp_path / "data")           # the data it was pruned from
    out = collection_dir(tmp_path / "pruned", collection.slug)
    report = json.loads((out / "report.json").read_text())
    (out / "report.json").write_text(json.dumps({**report, "skipped": [{"split": "train", "graph_id": "z"}]}))
    (folder / "train/z.npz").write_bytes(b"skipped by prune.skip_invalid_train")
    check_pruned_from(tmp_path / "pruned", collection, tmp_path / "data")           # a skipped train graph is no change
    write_npz(folder / "valid/b2.npz", make_layout_arrays())
    with pytest.raises(PipelineError, match=rf"^{out}: expected the graphs of data.root {tmp_path / 'data'} \(valid\); "
                                            rf"found 1 graph\(s\) there not pruned \(\['b2'\]\): pruned from other data, "
                                            rf"re-run `python -m pipeline.prune --collection layout-xla-random`"):
        check_pruned_from(tmp_path / "pruned", collection, tmp_path / "data")
    (folder / "valid/b2.npz").unlink()
    (folder / "test/c.npz").rename(folder / "test/c2.npz")
    with pytest.raises(PipelineError, match=r"\(test\); found 1 pruned graph\(s\) not there \(\['c'\]\); 1 graph\(s\) "
                                            r"there not pruned \(\['c2'\]\)"):
        check_pruned_from(tmp_path / "pruned", collection, tmp_path / "data")
    (folder / "test/c2.npz").rename(folder / "test/c.npz")
    arrays = make_layout_arrays()
    arrays["node_config_feat"], arrays["config_runtime"] = arrays["node_config_feat"][:3], arrays["config_runtime"][:3]
    write_npz(folder / "train/a.npz", arrays)
    with pytest.raises(PipelineError, match=r"\(train\); found a.npz has 3 configurations, its pruned graph 4"):
        check_pruned_from(tmp_path / "pruned", collection, tmp_path / "data")


@pytest.mark.parametrize("text, expected", [
    ('{"skipped": [{"split": "train"', "not valid JSON"),                      # cut short: a JSONDecodeError before
    ('{"skipped": [{"split": "train"}]}', "expected `skipped` to list objects with a split and a graph_id"),
    ('{"skipped": "a"}', "expected `skipped` to list objects"),
    ('[]', "expected a JSON object")])
def test_a_report_that_is_not_prunes_is_one_line_naming_it(tmp_path, text, expected):
    from pipeline.errors import PipelineError
    from pipeline.pruned import skipped_graphs

    report = tmp_path / "report.json"
    report.write_text('{"skipped": [{"split": "train", "graph_id": "z", "source_file": "z.npz"}]}')
    assert skipped_graphs(report) == {("train", "z")}
    report.write_text(text)
    with pytest.raises(PipelineError, match=rf"^{report}: .*{re.escape(expected)}"):
        skipped_graphs(report)


def test_a_test_file_without_its_hidden_runtimes_is_counted_by_its_configurations(tmp_path):
    """Official test files may leave config_runtime out (the loader counts node_config_feat's rows): the check that the
    pruned graphs are the data root's counted such a file as None configurations and refused the real test split."""
    from conftest import make_layout_arrays, write_layout_splits, write_npz
    from pipeline.config import compose
    from pipeline.prune import prune_collection
    from pipeline.pruned import check_pruned_from
    from pipeline.settings.prune import prune_settings
    from pipeline.tpugraphs.dataset import Collection

    collection, folder = Collection.parse("layout-xla-random"), tmp_path / "data/npz/layout/xla/random"
    write_layout_splits(folder)
    arrays = make_layout_arrays()
    del arrays["config_runtime"]
    write_npz(folder / "test/c.npz", arrays)
    prune_collection(tmp_path / "data", collection, tmp_path / "pruned",
                     prune_settings(compose(["data=programs_ci"]), collection))
    check_pruned_from(tmp_path / "pruned", collection, tmp_path / "data")            # no refusal


def test_read_index_refuses_an_index_without_its_columns_in_one_line(tmp_path):
    """Was a plain ValueError: a traceback in every stage that reads index.csv (run_main shows PipelineError only)."""
    from pipeline.errors import PipelineError

    collection_dir(tmp_path, SLUG).mkdir(parents=True)
    (collection_dir(tmp_path, SLUG) / "index.csv").write_text("split,graph_id\nvalid,a\n")
    with pytest.raises(PipelineError, match=r"index\.csv: columns \[.*'nodes'.*\] missing; expected .*re-run the prune"):
        read_index(tmp_path, SLUG)


@pytest.mark.parametrize("edit, found", [
    ({"percentiles": {50: "x"}}, r"'x' at index 50"),
    ({"percentiles": {50: None}}, r"None at index 50"),
    ({"percentiles": {50: int("9" * 400)}}, r"9999.* at index 50"),
    ({"percentiles": {50: float("nan")}}, r"nan at index 50"),
    ({"percentiles": {0: -1.0}}, r"-1.0 at index 0"),
    ({"percentiles": {50: 0.0}}, r"0.0 at index 50"),                 # below percentile 49: not a percentile table
    ({"percentiles": {50: True}}, r"True at index 50"),
    ({"groups": None}, r"groups must count .*found None$"),
    ({"groups": "3"}, r"groups must count .*found '3'$"),
])
def test_spread_quantile_refuses_a_report_edited_by_hand_in_one_line(edit, found):
    """gnn reads prune's duplicate_spread for its hinge min_gap: a text, null or 400-digit percentile was a TypeError
    traceback (np.interp), a missing groups a KeyError; NaN gave min_gap nan and negative spreads a min_gap of -1.0
    with which the GNN trained silently (loss constant, valid 0.0)."""
    from pipeline.errors import PipelineError
    from pipeline.graphnet.losses import hinge_min_gap
    from pipeline.pruned import spread_quantile

    summary = {"groups": 3, "percentiles": [i / 1000 for i in range(101)]}
    assert spread_quantile(summary, 0.5, "r") == pytest.approx(0.05)
    for index, value in edit.get("percentiles", {}).items():
        summary["percentiles"][index] = value
    if "groups" in edit:
        summary["groups"] = edit["groups"]
    with pytest.raises(PipelineError, match=rf"^r: duplicate_spread\..*{found}"):
        spread_quantile(summary, 0.5, "r")
    with pytest.raises(PipelineError, match="^r: no duplicate_spread"):
        hinge_min_gap(0.005, 0.5, {}, "r")
