"""Run the grid: in this process, in local worker processes, or on a Dask distributed cluster.

Rows come back in the grid's order whichever way the cells ran, so the only differences between runs are the
timing columns (and any solve that a time limit cut short, whose incumbent depends on machine speed).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

from synergy_opt.bench.cells import RunOptions, run_cell
from synergy_opt.bench.grid import Cell
from synergy_opt.cli.parallel import MAX_WORKERS, run_in_order
from synergy_opt.validation import InstanceOf, Integer, Optional, checked

Row = dict[str, Any]
Progress = Callable[[Row], None]
# Imported once by the fork server, so that every worker process starts with the solvers loaded.
PRELOAD = ["synergy_opt.bench.cells"]


@checked(options=Optional(InstanceOf(RunOptions)), workers=Integer(1, MAX_WORKERS))
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
    cells = list(cells)  # a generator is read once, here (checking it emptied it)
    for index, cell in enumerate(cells):  # build_grid's cells (a mechanism's name alone ran as an error row)
        InstanceOf(Cell)(f"cells[{index}]", cell)
    run = functools.partial(run_cell, options=options or RunOptions())
    return run_in_order(run, cells, workers=workers, dask=dask, progress=progress, preload=PRELOAD)



def cell_fields(cell: Cell, options: RunOptions) -> dict[str, Any]:
    """What a cell's row depends on (its key in a result folder's journal): instance, mechanism, solver, options.

    ``warm_up`` is left out: it changes timings only.
    """
    settings = dataclasses.asdict(options)
    settings.pop("warm_up", None)
    return {"spec": dataclasses.asdict(cell.spec), "mechanism": cell.mechanism, "solver": cell.solver,
            "options": settings}
