"""The GST historical table: one batch per (graph, segment), served only when it holds every requested row."""
from __future__ import annotations

import numpy as np
import torch

from pipeline.graphnet.history import HistoricalTable


def test_push_then_pull_in_any_row_order():
    table = HistoricalTable()
    table.push("g", 2, np.array([5, 1, 9]), torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    assert table.pull("g", 2, np.array([1, 9, 5])).tolist() == [[3.0, 4.0], [5.0, 6.0], [1.0, 2.0]]
    assert table.pull("g", 2, np.array([9])).tolist() == [[5.0, 6.0]]
    assert table.keys() == [("g", 2)] and len(table) == 1


def test_a_batch_the_entry_does_not_hold_is_not_served():
    table = HistoricalTable()
    table.push("g", 0, np.array([3, 4]), torch.ones(2, 2))
    assert table.pull("g", 0, np.array([3, 7])) is None          # row 7 missing: no mix of ages
    assert table.pull("g", 1, np.array([3])) is None             # another segment
    assert table.pull("h", 0, np.array([3])) is None             # another graph
    table.push("g", 0, np.array([7, 8]), torch.zeros(2, 2))      # a new batch replaces the old one
    assert table.pull("g", 0, np.array([3])) is None and table.pull("g", 0, np.array([8])).tolist() == [[0.0, 0.0]]


def test_shared_entry_of_a_config_independent_segment():
    table = HistoricalTable()
    table.push("g", 0, None, torch.tensor([[7.0, 8.0], [7.0, 8.0]]))
    assert table.pull("g", 0, None).tolist() == [[7.0, 8.0]]
    assert table.pull("g", 0, np.array([0])) is None


def test_entries_are_detached_copies():
    table = HistoricalTable()
    x = torch.ones(1, 3, requires_grad=True)
    y = x * 2
    table.push("g", 0, np.array([0]), y)
    y.data.fill_(5.0)
    values = table.pull("g", 0, np.array([0]))
    assert not values.requires_grad and values.tolist() == [[2.0, 2.0, 2.0]]


def test_state_dict_round_trip():
    table = HistoricalTable()
    table.push("a", 0, np.array([3, 1]), torch.arange(4.0).reshape(2, 2))
    table.push("b", 1, None, torch.tensor([[9.0, 9.0]]))
    other = HistoricalTable()
    other.load_state_dict(table.state_dict())
    assert other.keys() == table.keys()
    assert other.pull("a", 0, np.array([1, 3])).tolist() == [[2.0, 3.0], [0.0, 1.0]]
    assert other.pull("b", 1, None).tolist() == [[9.0, 9.0]]
