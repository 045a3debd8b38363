"""Train the GNN's seed members side by side on a CPU (`gnn.member_workers`, issue 27: the second core).

One member trains on one core about as fast as on two (torch's intra-op threads gain little on these small graphs:
docs/decisions.md, member workers), so the members of `gnn.seeds` run in a pool of worker processes instead, each
with `gnn.num_threads // workers` torch threads (at least 1). Every member draws all its randomness from its own
seed (pipeline/graphnet/members.py), so a member trained in the pool is bit for bit the member trained alone with
the same thread count (tests/graphnet/test_graphnet_member_pool.py).

Workers are spawned (not forked: a forked OpenMP runtime can hang), import the stage afresh and return their
results to the parent, which writes the stage's outputs; their progress lines go to the same stdout, one line at a
time. Distributed (torchrun) and CUDA runs keep one member at a time.
"""
from __future__ import annotations

import multiprocessing
from typing import Callable, Sequence, TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")


def pool_size(workers: int, members: int, distributed: bool, device_type: str) -> int:
    """Processes that train members at once: `workers` (gnn.member_workers) capped at the member count; 1 when
    distributed or not on the CPU."""
    if distributed or device_type != "cpu":
        return 1
    return max(1, min(int(workers), int(members)))


def threads_per_worker(num_threads: int, workers: int) -> int:
    """Torch threads of one worker: gnn.num_threads shared by the workers, at least 1."""
    return max(1, int(num_threads) // max(1, int(workers)))


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def run_pool(task: Callable[[Job], Result], jobs: Sequence[Job], workers: int, threads: int) -> list[Result]:
    """`[task(job) for job in jobs]`, computed by `workers` spawned processes with `threads` torch threads each
    (in order of the jobs; a worker's exception is raised here). `task` must be a module-level function and the
    jobs picklable."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_init_worker, initargs=(threads,), maxtasksperchild=1) as pool:
        return pool.map(task, jobs, chunksize=1)


class Recorder:
    """Stands in for the tracking run inside a worker: keeps the rows `log` gets, for the parent to log."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def log(self, row: dict) -> None:
        self.rows.append(dict(row))
