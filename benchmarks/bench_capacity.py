"""The highest load each mechanism sustains at Figure 9's setting (issue 19): measured, and bounded.

    python benchmarks/bench_capacity.py [--seeds 0,1,...,9] [--workers 1] [--mechanisms ...] [--traces]

Figure 9's setting: 128 GPUs (16 x (8, 24, 500)), FIFO, single-GPU jobs, split (20,70,10), 300 s rounds,
exact progress.

- ``measured``: :func:`synergy_opt.sim.capacity.saturated_run`, arrivals at 20 jobs/h (far past every
  mechanism's capacity, so the queue never empties), the jobs finished per hour between 150 h and 450 h;
  mean and range over ``--seeds``. Beside it, the bound for the finished jobs' own mix (the mechanism's LP)
  and the measured rate over it: a window's heavy-tailed draw moves the rate by a few percent, the
  same for every mechanism on a seed, so that ratio tells the mechanisms apart more sharply.
- ``bound``: :func:`synergy_opt.sim.capacity.fluid_capacity`, the pooled cluster's LP: the share alone
  (proportional), the best case or the share (tune-artifact), any config at or above the floor (every
  other mechanism; it bounds them all, the ideal bound included).

- ``traces``: each trace's own mix (its models' shares and mean work, :func:`synergy_opt.sim.capacity.trace_mix`,
  jobs 0-4999) in the same LPs, beside the rate it offers: the artifact's recorded Figure 9 trace and the
  generated ones (9 jobs/h, seeds 0-9 and 42); ``results/capacity_traces.csv``.

Writes ``results/capacity.csv`` (a row per mechanism: measured mean/min/max, its bound and which LP) and
``results/capacity_runs.csv`` (a row per run, appended as each finishes; recorded runs are not run again).
``bench_sim.py --parts plot`` draws them on the Figure 9 plot. Each run row records the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from run_log import append_row, recorded_rows, write_rows

from synergy_opt.cli.parallel import run_in_order
from synergy_opt.instance import Cluster
from synergy_opt.sim.artifact_trace import fig9_trace
from synergy_opt.sim.capacity import fluid_capacity, saturated_run, trace_mix
from synergy_opt.sim.trace import generate_trace

RESULTS = Path(__file__).resolve().parent / "results"
RUNS_CSV = RESULTS / "capacity_runs.csv"
TABLE_CSV = RESULTS / "capacity.csv"
CLUSTER = Cluster(16, 8, 24, 500)
# label -> (mechanism, options, the LP that bounds it)
MECHANISMS: dict[str, tuple[str, dict[str, str], str]] = {
    "proportional": ("proportional", {}, "proportional"),
    "tune-artifact": ("tune-artifact", {}, "best-or-share"),
    "tune (paper's order)": ("tune", {"sort": "demand", "fit": "best"}, "grid"),
    "tune (policy order)": ("tune", {"sort": "policy", "fit": "best"}, "grid"),
    "tune (spread)": ("tune", {"sort": "demand", "fit": "spread"}, "grid"),
    "near-opt": ("near-opt", {}, "grid"),
    "ideal": ("ideal", {}, "grid"),
}


def measure(item: tuple[str, int]) -> dict[str, Any]:
    label, seed = item
    mechanism, options, configs = MECHANISMS[label]
    started = time.perf_counter()
    run = saturated_run(mechanism, CLUSTER, seed=seed, **options)
    wall_s = time.perf_counter() - started
    # The bound for the finished jobs' own mix: the window's draw moves the rate, not only the mechanism.
    own = fluid_capacity(CLUSTER, configs=configs, shares=run.shares, work_h=run.work_h)
    return {"mechanism": label, "seed": seed, "jobs_per_h": run.jobs_per_h, "window_work_h": run.work_h,
            "window_bound": own, "over_window_bound": run.jobs_per_h / own, "wall_s": wall_s,
            "loadavg_1m": round(os.getloadavg()[0], 2)}


def _recorded() -> dict[tuple[str, int], dict[str, Any]]:
    return {(name, int(seed)): row for (name, seed), row in recorded_rows(RUNS_CSV, ("mechanism", "seed")).items()}


def _append(row: dict[str, Any]) -> None:
    append_row(RUNS_CSV, row)
    print(f"{row['mechanism']:<22} seed {row['seed']}: {row['jobs_per_h']:.3f} jobs/h, "
          f"{row['over_window_bound']:.3f} of its window's bound ({row['wall_s']:.0f} s, "
          f"load avg {row['loadavg_1m']})", flush=True)


TRACES_CSV = RESULTS / "capacity_traces.csv"
BOUNDS = ("proportional", "best-or-share", "grid")


def trace_bounds() -> None:
    """Each trace's offered rate against the bounds for its own mix (``results/capacity_traces.csv``)."""
    traces = [("artifact", 42, fig9_trace())]
    traces += [("generated", seed, generate_trace(jobs=5000, load=9.0, seed=seed)) for seed in (*range(10), 42)]
    rows = []
    for name, seed, trace in traces:
        shares, work_h, rate = trace_mix(trace, 0, 5000)
        bounds = {f"bound_{configs}": fluid_capacity(CLUSTER, configs=configs, shares=shares, work_h=work_h)
                  for configs in BOUNDS}
        rows.append({"trace": name, "seed": seed, "work_h": work_h, "offered_jobs_per_h": rate, **bounds,
                     "offered_over_grid_bound": rate / bounds["bound_grid"]})
        print(f"{name:9} seed {seed:2d}: {work_h:.2f} GPU-h a job, offered {rate:.2f} jobs/h, bounds "
              + ", ".join(f"{v:.2f}" for v in bounds.values()), flush=True)
    write_rows(TRACES_CSV, rows)
    print(f"wrote {TRACES_CSV}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9", help='comma-separated; "" for the bounds alone')
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--mechanisms", default=",".join(MECHANISMS))
    parser.add_argument("--traces", action="store_true", help="also each trace's own bound (capacity_traces.csv)")
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.traces:
        trace_bounds()
    labels = args.mechanisms.split(",")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    recorded = _recorded()
    todo = [(label, seed) for label in labels for seed in seeds if (label, seed) not in recorded]
    print(f"{len(todo)} saturated runs to do ({len(recorded)} recorded)", flush=True)
    run_in_order(measure, todo, workers=args.workers, progress=_append, preload=["synergy_opt.sim.capacity"])
    recorded = _recorded()
    rows = []
    for label, (_, _, configs) in MECHANISMS.items():
        mine = [row for (name, _), row in recorded.items() if name == label]
        rates = [float(row["jobs_per_h"]) for row in mine]
        ratios = [float(row["over_window_bound"]) for row in mine]
        rows.append({"mechanism": label, "seeds": len(rates),
                     "measured_jobs_per_h": statistics.fmean(rates) if rates else None,
                     "measured_min": min(rates) if rates else None, "measured_max": max(rates) if rates else None,
                     "bound_jobs_per_h": fluid_capacity(CLUSTER, configs=configs), "bound_configs": configs,
                     "mean_over_window_bound": statistics.fmean(ratios) if ratios else None,
                     "min_over_window_bound": min(ratios) if ratios else None,
                     "max_over_window_bound": max(ratios) if ratios else None})
    write_rows(TABLE_CSV, rows)
    for row in rows:
        measured = "-" if row["measured_jobs_per_h"] is None else (
            f"{row['measured_jobs_per_h']:.2f} [{row['measured_min']:.2f}-{row['measured_max']:.2f}]")
        ratio = "" if row["mean_over_window_bound"] is None else (
            f"   over its window's bound {row['mean_over_window_bound']:.3f} "
            f"[{row['min_over_window_bound']:.3f}-{row['max_over_window_bound']:.3f}]")
        print(f"{row['mechanism']:<22} measured {measured:>20} jobs/h   bound {row['bound_jobs_per_h']:.2f} "
              f"({row['bound_configs']}){ratio}")
    print(f"wrote {TABLE_CSV}")


if __name__ == "__main__":
    main()
