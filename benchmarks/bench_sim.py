"""The simulator against the paper's Figures 9 and 11 and its artifact, and its speed (issue 9).

    python benchmarks/bench_sim.py [--parts fig9,split,speed] [--loads 2,3,4,5,6,7,8,9,10] [--workers 1]
                                   [--repeats 3]

``fig9``: the paper's Figure 9 setting as its artifact runs it (seed 42, 300 s rounds, FIFO, single-GPU jobs,
split (20,70,10), 128 GPUs, jobs 4000-4999 monitored, the run ends when the last of them finishes) for
proportional, tune and ideal at each load: average JCT, proportional/TUNE and TUNE/ideal, wall time
(``results/sim_fig9.csv``). Paper: 81 h -> 22 h at 9 jobs/h (3.7x), OPT 20 h; the artifact here 81.1 h and
21.9 h.

``split``: Figure 11c's shape, the (50,0,50) split on the multi-GPU trace under FIFO (same window), for
proportional, tune and greedy at loads up to and past the cluster's capacity (``results/sim_split.csv``).
Paper: TUNE as good as proportional, GREEDY worse at high load.

``speed``: one process, medians of ``--repeats`` of wall and of CPU seconds (``time.process_time``: the
seconds one core spends, whatever else loads the machine): the Figure 9 run at 9 jobs/h with
proportional, tune (target < 25 s; the artifact 496 s) and ideal (target < 3 min; the artifact's OPT:
hours), and a 20000-job run on 1024 GPUs with tune (target < 5 min): single-GPU jobs at 72 jobs/h (Figure 9's
9 jobs/h per 128 GPUs), a fixed trace of 20000 jobs (no more arrivals), run until every job has finished
(``results/sim_speed.csv``).

Every row records ``os.getloadavg()`` when its run finished: the machine is shared, compare ratios of one run.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from synergy_opt.cli.parallel import run_in_order
from synergy_opt.cli.table import read_csv
from synergy_opt.sim.sweep import RunOutcome, SimRun, SimSetting, run_one
from synergy_opt.sim.trace import Trace, generate_trace

RESULTS = Path(__file__).resolve().parent / "results"
FIG9 = SimSetting(gpus=128, policy="fifo", load=9.0, split=(20, 70, 10), multi_gpu=False, jobs=5000, seed=42,
                  round_s=300.0, monitor=(4000, 5000))
SPLIT = SimSetting(gpus=128, policy="fifo", load=4.0, split=(50, 0, 50), multi_gpu=True, jobs=5000, seed=42,
                   round_s=300.0, monitor=(4000, 5000))
FIG9_LOADS = (2, 3, 4, 5, 6, 7, 8, 9, 10)
SPLIT_LOADS = (2, 3, 4, 5)
FIG9_MECHANISMS = ("proportional", "tune", "tune (paper's order)", "ideal")
# Labels of the fig9 sweep's lines that are not a mechanism's bare name: (mechanism, options).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "tune (paper's order)": ("tune", {"sort": "demand", "fit": "best"}),
}
# The capacity markers drawn on the Figure 9 plot: bench_capacity.py's labels -> the plot's lines (a mechanism
# without a line gets a marker of its own colour).
CAPACITY_LINES = {"proportional": "proportional", "tune (spread)": "tune",
                  "tune (paper's order)": "tune (paper's order)", "ideal": "ideal", "tune-artifact": "tune-artifact",
                  "tune (policy order)": "tune (policy order)", "near-opt": "near-opt"}
# The paper's Figure 9 at 9 jobs/h and the artifact's simulator run on that setting (the figures).
PAPER = {"proportional": 81.0, "tune": 22.0, "ideal": 20.0}
ARTIFACT = {"proportional": (81.1, 465.0), "tune": (21.9, 496.0)}
TARGET_S = {"fig9 tune": 25.0, "fig9 ideal": 180.0, "1024 GPUs tune": 300.0}
BIG_GPUS, BIG_JOBS, BIG_LOAD = 1024, 20000, 72.0
SUMMARY = ("avg_jct_h", "p50_jct_h", "p95_jct_h", "p99_jct_h", "makespan_h", "jobs", "monitored", "unfinished",
           "rounds", "rounds_solved", "mechanism_s", "wall_s")


def _row(outcome: RunOutcome, **extra: Any) -> dict[str, Any]:
    s = outcome.summary
    return {"load": s["load"], "split": s["split"], "multi_gpu": s["multi_gpu"], "mechanism": s["mechanism"],
            **{key: s[key] for key in SUMMARY}, **extra, "loadavg_1m": round(os.getloadavg()[0], 2)}


def _write(rows: list[dict[str, Any]], name: str) -> Path:
    path = RESULTS / name
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")
    return path


def _plot(rows: list[dict[str, Any]], name: str, capacities: Sequence[tuple[str, float, str]] = ()) -> None:
    from synergy_opt.cli.plots import save_figure
    from synergy_opt.sim.plots import jct_vs_load_figure

    print(f"wrote {save_figure(jct_vs_load_figure(rows, capacities), RESULTS / name)}")


def _labelled_run(item: tuple[str, SimRun]) -> tuple[str, RunOutcome]:
    label, run = item
    return label, run_one(run)


def _sweep(base: SimSetting, loads: Sequence[float], mechanisms: Sequence[str], workers: int) -> list[dict[str, Any]]:
    """Each mechanism (a label of ``VARIANTS`` or a mechanism's name) at each load; rows named by the label."""
    items = [(m, SimRun(replace(base, load=float(load)), VARIANTS.get(m, (m, {}))[0],
                        options=VARIANTS.get(m, (m, {}))[1]))
             for load in loads for m in mechanisms]
    rows: dict[tuple[float, str], dict[str, Any]] = {}

    def done(result: tuple[str, RunOutcome]) -> None:
        label, outcome = result
        row = _row(outcome)
        row["mechanism"] = label
        rows[(row["load"], label)] = row
        print(f"  load {row['load']:>4g} {label:22} avg JCT {row['avg_jct_h']:7.2f} h  "
              f"{row['rounds']:6d} rounds  {row['wall_s']:6.1f} s  (load avg {row['loadavg_1m']})", flush=True)

    run_in_order(_labelled_run, items, workers=workers, progress=done, preload=["synergy_opt.sim.sweep"])
    return [rows[(float(load), m)] for load in loads for m in mechanisms]


def _ratio(rows: list[dict[str, Any]], load: float, top: str, bottom: str) -> float | None:
    values = {row["mechanism"]: row["avg_jct_h"] for row in rows if row["load"] == load}
    return values[top] / values[bottom] if top in values and bottom in values else None


def _print(rows: list[dict[str, Any]], loads: Sequence[float], ratios: list[tuple[str, str, str]]) -> None:
    """Average JCT per load and mechanism, then each ``(header, mechanism, column)`` ratio."""
    mechanisms = list(dict.fromkeys(row["mechanism"] for row in rows))
    # Each column as wide as its label and a space (a label such as "tune (paper's order)" is wider than 14).
    widths = [max(14, len(m) + 1) for m in mechanisms]
    print("load " + "".join(f"{m:>{w}}" for m, w in zip(mechanisms, widths, strict=True))
          + "".join(f"{h:>14}" for h, _, _ in ratios))
    for load in loads:
        mine = {row["mechanism"]: row for row in rows if row["load"] == float(load)}
        # A mechanism recorded at some loads only (a later addition to the sweep) prints "-" at the others.
        print(f"{load:>4g} " + "".join(f"{mine[m]['avg_jct_h']:{w}.2f}" if m in mine else f"{'-':>{w}}"
                                       for m, w in zip(mechanisms, widths, strict=True))
              + "".join(f"{mine[m][column]:14.3f}" if m in mine and mine[m][column] is not None else f"{'-':>14}"
                        for _, m, column in ratios))


def fig9(loads: Sequence[float], workers: int, mechanisms: Sequence[str]) -> None:
    """The sweep of ``mechanisms``, merged into ``sim_fig9.csv`` (rows of other mechanisms or loads kept)."""
    print("Figure 9 setting: FIFO, single-GPU, (20,70,10), 128 GPUs, seed 42, jobs 4000-4999")
    fresh = _sweep(FIG9, loads, mechanisms, workers)
    path = RESULTS / "sim_fig9.csv"
    kept = [row for row in (read_csv(path) if path.exists() else [])
            if (float(row["load"]), row["mechanism"]) not in {(r["load"], r["mechanism"]) for r in fresh}]
    rows = sorted(kept + fresh, key=lambda row: (float(row["load"]), _order(row["mechanism"])))
    loads = sorted({float(row["load"]) for row in rows})
    for row in rows:
        load = row["load"]
        row["prop_over_tune"] = _ratio(rows, load, "proportional", "tune")
        row["tune_over_ideal"] = _ratio(rows, load, "tune", "ideal")
        at_9 = load == 9.0
        row["paper_avg_jct_h"] = PAPER.get(row["mechanism"]) if at_9 else None
        row["artifact_avg_jct_h"] = ARTIFACT[row["mechanism"]][0] if at_9 and row["mechanism"] in ARTIFACT else None
    _print(rows, loads, [("prop/tune", "tune", "prop_over_tune"), ("tune/ideal", "tune", "tune_over_ideal")])
    _write(rows, "sim_fig9.csv")
    plot_fig9()


def _order(label: str) -> int:
    return FIG9_MECHANISMS.index(label) if label in FIG9_MECHANISMS else len(FIG9_MECHANISMS)


def plot_fig9() -> None:
    """``sim_fig9.png`` from ``sim_fig9.csv``, with each mechanism's capacity (``capacity.csv``, from
    ``bench_capacity.py``: measured, else the fluid bound) marked on the load axis."""
    rows = read_csv(RESULTS / "sim_fig9.csv")
    capacities = []
    path = RESULTS / "capacity.csv"
    with path.open(newline="") if path.exists() else io.StringIO() as handle:
        capacity_rows = list(csv.DictReader(handle))  # bound_configs is text: not read_csv's number parsing
    for row in capacity_rows:
        line = CAPACITY_LINES.get(row["mechanism"])
        if line is None:
            continue
        if row["measured_jobs_per_h"]:
            capacities.append((line, float(row["measured_jobs_per_h"]), "measured"))
        if line in ("proportional", "ideal"):
            capacities.append((line, float(row["bound_jobs_per_h"]), "bound"))
    _plot(rows, "sim_fig9.png", capacities)


def split(loads: Sequence[float], workers: int) -> None:
    print("Figure 11c shape: FIFO, multi-GPU, (50,0,50), 128 GPUs, seed 42, jobs 4000-4999")
    rows = _sweep(SPLIT, loads, ("proportional", "tune", "greedy"), workers)
    for row in rows:
        row["prop_over_this"] = _ratio(rows, row["load"], "proportional", row["mechanism"])
    _print(rows, loads, [("prop/tune", "tune", "prop_over_this"), ("prop/greedy", "greedy", "prop_over_this")])
    _write(rows, "sim_split.csv")
    _plot(rows, "sim_split.png")


def _fixed_big_trace() -> Trace:
    # Without the generator's metadata the trace cannot draw more arrivals: exactly BIG_JOBS jobs.
    return Trace(generate_trace(jobs=BIG_JOBS, load=BIG_LOAD, seed=42).jobs)


def speed(repeats: int) -> None:
    print(f"speed: one process, medians of {repeats}")
    big = SimSetting(gpus=BIG_GPUS, load=BIG_LOAD, jobs=BIG_JOBS, seed=42, monitor=(0, BIG_JOBS))
    cases = [("fig9 proportional", SimRun(FIG9, "proportional"), repeats),
             ("fig9 tune", SimRun(FIG9, "tune"), repeats),
             ("fig9 ideal", SimRun(FIG9, "ideal"), repeats),
             ("1024 GPUs tune", SimRun(big, "tune", _fixed_big_trace()), max(1, repeats // 3))]
    rows = []
    for name, run, count in cases:
        walls, cpus = [], []
        for _ in range(count):
            started, cpu = time.perf_counter(), time.process_time()
            outcome = run_one(run)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        mechanism = run.mechanism
        artifact_s = ARTIFACT[mechanism][1] if name.startswith("fig9") and mechanism in ARTIFACT else None
        row = _row(outcome, case=name, gpus=run.setting.gpus, repeats=count,
                   median_s=statistics.median(walls), min_s=min(walls), cpu_s=statistics.median(cpus),
                   target_s=TARGET_S.get(name),
                   artifact_s=artifact_s)
        row["artifact_over_ours"] = artifact_s / row["median_s"] if artifact_s else None
        rows.append(row)
        print(f"  {name:18} median {row['median_s']:7.1f} s (min {row['min_s']:.1f}, CPU {row['cpu_s']:.1f}; target "
              f"{row['target_s'] or '-'} s; artifact {artifact_s or '-'} s)  avg JCT {row['avg_jct_h']:.2f} h  "
              f"{row['rounds']} rounds, {row['rounds_solved']} solved  (load avg {row['loadavg_1m']})", flush=True)
    _write(rows, "sim_speed.csv")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="fig9,split,speed",
                        help="fig9, split, speed, and plot (sim_fig9.png redrawn from the recorded CSVs)")
    parser.add_argument("--fig9-mechanisms", default=",".join(FIG9_MECHANISMS),
                        help="the fig9 sweep's lines: mechanisms or labels of VARIANTS")
    parser.add_argument("--loads", default=None, help="fig9's loads (default 2-10); split's are 2,3,4,5")
    parser.add_argument("--split-loads", default=None)
    parser.add_argument("--workers", type=int, default=1, help="processes for the fig9 and split sweeps")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    started = time.perf_counter()
    if "fig9" in parts:
        fig9([float(v) for v in args.loads.split(",")] if args.loads else FIG9_LOADS, args.workers,
             args.fig9_mechanisms.split(","))
    if "plot" in parts:
        plot_fig9()
    if "split" in parts:
        split([float(v) for v in args.split_loads.split(",")] if args.split_loads else SPLIT_LOADS, args.workers)
    if "speed" in parts:
        speed(args.repeats)
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
