"""Run a function over a list of items: in this process, in local worker processes, or on a Dask cluster.

The bench's grid (:func:`synergy_opt.bench.run_grid`) and the simulator's sweep run through
:func:`run_in_order`. Results come back in the order of the items whichever way they ran.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
CONNECT_TIMEOUT = "10s"  # a wrong --dask address fails in seconds, not after distributed's 30 s default


def run_in_order(
    function: Callable[[Item], Result],
    items: Sequence[Item],
    *,
    workers: int = 1,
    dask: Any = None,
    progress: Callable[[Result], None] | None = None,
    preload: Sequence[str] = (),
) -> list[Result]:
    """``[function(item) for item in items]``, here, in ``workers`` local processes or on Dask.

    ``function`` and the items must pickle (a module-level function, or a ``functools.partial`` of one).
    ``preload`` names modules the fork server imports once, so that every worker process starts with them.
    The results come back in the order of ``items``; ``progress`` is called with each as it finishes.
    """
    done: Callable[[Result], None] = progress or (lambda result: None)
    if dask is not None:
        return _run_dask(function, items, dask, done)
    if workers > 1 and len(items) > 1:
        return _run_processes(function, items, workers, done, preload)
    results = []
    for item in items:
        results.append(function(item))
        done(results[-1])
    return results


def _run_processes(
    function: Callable[[Item], Result], items: Sequence[Item], workers: int, done: Callable[[Result], None],
    preload: Sequence[str],
) -> list[Result]:
    # forkserver: workers fork from a clean server, never from this process, which may hold solver threads.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))
    results: list[Result | None] = [None] * len(items)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(function, item): index for index, item in enumerate(items)}
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            done(result)
    return [result for result in results if result is not None]


def _run_dask(
    function: Callable[[Item], Result], items: Sequence[Item], dask: Any, done: Callable[[Result], None]
) -> list[Result]:
    from distributed import Client
    from distributed import as_completed as dask_completed

    own = not isinstance(dask, Client)
    client = Client(dask, timeout=CONNECT_TIMEOUT) if own else dask
    try:
        # pure=False: a re-run must time its items again, not reuse the scheduler's cached results.
        futures = client.map(function, list(items), pure=False)
        index = {future.key: position for position, future in enumerate(futures)}
        results: list[Result | None] = [None] * len(items)
        for future in dask_completed(futures):
            result = future.result()
            results[index[future.key]] = result
            done(result)
        return [result for result in results if result is not None]
    finally:
        if own:
            client.close()
