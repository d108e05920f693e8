"""The benchmark harness and its command line, ``python -m synergy_opt.bench`` (:mod:`~synergy_opt.bench.cli`).

- :mod:`~synergy_opt.bench.grid`: the (size, seed, trace, mechanism, solver) grid of cells;
- :mod:`~synergy_opt.bench.cells`: running one cell and scoring it as one CSV row;
- :mod:`~synergy_opt.bench.runner`: running the grid serially, in local processes or on Dask;
- :mod:`~synergy_opt.bench.table`: per-instance references, medians over seeds, the table and CSV;
- :mod:`~synergy_opt.bench.plots`: objective gap and time against cluster size.
"""

from synergy_opt.bench.cells import run_cell
from synergy_opt.bench.cli import main
from synergy_opt.bench.grid import (
    ALL_MECHANISMS,
    SOLVED,
    Cell,
    InstanceSpec,
    build_grid,
    generated_specs,
    saved_specs,
)
from synergy_opt.bench.runner import run_grid
from synergy_opt.bench.table import add_references, medians, write_csv
from synergy_opt.cli.table import read_csv

__all__ = [
    "ALL_MECHANISMS",
    "SOLVED",
    "Cell",
    "InstanceSpec",
    "add_references",
    "build_grid",
    "generated_specs",
    "main",
    "medians",
    "read_csv",
    "run_cell",
    "run_grid",
    "saved_specs",
    "write_csv",
]
