"""Node-feature normalisation: train statistics only, log columns, constant columns dropped."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.pruning.normalize import MAX_STANDARDISED, ColumnStats, Normalizer, fit_normalizer, log_mask, signed_log
from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.schema import NODE_FEAT_NAMES

COL = {name: i for i, name in enumerate(NODE_FEAT_NAMES)}


def test_log_mask_patterns():
    mask = log_mask(["*_product", "shape_dimensions_0"])
    assert mask[COL["shape_dimensions_product"]] and mask[COL["window_size_product"]]
    assert mask[COL["shape_dimensions_0"]] and not mask[COL["shape_dimensions_1"]]
    assert not mask[COL["layout_minor_to_major_0"]] and mask.sum() == 13 + 1   # 13 products


def test_signed_log_handles_padding():
    mask = np.array([True, False])
    x = signed_log(np.array([[-1.0, -1.0], [0.0, 3.0], [np.e - 1, 5.0]]), mask)
    assert np.allclose(x[:, 0], [-np.log(2), 0.0, 1.0]) and x[:, 1].tolist() == [-1, 3, 5]


def test_merged_statistics_equal_the_statistics_of_all_rows():
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(n, 4)) * 100 + 7 for n in (1, 5, 30)]
    merged = ColumnStats.combine((ColumnStats.of(p) for p in parts), n_cols=4)
    whole = np.concatenate(parts)
    assert merged.count == 36
    assert np.allclose(merged.mean, whole.mean(0)) and np.allclose(merged.m2 / 36, whole.var(0))
    assert np.array_equal(merged.min, whole.min(0)) and np.array_equal(merged.max, whole.max(0))


def _stats(x: np.ndarray, mask: np.ndarray) -> ColumnStats:
    return ColumnStats.of(signed_log(x, mask))


def test_fit_on_train_then_apply_to_valid():
    mask = log_mask(["shape_dimensions_product"])
    train = np.zeros((4, 140), np.float32)
    train[:, COL["parameter_number"]] = [1, 2, 3, 6]                     # mean 3, std sqrt(3.5)
    train[:, COL["shape_dimensions_product"]] = [0, 0, np.e - 1, np.e - 1]   # log: 0, 0, 1, 1 -> mean .5, std .5
    train[:, COL["is_root"]] = 1                                           # constant on train: dropped
    norm = fit_normalizer(_stats(train, mask), mask, pad_value=-1)
    assert norm.names == ["shape_dimensions_product", "parameter_number"]   # file column order
    assert norm.log == [True, False] and norm.train_nodes == 4
    valid = np.zeros((1, 140), np.float32)
    valid[0, COL["parameter_number"]] = 10
    valid[0, COL["shape_dimensions_product"]] = np.e ** 2 - 1
    valid[0, COL["is_root"]] = 0                                           # differs on valid, still dropped
    out = norm.apply(valid, "g.npz")
    assert out.dtype == np.float32 and out.shape == (1, 2)
    assert np.allclose(out[0], [(2 - 0.5) / 0.5, (10 - 3) / np.sqrt(3.5)], atol=1e-5)
    standardised = norm.apply(train, "g.npz")
    assert np.allclose(standardised.mean(0), 0, atol=1e-6) and np.allclose(standardised.std(0), 1)


def test_keep_constant_columns_and_errors():
    mask = np.zeros(140, bool)
    x = np.ones((3, 140))
    x[:, 0] = [1, 2, 3]
    norm = fit_normalizer(_stats(x, mask), mask, pad_value=-1, drop_constant=False)
    assert len(norm.columns) == 140 and norm.std[1] == 1.0 and norm.apply(x, "g.npz")[:, 1].tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="somewhere: no train nodes"):
        fit_normalizer(ColumnStats.empty(), mask, pad_value=-1, where="somewhere")


def test_save_load_roundtrip(tmp_path):
    mask = log_mask(["*_sum"])
    x = np.random.default_rng(0).integers(0, 9, size=(20, 140)).astype(np.float32)
    norm = fit_normalizer(_stats(x, mask), mask, pad_value=-1)
    norm.save(tmp_path / "normalizer.json")
    again = Normalizer.load(tmp_path / "normalizer.json")
    assert again == norm and np.array_equal(again.apply(x, "g.npz"), norm.apply(x, "g.npz"))


@pytest.mark.parametrize("change, found", [
    (lambda d: d.pop("columns"), "key 'columns': expected ascending distinct node_feat columns 0..139; found None"),
    (lambda d: d.update(columns=[3, 1]), "found [3, 1]"),
    (lambda d: d.update(columns=[0, 140]), "found [0, 140]"),
    (lambda d: d.update(log=[True]), "key 'log': expected a true/false per column; found [True]"),
    (lambda d: d.update(std=[1.0, 0.0]), "key 'std': expected a number > 0 per column; found [1.0, 0.0]"),
    (lambda d: d.update(mean=[0.0, "x"]), "key 'mean': expected a finite number per column"),
    (lambda d: d.update(mean=[0.0, True]), "key 'mean': expected a finite number per column"),
    (lambda d: d.update(mean=[0.0, 10 ** 400]), "key 'mean': expected a finite number per column"),  # OverflowError
    (lambda d: d.update(std=[1.0, 10 ** 400]), "key 'std': expected a number > 0 per column"),
    (lambda d: d.update(pad_value=None), "key 'pad_value': expected a finite number; found None"),
    (lambda d: d.update(train_nodes=True), "key 'train_nodes': expected a count; found True"),
    (lambda d: d.update(extra=1), "keys ['extra'] unknown; expected the normaliser stage prune writes"),
])
def test_a_normalizer_file_prune_never_writes_is_named(tmp_path, change, found):
    """predict, autotune and the GNN's joint sources load normalizer.json: one cut short was a JSONDecodeError
    traceback, one missing a key a TypeError, one with fewer log flags than columns an IndexError."""
    import json

    from pipeline.errors import PipelineError

    data = {"columns": [1, 2], "log": [True, False], "mean": [0.0, 1.0], "std": [1.0, 2.0], "pad_value": -1.0,
            "train_nodes": 3}
    path = tmp_path / "normalizer.json"
    path.write_text(json.dumps(data)[:40])
    with pytest.raises(PipelineError, match="normalizer.json: not valid JSON"):
        Normalizer.load(path)
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(PipelineError) as refusal:
        Normalizer.load(path)
    assert str(refusal.value).startswith(f"{path}: ") and found in str(refusal.value)
    assert str(refusal.value).endswith("run stage prune again (dvc repro)")


def test_min_std_floors_nearly_constant_columns():
    """A column almost constant on train (feature_group_count 1, once 2) puts an unseen 64 tens of deviations out;
    the floor keeps it at its log distance from the train mean."""
    mask = log_mask(["feature_group_count"])
    train = np.zeros((100, 140), np.float32)
    train[:, COL["feature_group_count"]] = 1
    train[0, COL["feature_group_count"]] = 2
    train[:, COL["parameter_number"]] = np.arange(100)                    # std ~ 29 > the floor: unchanged
    plain = fit_normalizer(_stats(train, mask), mask, pad_value=-1)
    floored = fit_normalizer(_stats(train, mask), mask, pad_value=-1, min_std=1.0)
    k = floored.names.index("feature_group_count")
    unseen = np.zeros((1, 140), np.float32)
    unseen[0, COL["feature_group_count"]] = 64
    mean = (99 * np.log(2) + np.log(3)) / 100
    assert plain.apply(unseen, "g.npz")[0, k] > 50
    assert floored.apply(unseen, "g.npz")[0, k] == pytest.approx(np.log(65) - mean, rel=1e-5)
    p = floored.names.index("parameter_number")
    assert floored.std[p] == plain.std[p] == pytest.approx(np.arange(100).std())


def test_a_value_that_standardises_past_the_bound_names_the_file_column_and_node():
    mask = log_mask(["shape_dimensions_product"])
    train = np.zeros((4, 140), np.float32)
    train[:, COL["parameter_number"]] = [0, 0, 0.5, 0.5]                    # mean .25, std .25
    train[:, COL["shape_dimensions_product"]] = [0, 0, np.e - 1, np.e - 1]
    norm = fit_normalizer(_stats(train, mask), mask, pad_value=-1)
    unseen = np.zeros((3, 140), np.float32)
    unseen[1, COL["parameter_number"]] = 3e38           # finite float32, 1.2e39 deviations out: inf as float32
    unseen[2, COL["shape_dimensions_product"]] = 3e38   # a logged column: log1p keeps it small, no error
    with pytest.raises(TpuGraphsFormatError) as info:
        norm.apply(unseen, "new/g.npz")
    assert str(info.value) == ("new/g.npz [key 'node_feat']: expected values that standardise within 1e+06 train "
                               "deviations (column 'parameter_number': train mean 0.25, std 0.25); found 3e+38 at node "
                               "1 (1 such values)")
    assert MAX_STANDARDISED == 1e6
    unseen[1, COL["parameter_number"]] = 300000.25      # (x - .25) / .25 = 1.2e6 deviations: finite, still refused
    with pytest.raises(TpuGraphsFormatError, match="found 300000 at node 1"):
        norm.apply(unseen, "new/g.npz")
    unseen[1, COL["parameter_number"]] = 200000.25      # 8e5 deviations: kept
    assert np.abs(norm.apply(unseen, "new/g.npz")).max() == pytest.approx(8e5)
