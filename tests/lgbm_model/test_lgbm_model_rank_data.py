"""pipeline.lgbm_model.rank_data: runtime-quantile grades, query chunking, query sizes, progress totals."""
from __future__ import annotations

import numpy as np
import pytest
from lgbm_graphs import SLUG, lgbm_cfg, write_pruned_collection

from pipeline.lgbm_model import rank_data
from pipeline.pruned import iter_split
from pipeline.settings.lgbm import feature_spec


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return lgbm_cfg(write_pruned_collection(tmp_path_factory.mktemp("pruned")))


def test_relevance_labels_are_runtime_quantile_grades():
    labels = rank_data.relevance_labels(np.array([3.0, 1.0, 2.0, 2.0]), grades=4)
    assert labels.tolist() == [0, 3, 2, 2]                   # fastest highest, ties share a grade
    labels = rank_data.relevance_labels(np.random.default_rng(0).random(1000), grades=31)
    assert labels.min() == 0 and labels.max() == 30


def test_query_chunking_respects_the_row_limit():
    rng = np.random.default_rng(0)
    rows = np.arange(25001)
    queries = rank_data.split_queries(rows, 10000, rng)
    assert len(queries) == 3 and max(len(q) for q in queries) <= 10000
    assert np.array_equal(np.sort(np.concatenate(queries)), rows)


def test_rank_data_queries_never_exceed_max_query_rows(cfg):
    spec = feature_spec(cfg.lgbm)
    data = rank_data.build_rank_data(iter_split(cfg.paths.pruned_dir, SLUG, "train"), "layout", spec,
                                      configs_per_graph=50, label_grades=31, max_query_rows=25,
                                      rng=np.random.default_rng(0))
    assert max(data.group) <= 25 and sum(data.group) == len(data.label) == 6 * 50
    assert data.features.shape == (300, len(data.names))


def test_graph_bars_show_totals(cfg, capsys):
    spec = feature_spec(cfg.lgbm)
    graphs = list(iter_split(cfg.paths.pruned_dir, SLUG, "train"))
    rank_data.build_rank_data(iter(graphs), "layout", spec, 10, 31, 25, np.random.default_rng(0), desc="bar",
                               total=6)
    assert "0/6" in capsys.readouterr().err                          # n/N on a lazy iterator, not `0graph`
