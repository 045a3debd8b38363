"""pipeline.parallel.ordered_map: job order kept, the same results in one or several processes, failures raised."""
from __future__ import annotations

import operator

import pytest

from pipeline.parallel import ordered_map


def test_results_in_job_order_in_one_and_two_processes():
    jobs = [(k, 10) for k in range(7)]
    expected = [k * 10 for k in range(7)]
    assert ordered_map(operator.mul, jobs, 1, "t", "job", progress=False) == expected
    assert ordered_map(operator.mul, jobs, 2, "t", "job", progress=False) == expected
    assert ordered_map(operator.mul, [], 2, "t", "job", progress=False) == []


def test_a_failing_job_is_raised_here():
    for workers in (1, 2):
        with pytest.raises(ZeroDivisionError):
            ordered_map(operator.truediv, [(1, 1), (1, 0), (2, 1)], workers, "t", "job", progress=False)
