"""The historical embedding table of GST: the last summary pushed for every (graph, segment).

An entry holds the summaries of one batch of config rows, pushed together when the segment was trained with that
batch (a configuration-independent segment holds one summary shared by every config). A pull is served only when
every requested row is in the entry, so all the summaries a step reads for one segment were computed at the same
time, with the same weights and in the same batch: stale summaries of different ages would differ between configs
by the weight drift in between, and the ranking loss would chase those differences (tried: training diverged).
Entries are detached copies on the CPU, so the table costs `graphs x segments x configs_per_graph x
(1 + 2 * gnn.hidden) x 4` bytes and no device memory; only `push` writes. GST (pipeline.graphnet.gst) pushes a segment
when it trains it, and when a new config batch finds no entry (initialisation).
"""
from __future__ import annotations

import numpy as np
import torch


class HistoricalTable:
    """(graph_id, segment index) -> (config rows int64 [m] or None when shared, summaries float32 [m, dim])."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, int], tuple[np.ndarray | None, torch.Tensor]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[tuple[str, int]]:
        """The (graph_id, segment) pairs with an entry."""
        return sorted(self._entries)

    def push(self, graph_id: str, segment: int, rows: np.ndarray | None, summary: torch.Tensor) -> None:
        """Replace the entry by summaries [configs, dim] of config `rows` (None: one shared summary)."""
        values = summary.detach().float().cpu().clone()
        if rows is None:
            values = values.reshape(-1, values.shape[-1])[:1]                # [1, dim]
        else:
            rows = np.asarray(rows, dtype=np.int64).copy()
            if values.ndim != 2 or values.shape[0] != len(rows):
                raise ValueError(f"push {graph_id} segment {segment}: summary {tuple(values.shape)} does not match "
                                 f"{len(rows)} config rows")
        self._entries[(graph_id, int(segment))] = (rows, values)

    def pull(self, graph_id: str, segment: int, rows: np.ndarray | None) -> torch.Tensor | None:
        """Summaries [configs, dim] of config `rows` ([1, dim] for a shared entry, rows None), or None unless the
        entry holds every requested row."""
        entry = self._entries.get((graph_id, int(segment)))
        if entry is None:
            return None
        stored_rows, values = entry
        if rows is None or stored_rows is None:
            return values if rows is None and stored_rows is None else None
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(stored_rows)
        at = np.searchsorted(stored_rows, rows, sorter=order)               # position among the sorted rows
        at = np.minimum(at, len(stored_rows) - 1)
        position = order[at]
        if not np.array_equal(stored_rows[position], rows):
            return None
        return values[torch.from_numpy(position)]

    def state_dict(self) -> dict:
        return {key: (None if rows is None else rows.copy(), values.clone())
                for key, (rows, values) in self._entries.items()}

    def load_state_dict(self, state: dict) -> None:
        self._entries = {(graph_id, int(segment)): (rows, values.clone())
                         for (graph_id, segment), (rows, values) in state.items()}
