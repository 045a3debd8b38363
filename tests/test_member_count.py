"""benchmarks/member_count.py's table and benchmarks/bench_epoch.py's: the arithmetic by hand."""
from benchmarks.bench_epoch import table as epoch_table
from benchmarks.member_count import table


def seed(valid: tuple[float, float, float], test: tuple[float, float, float]) -> dict:
    return {"valid": dict(zip("123", valid)), "test": dict(zip("123", test))}


def test_member_count_table_pairs_by_seed():
    figures = {"a": [seed((0.5, 0.6, 0.7), (0.1, 0.2, 0.2)), seed((0.3, 0.6, 0.5), (0.3, 0.2, 0.4))],
               "b": [seed((0.1, 0.2, 0.3), (0.0, 0.0, 0.0)), seed((0.1, 0.2, 0.3), (0.0, 0.0, 0.0))]}
    lines = table(figures, {"a": {"1": [10.0, 20.0], "2": [30.0, 40.0]}})
    a_valid = lines[2].split(" | ")
    # 1: 0.4 ± 0.1414; 2: 0.6 ± 0; 3: 0.6 ± 0.1414; Δ3-2 per seed +0.1, -0.1; Δ2-1 +0.1, +0.3
    assert a_valid[2:8] == ["0.4000 ± 0.1414", "0.6000 ± 0.0000", "0.6000 ± 0.1414", "+0.0000 ± 0.1414",
                            "+0.2000 ± 0.1414", "15 / 35 |"]
    overall_valid = [line for line in lines if line.startswith("| **overall** | valid")][0].split(" | ")
    # within each seed the mean of a and b: 1 -> (0.3, 0.2), 3 -> (0.5, 0.4)
    assert overall_valid[2] == "0.2500 ± 0.0707" and overall_valid[4] == "0.4500 ± 0.0707"


def test_epoch_table_splits_the_epoch():
    case = {"collection": "c", "threads": 1, "parallel": 2, "wall": 9.0, "epoch": 2.0, "train": 1.5, "cpu": 2.5,
            "train_graphs": 3, "valid_graphs": 1, "valid_configs": 7}
    row = epoch_table([case]).splitlines()[2]
    assert row == "| c | 2 x 1 | 2.00 | 1.50 | 0.50 | 25% | 2.50 | 1.00 |"
