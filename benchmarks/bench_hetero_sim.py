"""Gavel's kind of heterogeneous experiment: a Gavel msr trace on a k80:p100:v100 cluster (issue 23).

Run from the repository root::

    python benchmarks/bench_hetero_sim.py                      # msr_seed0_ed69ec on k80:2,p100:2,v100:2
    python benchmarks/bench_hetero_sim.py --trace msr_seed0_103959 --out benchmarks/results/hetero_sim_103959.csv

Each setting replays the whole trace (every job monitored), 360 s rounds, servers of 8 GPUs, 24 CPUs, 500 GB:

- ``agnostic+proportional``: Gavel's heterogeneity-agnostic max-min fairness, GPU-proportional CPU and memory;
- ``max-min+proportional``: Gavel's heterogeneity-aware max-min fairness, proportional;
- ``max-min+tune``: the same policy, Synergy-TUNE sharing CPU and memory on the chosen types (tune's default,
  spread fit);
- ``max-min+tune-paper``: the same with the paper's TUNE (best fit, ``fit="best"``);
- ``max-min+near-opt``: the same policy, near-opt;
- ``max-min+ideal``: the same policy, the ideal ILP per type on the types it chose (each type's servers pooled;
  an upper bound on every mechanism given those types);
- ``max-min+ideal-type-free``: the same policy's jobs each round, every job free to take any type it can use and
  any config, by the type-free ideal ILP (issue 20) on each type's pooled servers, each job's floor its
  throughput at the proportional share of the type the policy chose (docs/sim.md: the bound it is).

Average JCT, makespan, wall seconds and the load average go to ``benchmarks/results/hetero_sim.csv`` (the rows of
settings not run this time are kept; one trace and cluster per file: ``--out`` another for another), and a bar
chart of the average and p95 JCT per setting to ``hetero_sim.png`` beside it (``--plot-only`` redraws it from the
CSV).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import synergy_opt as so
from synergy_opt.hetero import HeteroCluster
from synergy_opt.sim.gavel import gavel_trace_file

SETTINGS = (("agnostic+proportional", "max_min_fairness_agnostic", "proportional", {}),
            ("max-min+proportional", "max_min_fairness", "proportional", {}),
            ("max-min+tune", "max_min_fairness", "tune", {}),
            ("max-min+tune-paper", "max_min_fairness", "tune", {"fit": "best"}),  # the paper's TUNE (best fit)
            ("max-min+near-opt", "max_min_fairness", "near-opt", {}),
            ("max-min+ideal", "max_min_fairness", "ideal", {}),
            ("max-min+ideal-type-free", "max_min_fairness", "ideal-type-free", {}))
RESULTS = Path(__file__).resolve().parent / "results" / "hetero_sim.csv"


def plot(rows: list[dict[str, object]], path: Path) -> None:
    """Average and p95 JCT per setting, one bar pair each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [str(row["setting"]) for row in rows]
    fig, ax = plt.subplots(figsize=(9, 4))
    for offset, column in ((-0.2, "avg_jct_h"), (0.2, "p95_jct_h")):
        ax.bar([i + offset for i in range(len(rows))], [float(str(row[column])) for row in rows], 0.4,
               label=column.replace("_jct_h", " JCT"))
    ax.set_xticks(range(len(rows)), names, rotation=20, ha="right")
    ax.set_ylabel("hours")
    ax.set_title(f"{rows[0]['trace']} on {rows[0]['types']} (servers per type)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="msr_seed0_ed69ec")
    parser.add_argument("--types", default="k80:2,p100:2,v100:2")
    parser.add_argument("--settings", type=lambda s: s.split(","), default=[name for name, *_ in SETTINGS])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--plot-only", action="store_true", help="redraw the chart from --out's CSV")
    args = parser.parse_args(argv)
    if args.plot_only:
        with args.out.open() as handle:
            plot(list(csv.DictReader(handle)), args.out.with_suffix(".png"))
        return 0
    trace = so.load_trace(gavel_trace_file(args.trace))
    cluster = HeteroCluster.of(args.types, 8, 24, 500)
    rows = []
    for name, policy, mechanism, options in SETTINGS:
        if name not in args.settings:
            continue
        load = os.getloadavg()[0]
        started = time.perf_counter()
        result = so.simulate(trace, cluster, policy=policy, mechanism=mechanism, round_s=360,
                             monitor=(0, len(trace)), **options)
        s = result.summary
        rows.append({"trace": args.trace, "types": args.types, "setting": name, "policy": policy,
                     "mechanism": mechanism, "jobs": len(trace), "avg_jct_h": s["avg_jct_h"],
                     "p95_jct_h": s["p95_jct_h"], "makespan_h": s["makespan_h"], "unfinished": s["unfinished"],
                     "rounds": s["rounds"], "wall_s": time.perf_counter() - started, "load_avg_1min": load})
        print(rows[-1], flush=True)
    # Settings not run this time keep their recorded rows (a long one, near-opt, need not be rerun with the rest).
    order = [name for name, *_ in SETTINGS]
    if args.out.is_file():
        with args.out.open(newline="") as handle:
            kept = [row for row in csv.DictReader(handle)
                    if row["setting"] not in args.settings
                    and (row["trace"], row["types"]) == (args.trace, args.types)]
        rows = sorted([*kept, *rows], key=lambda row: order.index(str(row["setting"])))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
