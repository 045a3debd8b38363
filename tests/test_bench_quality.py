"""benchmarks/bench_quality.py: the seed protocol's arithmetic (hand-checked) and its refusals."""
import pytest

from benchmarks.bench_quality import (DEV_PRESET, OVERALL, Variant, aggregate, mean_std, read_result, seed_range,
                                      to_markdown, with_dev_data)


def cell(valid: float, test: float, seconds: float = 2.0, **extra) -> dict:
    return {"valid": valid, "test": test, "valid_ceiling": 0.9, "test_ceiling": 0.8, "seconds": seconds, **extra}


RUNS = {  # runs[variant][model][collection][seed]
    "base": {"gnn": {"a": {0: cell(0.5, 0.4, best_epoch=3, stopped="plateau", test_worst=-2.0),
                           1: cell(0.7, 0.2, best_epoch=5, stopped="budget", test_worst=0.1)},
                     "b": {0: cell(0.1, 0.0), 1: cell(0.3, 0.2)}}},
    "wide": {"gnn": {"a": {0: cell(0.6, 0.4), 1: cell(0.9, 0.4)},
                     "b": {0: cell(0.1, 0.1), 1: cell(0.5, 0.2)}}},
}


def row(rows, variant, collection):
    return next(r for r in rows if r["variant"] == variant and r["collection"] == collection)


def test_mean_std_is_the_sample_std():
    assert mean_std([1.0, 3.0]) == (2.0, pytest.approx(2 ** 0.5))
    assert mean_std([4.0]) == (4.0, 0.0)


def test_aggregate_collection_rows_and_paired_deltas():
    rows = aggregate(RUNS, ["base", "wide"], ["gnn"], ["a", "b"], [0, 1])
    a = row(rows, "base", "a")
    assert a["valid_mean"] == pytest.approx(0.6) and a["valid_std"] == pytest.approx(0.1414213, abs=1e-6)
    assert a["test_mean"] == pytest.approx(0.3) and a["valid_ceiling"] == 0.9
    assert a["best_epoch"] == 4.0 and a["budget_stops"] == "1/2"
    assert "valid_delta_mean" not in a                       # the first variant is the reference
    assert a["test_worst"] == -2.0                           # the worst test graph over both seeds
    assert "test_worst" not in row(rows, "base", "b")        # not every run reported one
    wide = row(rows, "wide", "a")                            # deltas 0.1 and 0.2
    assert wide["valid_delta_mean"] == pytest.approx(0.15)
    assert wide["valid_delta_std"] == pytest.approx(0.0707107, abs=1e-6)
    assert wide["test_delta_mean"] == pytest.approx(0.1)     # deltas 0.0 and 0.2


def test_aggregate_overall_averages_collections_within_each_seed_first():
    rows = aggregate(RUNS, ["base", "wide"], ["gnn"], ["a", "b"], [0, 1])
    overall = row(rows, "base", OVERALL)                     # seed means 0.3 and 0.5
    assert overall["valid_mean"] == pytest.approx(0.4)
    assert overall["valid_std"] == pytest.approx(0.1414213, abs=1e-6)
    assert overall["seconds"] == pytest.approx(4.0)          # per-collection mean, summed over 2 collections
    assert overall["valid_ceiling"] == pytest.approx(0.9)
    wide = row(rows, "wide", OVERALL)                        # seed means 0.35, 0.7: deltas 0.05, 0.2
    assert wide["valid_delta_mean"] == pytest.approx(0.125)


def test_markdown_has_one_line_per_row():
    rows = aggregate(RUNS, ["base", "wide"], ["gnn"], ["a", "b"], [0, 1])
    text = to_markdown(rows, "# t")
    assert len([line for line in text.splitlines() if line.startswith("| base") or line.startswith("| wide")]) == 6
    assert "0.6000 ± 0.1414" in text and "+0.1500 ± 0.0707" in text
    assert "| 0.9000/0.8000 | -2.0000 |" in text


def test_read_result_takes_the_worst_test_graph(tmp_path):
    (tmp_path / "metrics" / "gnn").mkdir(parents=True)
    (tmp_path / "plots" / "gnn").mkdir(parents=True)
    (tmp_path / "metrics" / "gnn" / "tile-xla.json").write_text(
        '{"valid": {"score": 0.9}, "test": {"score": 0.5}, "ceiling": {"valid": 1.0, "test": 1.0}}')
    (tmp_path / "plots" / "gnn" / "tile-xla_per_graph.csv").write_text(
        "split,graph_id,score\nvalid,v,-9.0\ntest,a,1.0\ntest,b,-26.5\n")
    result = read_result(tmp_path / "metrics", "gnn", "tile-xla", 3.0, tmp_path / "plots")
    assert result["test"] == 0.5 and result["test_worst"] == -26.5         # the valid graph's -9 is not test
    assert "test_worst" not in read_result(tmp_path / "metrics", "gnn", "tile-xla", 3.0)


def test_variant_parse():
    assert Variant.parse("base=") == Variant("base", ())
    assert Variant.parse("x=prune.hops=2 gnn.hidden=64") == Variant("x", ("prune.hops=2", "gnn.hidden=64"))
    for bad in ("nohops", "=prune.hops=2", "d=data.generator.seed=3", "s=synthesize.workers=2"):
        with pytest.raises(SystemExit):
            Variant.parse(bad)


def test_seed_range_starts_at_the_first_seed_and_refuses_bad_counts():
    assert seed_range(0, 3) == [0, 1, 2]
    assert seed_range(3, 3) == [3, 4, 5]
    for first, count in ((0, 0), (-1, 3)):
        with pytest.raises(SystemExit):
            seed_range(first, count)


def test_the_development_preset_is_the_default_data():
    assert DEV_PRESET == "programs_large"
    assert with_dev_data(["gnn.hidden=8"]) == ["data=programs_large", "gnn.hidden=8"]
    assert with_dev_data(["data=programs", "gnn.hidden=8"]) == ["data=programs", "gnn.hidden=8"]
    assert with_dev_data(["data.root=/x", "data=tpugraphs"]) == ["data.root=/x", "data=tpugraphs"]
