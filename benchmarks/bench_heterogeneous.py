"""Heterogeneous clusters (issue 20): speed of the type-free ideal ILP and the joint model, near-opt against the
joint, and what the third dimension (GPU types) is worth.

Run from the repository root::

    python benchmarks/bench_heterogeneous.py ideal      # type-free ideal ILP, noisy 3-type rounds, 1024 and 16384 GPUs
    python benchmarks/bench_heterogeneous.py joint      # the joint optimum, noisy 3 x 128 and 3 x 1024 GPUs
    python benchmarks/bench_heterogeneous.py near-opt   # near-opt vs the joint, the value table: 3 x 1024, seeds 0-9
    python benchmarks/bench_heterogeneous.py near-opt --reuse-references   # near-opt again, the rest as recorded
    python benchmarks/bench_heterogeneous.py ideal --mip-gap 1e-4   # the same within HiGHS's default gap
    python benchmarks/bench_heterogeneous.py ideal --quick   # a smoke run (small rounds, no CSV)
    python benchmarks/bench_heterogeneous.py family   # every mechanism, the ideal ILP and the joint on the round family
    python benchmarks/bench_heterogeneous.py family --reuse-references   # the mechanisms again, the rest as recorded
    python benchmarks/bench_heterogeneous.py summary  # the recorded CSVs as formulations/heterogeneous.md's tables

Rounds: ``generate_round(types=..., profile_noise=0.05, split=(20, 70, 10))`` (type-free, K80, P100 and V100
servers of 8 GPUs, 24 CPUs, 500 GB; each type filled by its baseline jobs). Every row records the load average
beside its times (``os.getloadavg``, 1 minute), and the reference measured in the same run (the ideal ILP's HiGHS
direct solve for the core method). CSVs go to ``benchmarks/results/hetero_*.csv``, one row written as soon as it
is measured. ``family``: the members of :data:`synergy_opt.hetero_family.HETERO_FAMILY` (server shapes, type
mixes and demands ``generate_round`` does not draw; none of them was used to tune anything), at ``--family-scale``.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from synergy_opt import evaluate, generate_round, run_mechanism, solve_ideal, solve_joint
from synergy_opt.evaluation import InvalidAllocationWarning
from synergy_opt.hetero import HeteroRound
from synergy_opt.hetero_family import HETERO_FAMILY, hetero_member_round
from synergy_opt.ideal.hetero_types import share_types
from synergy_opt.instance import Allocation
from synergy_opt.mechanisms.near_opt.hetero import solve_hetero_near_opt

RESULTS = Path(__file__).resolve().parent / "results"
# Servers per type: 1024 GPUs in all (3 types), 16384 in all, and 3 x 128 / 3 x 1024 GPUs.
IDEAL_SIZES = {1024: {"k80": 43, "p100": 43, "v100": 42}, 16384: {"k80": 683, "p100": 683, "v100": 682}}
JOINT_SIZES = {"3x128": {"k80": 16, "p100": 16, "v100": 16}, "3x1024": {"k80": 128, "p100": 128, "v100": 128}}


def make(types: dict[str, int], trace: str, seed: int, noise: float = 0.05) -> HeteroRound:
    return generate_round(types=types, multi_gpu=trace == "multi", seed=seed, profile_noise=noise)


def load() -> float:
    return round(os.getloadavg()[0], 2)


class Writer:
    """Rows to a CSV, each flushed when written (a long run keeps what it measured)."""

    def __init__(self, name: str, columns: list[str], quick: bool, append: bool = False) -> None:
        self.columns = columns
        self.rows: list[dict[str, Any]] = []
        path = RESULTS / name
        resume = append and path.exists() and path.stat().st_size > 0
        self.handle = None if quick else open(path, "a" if resume else "w", newline="")  # noqa: SIM115
        self.writer = None if self.handle is None else csv.DictWriter(self.handle, columns)
        if self.writer is not None and not resume:
            self.writer.writeheader()

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        print(" ".join(f"{k}={_fmt(row.get(k))}" for k in self.columns), flush=True)
        if self.writer is not None and self.handle is not None:
            self.writer.writerow({k: row.get(k) for k in self.columns})
            self.handle.flush()


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def bench_ideal(args: argparse.Namespace) -> None:
    """The type-free ideal ILP, exact (mip_gap 1e-6), by the core method and by HiGHS on the whole model."""
    sizes = {48: {"k80": 2, "p100": 2, "v100": 2}} if args.quick else IDEAL_SIZES
    columns = ["gpus", "trace", "seed", "jobs", "method", "mip_gap", "status", "objective", "bound", "gap",
               "build_s", "solve_s", "total_s", "load", "message"]
    name = "hetero_ideal.csv" if args.mip_gap == 1e-6 else f"hetero_ideal_gap{args.mip_gap:g}.csv"
    out = Writer(name, columns, args.quick, args.append)
    for gpus, types in sizes.items():
        for trace in args.traces:
            for seed in args.seeds:
                instance = make(types, trace, seed)
                methods = ["core"] + (["direct"] if gpus <= 1024 else [])
                for method in methods:
                    start = time.perf_counter()
                    limit = args.time_limit if method == "core" else args.direct_time_limit
                    result = solve_ideal(instance, method=method, time_limit=limit, mip_gap=args.mip_gap)
                    total = time.perf_counter() - start
                    out.add({"gpus": gpus, "trace": trace, "seed": seed, "jobs": len(instance.jobs),
                             "method": method, "mip_gap": args.mip_gap, "status": result.status.value,
                             "objective": result.objective, "bound": result.bound, "gap": result.gap,
                             "build_s": result.build_seconds, "solve_s": result.solve_seconds, "total_s": total,
                             "load": load(), "message": result.message[:100]})


def bench_joint(args: argparse.Namespace) -> None:
    """The joint model, type-free: the decomposition (types as an outer layer), and the direct MILP at 3 x 128;
    any job may split (``consolidate=False``, so that the joint bounds every mechanism, as bench_near_opt.py)."""
    sizes = {"3x16": {"k80": 2, "p100": 2, "v100": 2}} if args.quick else \
        {name: JOINT_SIZES[name] for name in args.joint_sizes}
    columns = ["size", "trace", "seed", "jobs", "method", "status", "objective", "bound", "gap", "seconds",
               "cpu_seconds", "load", "message"]
    out = Writer("hetero_joint.csv", columns, args.quick, args.append)
    for name, types in sizes.items():
        seeds = args.seeds if name != "3x1024" else args.seeds[:args.large_seeds]
        for trace in args.traces:
            for seed in seeds:
                instance = make(types, trace, seed)
                methods = ["decomposition"] + (["direct"] if args.direct and name != "3x1024" and seed < 2 else [])
                for method in methods:
                    start, cpu = time.perf_counter(), time.process_time()
                    result = solve_joint(instance, consolidate=False, method=method,
                                         time_limit=args.joint_time_limit)
                    out.add({"size": name, "trace": trace, "seed": seed, "jobs": len(instance.jobs),
                             "method": method, "status": result.status.value, "objective": result.objective,
                             "bound": result.bound, "gap": result.gap, "seconds": time.perf_counter() - start,
                             "cpu_seconds": time.process_time() - cpu, "load": load(),
                             "message": result.message[:100]})


def total(instance: HeteroRound, name: str, **options: Any) -> float:
    return valid_total(instance, run_mechanism(instance, name, **options))


def valid_total(instance: HeteroRound, allocation: Allocation) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("error", InvalidAllocationWarning)  # every allocation here must be valid
        return evaluate(instance, allocation).objective


def bench_near_opt(args: argparse.Namespace) -> None:
    """near-opt against the joint on type-free rounds, and the value of the third dimension on the same rounds."""
    types = {"k80": 2, "p100": 2, "v100": 2} if args.quick else JOINT_SIZES["3x1024"]
    columns = ["trace", "seed", "jobs", "near_opt", "near_opt_s", "near_opt_cpu_s", "near_opt_source",
               "joint", "joint_bound", "joint_status", "pct_joint", "pct_joint_bound", "ideal_free", "ideal_share",
               "ideal_baseline", "tune_baseline", "proportional", "moved", "load"]
    # Read before the Writer truncates the file: the joint and the value table of each round, as recorded.
    recorded = _recorded("hetero_near_opt.csv", ("trace", "seed"), REFERENCE_COLUMNS) if args.reuse_references else {}
    out = Writer("hetero_near_opt.csv", columns, args.quick, args.append)
    for trace in args.traces:
        for seed in args.seeds:
            instance = make(types, trace, seed)
            solve_hetero_near_opt(make({"k80": 1, "p100": 1, "v100": 1}, trace, seed))  # warm-up, untimed
            times, cpu = [], []
            for _ in range(args.repeats):
                fresh = make(types, trace, seed)
                wall, process = time.perf_counter(), time.process_time()
                result = solve_hetero_near_opt(fresh)
                times.append(time.perf_counter() - wall)
                cpu.append(time.process_time() - process)
            near = evaluate(instance, result.allocation).objective
            reference = recorded.get((trace, seed)) or _references(instance, args)
            best, bound = reference["joint"], reference["joint_bound"]
            out.add({**reference, "trace": trace, "seed": seed, "jobs": len(instance.jobs), "near_opt": near,
                     "near_opt_s": statistics.median(times), "near_opt_cpu_s": statistics.median(cpu),
                     "near_opt_source": result.source, "pct_joint": None if not best else 100 * near / best,
                     "pct_joint_bound": None if not bound else 100 * near / bound,
                     "moved": sum(a != b for a, b in zip(result.types, instance.baselines, strict=True)),
                     "load": load()})
    for trace in ("single", "multi"):
        pct = [row["pct_joint"] for row in out.rows if row["trace"] == trace and row["pct_joint"] is not None]
        if pct:
            print(f"{trace}: near-opt % of the joint: median {statistics.median(pct):.2f}, worst {min(pct):.2f}")


FAMILY_MECHANISMS = ("near-opt", "tune", "proportional", "greedy", "drf", "tetris")


def bench_family(args: argparse.Namespace) -> None:
    """Every mechanism (floors not kept by GREEDY, DRF and Tetris, which may then exceed the ideal), the type-free
    ideal ILP and the joint (decomposition, ``--joint-time-limit``) on the heterogeneous round family."""
    members = list(HETERO_FAMILY)[:2] if args.quick else list(HETERO_FAMILY)
    columns = ["member", "scale", "seed", "jobs", "gpus", *FAMILY_MECHANISMS, "near_opt_s", "near_opt_source",
               "ideal", "ideal_s", "ideal_status", "joint", "joint_bound", "joint_status", "joint_s", "pct_joint",
               "pct_joint_tune", "load"]
    name = f"hetero_family-x{args.family_scale}.csv"
    # Read before the Writer truncates the file: the ideal and the joint of each round, as recorded.
    recorded = _recorded(name, ("member", "seed"), FAMILY_REFERENCES) if args.reuse_references else {}
    out = Writer(name, columns, args.quick, args.append)
    for member in members:
        for seed in args.seeds:
            instance = hetero_member_round(member, args.family_scale, seed)
            row: dict[str, Any] = {"member": member, "scale": args.family_scale, "seed": seed,
                                   "jobs": len(instance.jobs), "gpus": instance.cluster.total_gpus}
            start = time.perf_counter()
            near = solve_hetero_near_opt(instance)
            row.update(near_opt_s=time.perf_counter() - start, near_opt_source=near.source)
            for name in FAMILY_MECHANISMS:
                row[name] = valid_total(instance, near.allocation) if name == "near-opt" else total(instance, name)
            row.update(recorded.get((member, seed)) or _family_references(instance, args), load=load())
            if row["joint"]:
                row["pct_joint"] = 100 * row["near-opt"] / row["joint"]
                row["pct_joint_tune"] = 100 * row["tune"] / row["joint"]
            out.add(row)


FAMILY_REFERENCES = ("ideal", "ideal_s", "ideal_status", "joint", "joint_bound", "joint_status", "joint_s")


def _family_references(instance: HeteroRound, args: argparse.Namespace) -> dict[str, Any]:
    """What the mechanisms are measured against on a family round: the type-free ideal ILP and the joint."""
    start = time.perf_counter()
    ideal = solve_ideal(instance, time_limit=args.time_limit)
    row = {"ideal": ideal.objective, "ideal_s": time.perf_counter() - start, "ideal_status": ideal.status.value}
    start = time.perf_counter()
    joint = solve_joint(instance, consolidate=False, time_limit=args.joint_time_limit)
    return {**row, "joint": joint.objective, "joint_bound": joint.bound, "joint_status": joint.status.value,
            "joint_s": time.perf_counter() - start}


REFERENCE_COLUMNS = ("joint", "joint_bound", "joint_status", "ideal_free", "ideal_share", "ideal_baseline",
                     "tune_baseline", "proportional")


def _references(instance: HeteroRound, args: argparse.Namespace) -> dict[str, Any]:
    """What near-opt is measured against on a round: the joint (its incumbent, bound, status) and the value
    table's columns (the ideal ILP type-free, on share types, on the baseline types; TUNE and proportional)."""
    joint = solve_joint(instance, consolidate=False, time_limit=args.joint_time_limit)
    return {"joint": joint.objective, "joint_bound": joint.bound, "joint_status": joint.status.value,
            "ideal_free": solve_ideal(instance, time_limit=args.time_limit).objective,
            "ideal_share": solve_ideal(instance.with_types(share_types(instance))).objective,
            "ideal_baseline": solve_ideal(instance.at_baseline()).objective,
            "tune_baseline": total(instance, "tune"), "proportional": total(instance, "proportional")}


