"""Run the grid: in this process, in local worker processes, or on a Dask distributed cluster.

Rows come back in the grid's order whichever way the cells ran, so the only differences between runs are the
timing columns (and any solve that a time limit cut short, whose incumbent depends on machine speed).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from synergy_opt.benchmarking.cells import RunOptions, run_cell
from synergy_opt.benchmarking.grid import Cell

Row = dict[str, Any]
Progress = Callable[[Row], None]
# Imported once by the fork server, so that every worker process starts with the solvers loaded.
_PRELOAD = ["synergy_opt.benchmarking.cells"]
CONNECT_TIMEOUT = "10s"  # a wrong --dask address fails in seconds, not after distributed's 30 s default


def run_grid(
    cells: Sequence[Cell],
    options: RunOptions | None = None,
    *,
    workers: int = 1,
    dask: Any = None,
    progress: Progress | None = None,
) -> list[Row]:
    """Run every cell and return the rows in the order of ``cells``.

    Parameters
    ----------
    workers
        1: run here; N > 1: a pool of N local processes.
    dask
        The address of a running Dask scheduler (``tcp://host:8786``), or a ``distributed.Client``; takes
        precedence over ``workers``. Workers must be able to import ``synergy_opt``.
    progress
        Called with each row as its cell finishes (in completion order).
    """
    options = options or RunOptions()
    done = progress or (lambda row: None)
    if dask is not None:
        return _run_dask(cells, options, dask, done)
    if workers > 1 and len(cells) > 1:
        return _run_processes(cells, options, workers, done)
    rows = []
    for cell in cells:
        rows.append(run_cell(cell, options))
        done(rows[-1])
    return rows


def _run_processes(cells: Sequence[Cell], options: RunOptions, workers: int, done: Progress) -> list[Row]:
    # forkserver: workers fork from a clean server, never from this process, which may hold solver threads.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    rows: list[Row | None] = [None] * len(cells)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(run_cell, cell, options): index for index, cell in enumerate(cells)}
        for future in as_completed(futures):
            row = future.result()
            rows[futures[future]] = row
            done(row)
    return [row for row in rows if row is not None]


def _run_dask(cells: Sequence[Cell], options: RunOptions, dask: Any, done: Progress) -> list[Row]:
    from distributed import Client
    from distributed import as_completed as dask_completed

    own = not isinstance(dask, Client)
    client = Client(dask, timeout=CONNECT_TIMEOUT) if own else dask
    try:
        # pure=False: a re-run must time its cells again, not reuse the scheduler's cached results.
        futures = client.map(run_cell, list(cells), options=options, pure=False)
        index = {future.key: position for position, future in enumerate(futures)}
        rows: list[Row | None] = [None] * len(cells)
        for future in dask_completed(futures):
            row = future.result()
            rows[index[future.key]] = row
            done(row)
        return [row for row in rows if row is not None]
    finally:
        if own:
            client.close()
