"""pipeline.lgbm_model.infer: a missing model is named with the stage that writes it."""
from __future__ import annotations

import pytest

from pipeline.errors import PipelineError
from pipeline.lgbm_model import infer


def test_load_booster_names_the_missing_model(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"lgbm/tile-xla/model.txt: missing; run stage lgbm"):
        infer.load_booster(tmp_path / "lgbm" / "tile-xla")


@pytest.fixture(scope="module")
def model_text():
    import lightgbm as lgb
    import numpy as np

    booster = lgb.train({"objective": "regression", "verbose": -1, "num_threads": 1, "min_data_in_leaf": 2},
                        lgb.Dataset(np.random.default_rng(0).random((40, 3)), label=np.arange(40.0)), 3)
    return booster.model_to_string()


def test_load_booster_reads_a_model_as_lightgbm_saves_it(tmp_path, model_text):
    (tmp_path / "model.txt").write_text(model_text)
    assert infer.load_booster(tmp_path).num_trees() == 3


@pytest.mark.parametrize("edit, found", [
    (lambda t: t.replace("num_class=1", "num_class=x"), "found num_class='x' where a ranker has 1"),
    (lambda t: t.replace("tree_sizes=", "tree_sizes=1 "), "found 4 trees whose 'tree_sizes' do not match their text"),
    (lambda t: t.replace("leaf_value=", "leaf_value=1 ", 1), "found 3 trees whose 'tree_sizes' do not match"),
    (lambda t: t.replace("tree_sizes=", "tree_sizes=a "), "found a 'tree_sizes' line that is not a list of byte")])
def test_load_booster_refuses_a_model_edited_by_hand_naming_it(tmp_path, model_text, edit, found):
    """num_class=x loaded as 0 classes, then predict ended in a ValueError traceback (could not broadcast (n,0));
    tree_sizes that do not match the trees (a tree edited by hand) aborted the process inside LightGBM's C++ parser
    (status 134, 'terminate called without an active exception'), naming no file."""
    (tmp_path / "model.txt").write_text(edit(model_text))
    with pytest.raises(PipelineError, match=rf"model\.txt: expected a LightGBM model as stage lgbm saves it; {found}"):
        infer.load_booster(tmp_path)
