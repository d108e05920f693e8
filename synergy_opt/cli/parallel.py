"""Run a function over a list of items: in this process, in local worker processes, or on a Dask cluster.

The bench's grid (:func:`synergy_opt.bench.run_grid`) and the simulator's sweep run through
:func:`run_in_order`. Results come back in the order of the items whichever way they ran.

Faults in the run: Ctrl-C (``KeyboardInterrupt``) stops the workers (they ignore SIGINT themselves, so that
only this process reports it) and is raised again here; a worker process that dies (killed, out of memory)
raises :class:`WorkerDiedError` once the results that did finish have been handed to ``on_result``, also when
it dies halfway through sending its result (see :func:`_end_workers`).
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from synergy_opt.errors import SynergyError

Item = TypeVar("Item")
Result = TypeVar("Result")
CONNECT_TIMEOUT = "10s"  # a wrong --dask address fails in seconds, not after distributed's 30 s default
MAX_WORKERS = 1024  # --workers' bound: local processes beyond this are a typo, not a machine
LIVENESS_POLL_SECONDS = 1.0  # how often the workers are checked while no result arrives
# How long the pool may go on after a worker died without noticing it before the workers are ended: long enough
# for a healthy worker to finish sending a large result (the pool reads it, then reports the death).
DEATH_GRACE_SECONDS = 5.0


class WorkerDiedError(SynergyError):
    """A worker process ended without returning (killed by a signal, out of memory): the run cannot finish."""


def run_in_order(
    function: Callable[[Item], Result],
    items: Sequence[Item],
    *,
    workers: int = 1,
    dask: Any = None,
    progress: Callable[[Result], None] | None = None,
    preload: Sequence[str] = (),
    on_result: Callable[[int, Result], None] | None = None,
    local: Callable[[Item], Result] | None = None,
) -> list[Result]:
    """``[function(item) for item in items]``, here, in ``workers`` local processes or on Dask.

    ``function`` and the items must pickle (a module-level function, or a ``functools.partial`` of one).
    ``preload`` names modules the fork server imports once, so that every worker process starts with them.
    The results come back in the order of ``items``; as each finishes, ``on_result(index, result)`` and then
    ``progress(result)`` are called in this process. ``local``, if given, replaces ``function`` when the items
    run in this process (it may hold what does not pickle, such as a progress bar).
    """

    def done(index: int, result: Result) -> None:
        if on_result is not None:
            on_result(index, result)
        if progress is not None:
            progress(result)

    if dask is not None:
        return _run_dask(function, items, dask, done)
    if workers > 1 and len(items) > 1:
        return _run_processes(function, items, min(workers, len(items)), done, preload)
    here = local or function
    results = []
    for index, item in enumerate(items):
        results.append(here(item))
        done(index, results[-1])
    return results


def _ignore_interrupt() -> None:
    """Workers leave Ctrl-C to the main process, which stops them and reports it once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_processes(
    function: Callable[[Item], Result], items: Sequence[Item], workers: int, done: Callable[[int, Result], None],
    preload: Sequence[str],
) -> list[Result]:
    # forkserver: workers fork from a clean server, never from this process, which may hold solver threads.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))
    results: list[Result | None] = [None] * len(items)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_ignore_interrupt)
    futures: dict[Future[Result], int] = {}
    try:
        for index, item in enumerate(items):
            futures[pool.submit(function, item)] = index
        broken: BaseException | None = None
        pending = set(futures)
        death_seen: float | None = None  # when a dead worker was first seen while no result came
        while pending:
            finished, pending = wait(pending, timeout=LIVENESS_POLL_SECONDS, return_when=FIRST_COMPLETED)
            if not finished and _a_worker_died(pool):
                death_seen = time.monotonic() if death_seen is None else death_seen
                if time.monotonic() - death_seen >= DEATH_GRACE_SECONDS:
                    _end_workers(pool)  # the pool never noticed: see _end_workers
            for future in finished:
                error = future.exception()
                if isinstance(error, BrokenProcessPool):
                    broken = error  # keep collecting: results that finished before the death still count
                    continue
                if error is not None:
                    raise error
                results[futures[future]] = future.result()
                done(futures[future], future.result())
        if broken is not None:
            unfinished = sum(1 for result in results if result is None)
            # Nothing finished: maybe no worker could start (each imports the main script).
            hint = ("; or none could start: worker processes import the main script, so a script that runs "
                    "several workers must do so under `if __name__ == \"__main__\":`"
                    ) if unfinished == len(items) else ""
            raise WorkerDiedError(
                f"a worker process died (killed, or out of memory) with {unfinished} of {len(items)} items "
                f"unfinished{hint}"
            ) from None
    except BaseException:
        _stop(pool, futures)
        raise
    pool.shutdown(wait=True)
    return [result for result in results if result is not None]


def _workers(pool: ProcessPoolExecutor) -> list[Any]:
    """The pool's worker processes (the executor keeps them private; none once it is shut down)."""
    return list((getattr(pool, "_processes", None) or {}).values())


def _a_worker_died(pool: ProcessPoolExecutor) -> bool:
    """Whether a worker process has ended (during a run they end only by dying: this pool sets no
    ``max_tasks_per_child``, whose workers would end on their own)."""
    return any(process.exitcode is not None for process in _workers(pool))


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """End every worker now, and let the pool see it even when one died halfway through sending its result.

    The pool's manager thread then waits forever for the rest of that message (seen on Python 3.11): no future
    fails, and shutting the pool down waits on that thread for ever. Once the workers are ended, this process
    holds the last writing end of the result pipe; closing it ends the manager's read (messages already in the
    pipe are read first), and the pool reports itself broken as it does for any other death.
    """
    processes = _workers(pool)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    if writer is not None:
        writer.close()


def _stop(pool: ProcessPoolExecutor, futures: dict[Future[Any], int]) -> None:
    """Cancel what has not started and end the workers now (Ctrl-C, a fault): nothing waits for them."""
    for future in futures:
        future.cancel()
    # The executor has no public way to end running workers (Python 3.14 adds terminate_workers()).
    _end_workers(pool)
    pool.shutdown(wait=True, cancel_futures=True)


def _run_dask(
    function: Callable[[Item], Result], items: Sequence[Item], dask: Any, done: Callable[[int, Result], None]
) -> list[Result]:
    from distributed import Client  # the optional "distributed" extra, needed only with --dask
    from distributed import as_completed as dask_completed

    own = not isinstance(dask, Client)
    client = Client(dask, timeout=CONNECT_TIMEOUT) if own else dask
    futures: list[Any] = []
    try:
        # pure=False: a re-run must time its items again, not reuse the scheduler's cached results.
        futures = client.map(function, list(items), pure=False)
        index = {future.key: position for position, future in enumerate(futures)}
        results: list[Result | None] = [None] * len(items)
        for future in dask_completed(futures):
            result = future.result()
            results[index[future.key]] = result
            done(index[future.key], result)
        return [result for result in results if result is not None]
    except BaseException:
        client.cancel(futures)
        raise
    finally:
        if own:
            client.close()