def _recorded(name: str, keys: tuple[str, ...], columns: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """``columns`` of the recorded results/``name`` by its ``keys`` columns (``--reuse-references``: the
    mechanisms are measured again, the references are not solved again); statuses as text, the rest numbers."""
    path = RESULTS / name
    if not path.exists():
        return {}
    with path.open() as handle:
        rows = list(csv.DictReader(handle))

    def value(column: str, text: str) -> Any:
        return text if column.endswith("status") else float(text) if text else None

    return {tuple(int(row[k]) if k == "seed" else row[k] for k in keys): {c: value(c, row[c]) for c in columns}
            for row in rows}


def summarise(args: argparse.Namespace) -> None:
    """The recorded CSVs as the tables of formulations/heterogeneous.md, section 7 (markdown)."""
    import pandas as pd  # only here: the other commands do not need it

    def span(values: Any, unit: str = " s") -> str:
        return f"{values.min():.1f}-{values.max():.1f}{unit}" if len(values) else "-"

    ideal = pd.read_csv(RESULTS / "hetero_ideal.csv")
    print("| GPUs | jobs | method | proven | time of the proven | largest gap left | load |\n"
          "|---|---|---|---|---|---|---|")
    for (gpus, trace, method), rows in ideal.groupby(["gpus", "trace", "method"], sort=False):
        proven = rows[rows.status == "optimal"]
        gap = rows.gap.max()
        print(f"| {gpus} | {trace} | {method} | {len(proven)} of {len(rows)} | {span(proven.total_s)} | "
              f"{'-' if not gap else f'{gap:.1e}'} | {span(rows.load, '')} |")
    joint = pd.read_csv(RESULTS / "hetero_joint.csv")
    print("\n| GPUs | jobs | method | proven | CPU s of the proven | gap left, median (largest) | no solution | "
          "load |\n|---|---|---|---|---|---|---|---|")
    for (size, trace, method), rows in joint.groupby(["size", "trace", "method"], sort=False):
        gaps = rows.gap.dropna()
        gap = f"{gaps.median():.2%} ({gaps.max():.2%})" if len(gaps) else "-"
        proven = rows[rows.status == "optimal"]
        cpu = span(proven.cpu_seconds) if "cpu_seconds" in rows and len(proven) else "-"
        print(f"| {size} | {trace} | {method} | {len(proven)} of {len(rows)} | {cpu} | "
              f"{gap} | {rows.objective.isna().sum()} | "
              f"{span(rows.load, '')} |")
    near = pd.read_csv(RESULTS / "hetero_near_opt.csv")
    print("\n| jobs | seeds | near-opt, % of the joint's bound: median (worst) | joint proven | joint's incumbent "
          "below near-opt | near-opt wall s: median (max) | CPU s: median (max) | load |\n"
          "|---|---|---|---|---|---|---|---|")
    for trace, rows in near.groupby("trace", sort=False):
        print(f"| {trace} | {len(rows)} | {rows.pct_joint_bound.median():.2f} ({rows.pct_joint_bound.min():.2f}) | "
              f"{(rows.joint_status == 'optimal').sum()} | {(rows.joint < rows.near_opt).sum()} | "
              f"{rows.near_opt_s.median():.2f} ({rows.near_opt_s.max():.2f}) | "
              f"{rows.near_opt_cpu_s.median():.2f} ({rows.near_opt_cpu_s.max():.2f}) | {span(rows.load, '')} |")
    for path in sorted(RESULTS.glob("hetero_family-x*.csv")):
        family = pd.read_csv(path)
        print(f"\n{path.name}\n\n| member | rounds | jobs | near-opt, % of the joint: median (worst) | TUNE, % of "
              "the joint: median | joint proven | near-opt s: median (max) |\n|---|---|---|---|---|---|---|")
        for member, rows in family.groupby("member", sort=False):
            print(f"| {member} | {len(rows)} | {rows.jobs.min()}-{rows.jobs.max()} | {rows.pct_joint.median():.2f} "
                  f"({rows.pct_joint.min():.2f}) | {rows.pct_joint_tune.median():.2f} | "
                  f"{(rows.joint_status == 'optimal').sum()} | {rows.near_opt_s.median():.2f} "
                  f"({rows.near_opt_s.max():.2f}) |")
        print(f"| all | {len(family)} | | {family.pct_joint.median():.2f} ({family.pct_joint.min():.2f}) | "
              f"{family.pct_joint_tune.median():.2f} | {(family.joint_status == 'optimal').sum()} | "
              f"{family.near_opt_s.median():.2f} ({family.near_opt_s.max():.2f}) |")
    columns = ["ideal_free", "ideal_share", "ideal_baseline", "tune_baseline", "proportional"]
    print("\n| jobs | type-free ideal | share types + ideal | baseline ideal | TUNE, baseline | proportional, "
          "baseline |\n|---|---|---|---|---|---|")
    for trace, rows in near.groupby("trace", sort=False):
        cells = []
        for column in columns:
            pct = 100 * rows[column] / rows.ideal_baseline
            cells.append(f"{pct.median():.2f} ({pct.min():.2f}-{pct.max():.2f})")
        print(f"| {trace} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("ideal", "joint", "near-opt", "family", "summary"))
    parser.add_argument("--seeds", type=lambda t: [int(v) for v in t.split(",")], default=None)
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per type-free ideal ILP solve")
    parser.add_argument("--direct-time-limit", type=float, default=60.0, help="seconds for HiGHS's direct solve")
    parser.add_argument("--joint-time-limit", type=float, default=60.0, help="seconds per joint solve")
    parser.add_argument("--repeats", type=int, default=3, help="near-opt runs per round (the median is kept)")
    parser.add_argument("--mip-gap", type=float, default=1e-6,
                        help="ideal: the relative gap proven (1e-6, solve_ideal's default, is 'exact'; another "
                             "writes hetero_ideal_gap<gap>.csv)")
    parser.add_argument("--quick", action="store_true", help="small rounds, seeds 0-1, no CSV")
    parser.add_argument("--traces", type=lambda t: t.split(","), default=["single", "multi"],
                        help="single,multi (default both)")
    parser.add_argument("--reuse-references", action="store_true",
                        help="near-opt, family: take the references (the joint, the value table, the ideal) from the "
                             "CSV being rewritten")
    parser.add_argument("--joint-sizes", type=lambda t: t.split(","), default=list(JOINT_SIZES),
                        help="joint: 3x128,3x1024 (default both)")
    parser.add_argument("--family-scale", type=int, default=1,
                        help="family: every type's servers times this (1: about 100 GPUs a round)")
    parser.add_argument("--large-seeds", type=int, default=3, help="joint: the first this many seeds at 3 x 1024")
    parser.add_argument("--direct", action=argparse.BooleanOptionalAction, default=True,
                        help="joint: HiGHS's direct MILP beside the decomposition at 3 x 128, seeds 0-1")
    parser.add_argument("--append", action="store_true",
                        help="add the rows to the CSV already there (a run resumed for more seeds or traces)")
    args = parser.parse_args(argv)
    if args.seeds is None:
        args.seeds = [0, 1] if args.quick else ([0, 1, 2] if args.what == "ideal" else
                                               [0, 1, 2, 3, 4] if args.what in ("joint", "family") else list(range(10)))
    RESULTS.mkdir(exist_ok=True)
    commands = {"ideal": bench_ideal, "joint": bench_joint, "near-opt": bench_near_opt, "family": bench_family,
                "summary": summarise}
    commands[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
