"""pipeline.graphnet.scoring: a missing member is named; a loaded member scores like the model it was saved from."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.members import member_dir
from pipeline.graphnet.scoring import load_member, member_predictions
from pruned_graphs import gnn_cfg, layout_model, make_layout_graph, settings_of


def test_load_member_names_the_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"seed3/model.pt: missing; run stage gnn"):
        load_member(tmp_path, 3, torch.device("cpu"), None)


def test_a_loaded_member_scores_as_the_saved_model(tmp_path):
    graph, model = make_layout_graph(n_configs=9), layout_model()
    ckpt.save_model(model, model.spec, member_dir(tmp_path, 0) / ckpt.MODEL_FILE, {})
    loaded = load_member(tmp_path, 0, torch.device("cpu"), None)
    gnn = settings_of(gnn_cfg())
    first = member_predictions(model.eval(), "layout", [graph], gnn, 7, torch.device("cpu"))[graph.graph_id]
    again = member_predictions(loaded, "layout", [graph], gnn, 7, torch.device("cpu"))[graph.graph_id]
    np.testing.assert_array_equal(first, again)
    assert first.shape == (graph.n_configs,) and np.ptp(first) > 0
    other_seed = member_predictions(loaded, "layout", [graph], gnn, 8, torch.device("cpu"))[graph.graph_id]
    assert not np.array_equal(first, other_seed)                   # TTA orderings come from the member's seed
