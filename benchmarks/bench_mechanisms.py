"""Time every mechanism on production-derived full-load rounds and record how good each allocation is.

Run from the repository root::

    python benchmarks/bench_mechanisms.py                 # 128, 1024, 4096, 16384 GPUs; writes the CSV
    python benchmarks/bench_mechanisms.py --quick         # 128 GPUs, one repeat (a smoke run)

For each size and trace (single-GPU and multi-GPU jobs, split 20/70/10, seed 0) and each mechanism, the
allocation is computed ``--repeats`` times after one untimed warm-up, each time on the round generated afresh
(untimed), and the median wall time and process CPU time are kept (CPU time is what the mechanism costs when the
machine is shared; the load average at start is recorded too). Each allocation is scored by
:func:`synergy_opt.evaluate`; up to ``--ilp-max-gpus`` the ideal ILP optimum (the upper bound) is solved once to
report each mechanism's gap. Results go to ``benchmarks/results/mechanisms.csv``.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from synergy_opt import generate_round, run_mechanism, solve_ideal
from synergy_opt.evaluation import evaluate
from synergy_opt.instance import RoundInstance

SIZES = (128, 1024, 4096, 16384)
MECHANISMS = ("proportional", "greedy", "tune", "drf", "tetris", "near-opt")
RESULTS = Path(__file__).resolve().parent / "results" / "mechanisms.csv"


@dataclass(frozen=True)
class Row:
    gpus: int
    trace: str
    mechanism: str
    jobs: int
    repeats: int
    wall_median_s: float
    wall_min_s: float
    cpu_median_s: float
    objective: float
    vs_proportional: float
    ilp_objective: float | None
    gap_vs_ilp: float | None
    jobs_unplaced: int
    floors_violated: int
    jobs_split: int
    valid: bool
    load_avg_1min: float


def time_mechanism(make: Callable[[], RoundInstance], name: str, repeats: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``repeats`` runs, after one untimed warm-up run, each on the round made afresh by
    ``make`` (untimed): what one run caches on the instance (its profile groups, floors) must not help the next."""
    run_mechanism(make(), name)
    walls, cpus = [], []
    for _ in range(repeats):
        instance = make()
        wall, cpu = time.perf_counter(), time.process_time()
        run_mechanism(instance, name)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return walls, cpus


def bench(sizes: tuple[int, ...], mechanisms: tuple[str, ...], repeats: int, ilp_max_gpus: int) -> list[Row]:
    rows = []
    load = os.getloadavg()[0]
    for gpus in sizes:
        for multi_gpu in (False, True):
            trace = "multi" if multi_gpu else "single"
            def make(gpus: int = gpus, multi_gpu: bool = multi_gpu) -> RoundInstance:
                return generate_round(gpus, multi_gpu=multi_gpu, seed=0)

            instance = make()
            proportional = evaluate(instance, run_mechanism(instance, "proportional")).objective
            ilp = solve_ideal(instance).objective if gpus <= ilp_max_gpus else None
            for name in mechanisms:
                count = repeats if gpus < 16384 else max(1, min(repeats, 3))
                walls, cpus = time_mechanism(make, name, count)
                score = evaluate(instance, run_mechanism(instance, name))
                row = Row(
                    gpus=gpus,
                    trace=trace,
                    mechanism=name,
                    jobs=len(instance.jobs),
                    repeats=count,
                    wall_median_s=statistics.median(walls),
                    wall_min_s=min(walls),
                    cpu_median_s=statistics.median(cpus),
                    objective=score.objective,
                    vs_proportional=score.objective / proportional,
                    ilp_objective=ilp,
                    gap_vs_ilp=None if ilp is None else 1.0 - score.objective / ilp,
                    jobs_unplaced=len(score.unplaced),
                    floors_violated=len(score.floors_violated),
                    jobs_split=len(score.split_jobs),
                    valid=score.valid,
                    load_avg_1min=load,
                )
                rows.append(row)
                print(_line(row), flush=True)
    return rows


HEADER = (
    f"{'GPUs':>6} {'trace':<6} {'mechanism':<12} {'jobs':>6} {'wall ms':>9} {'cpu ms':>9} {'objective':>10} "
    f"{'vs prop':>8} {'gap ILP':>8} {'unplaced':>8} {'<floor':>6} {'split':>5}"
)


def _line(row: Row) -> str:
    gap = "-" if row.gap_vs_ilp is None else f"{100 * row.gap_vs_ilp:.1f}%"
    return (
        f"{row.gpus:>6} {row.trace:<6} {row.mechanism:<12} {row.jobs:>6} {1000 * row.wall_median_s:>9.2f} "
        f"{1000 * row.cpu_median_s:>9.2f} {row.objective:>10.2f} {row.vs_proportional:>8.3f} {gap:>8} "
        f"{row.jobs_unplaced:>8} {row.floors_violated:>6} {row.jobs_split:>5}"
    )


def write_csv(rows: list[Row], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in asdict(row).items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="cluster sizes in GPUs")
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), help="mechanism names")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per case (at most 3 at 16384 GPUs)")
    parser.add_argument("--ilp-max-gpus", type=int, default=1024, help="solve the ideal ILP up to this size")
    parser.add_argument("--out", type=Path, default=RESULTS, help="CSV to write")
    parser.add_argument("--quick", action="store_true", help="smoke run: 128 GPUs, one repeat, no CSV")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = [128], 1
    print(HEADER)
    rows = bench(tuple(args.sizes), tuple(args.mechanisms), args.repeats, args.ilp_max_gpus)
    if not args.quick:
        write_csv(rows, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
