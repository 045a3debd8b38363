"""One ordered process-pool map for the stages that work item by item (prune: graphs; synthesize: programs)."""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence, TypeVar

from tqdm import tqdm

Result = TypeVar("Result")


def ordered_map(function: Callable[..., Result], jobs: Sequence[tuple], workers: int, desc: str, unit: str,
                progress: bool = True) -> list[Result]:
    """`[function(*job) for job in jobs]`, in job order, with a tqdm bar (n/N, ETA). `workers` > 1 runs the jobs
    in that many spawned processes (not forked: OpenMP, JAX and XLA thread pools do not survive a fork), so
    `function` must be a module-level function and the jobs picklable; the first failure cancels the jobs not
    started and is raised here."""
    bar = tqdm(total=len(jobs), desc=desc, unit=unit, mininterval=1.0, disable=not progress)
    try:
        if workers <= 1:
            results = []
            for job in jobs:
                results.append(function(*job))
                bar.update()
            return results
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(function, *job) for job in jobs]
            for future in futures:
                future.add_done_callback(lambda _: bar.update())
            try:
                return [f.result() for f in futures]
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise
    finally:
        bar.close()
