"""Train the GNN's seed members side by side on a CPU (`gnn.member_workers`, issue 27: the second core).

A member gains only 1.2-1.4x from a second torch thread on these small graphs (docs/decisions.md, member workers),
so the members of `gnn.seeds` run in a pool of worker processes instead, `workers` at a time, each with
`gnn.num_threads` shared by the members of its round (`member_threads`). Every member draws all its randomness from
its own seed (pipeline/graphnet/members.py), so a member trained in the pool is bit for bit the member trained
alone with the same thread count (tests/graphnet/test_graphnet_member_pool.py).

Workers are spawned (not forked: a forked OpenMP runtime can hang), import the stage afresh and return their
results to the parent, which writes the stage's outputs; their progress lines go to the same stdout, one line at a
time. Distributed (torchrun) and CUDA runs keep one member at a time. Stage autotune verifies its built-in test
programs in the same kind of pool (`imap_pool`, pipeline/tuning/verify.py), a worker taking one after another.
"""
from __future__ import annotations

import multiprocessing
from typing import Callable, Iterator, Sequence, TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")


def pool_size(workers: int, members: int, distributed: bool, device_type: str) -> int:
    """Processes that train members at once: `workers` (gnn.member_workers) capped at the member count; 1 when
    distributed or not on the CPU."""
    if distributed or device_type != "cpu":
        return 1
    return max(1, min(int(workers), int(members)))


def member_threads(num_threads: int, workers: int, members: int, position: int) -> int:
    """Torch threads of the member at 0-based `position`: gnn.num_threads shared by the members of its round (the
    members run `workers` at a time, in order), at least 1. A last, short round gets more of them: the third of
    three members on two workers trains with both threads once the first two are done."""
    workers = max(1, int(workers))
    start = position // workers * workers
    in_round = min(workers, int(members) - start)
    return max(1, int(num_threads) // in_round)


def run_pool(task: Callable[[Job], Result], jobs: Sequence[Job], workers: int) -> list[Result]:
    """`[task(job) for job in jobs]`, computed by `workers` spawned processes, a fresh one per job (in order of the
    jobs; a worker's exception is raised here). `task` must be a module-level function that sets its own torch
    threads, and the jobs picklable."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, maxtasksperchild=1) as pool:
        return pool.map(task, jobs, chunksize=1)


def imap_pool(task: Callable[[Job], Result], jobs: Sequence[Job], workers: int) -> Iterator[Result]:
    """`task(job)` of every job, as each finishes (any order), computed by `workers` spawned processes that each take
    one job after another (stage autotune's programs: a worker's imports and models serve several jobs). `task` must
    be a module-level function that sets its own torch threads, the jobs picklable."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers) as pool:
        yield from pool.imap_unordered(task, jobs, chunksize=1)


class Recorder:
    """Stands in for the tracking run inside a worker: keeps the rows `log` gets, for the parent to log."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def log(self, row: dict) -> None:
        self.rows.append(dict(row))
