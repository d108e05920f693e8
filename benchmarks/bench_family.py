"""near-opt, TUNE and the joint optimum on the round family of issue 22 (``synergy_opt.round_family``).

Run from the repository root::

    python benchmarks/bench_family.py                           # the figures: 128 GPUs, report seeds 100-109
    python benchmarks/bench_family.py --sizes 1024 --seeds 100 101 102 --noise 0.1
    python benchmarks/bench_family.py --seeds 0 1 2 3 4 --tag=-tune  # the seeds near-opt was tuned on
    python benchmarks/bench_family.py --joint-runs 3 --noise 0.1     # the joint optimum's time, 3 runs a round

Rounds: every member of ``FAMILY`` at ``--noise`` (default 0 and 0.1; a ``*-mixed`` member draws its own
noise in 0-0.1 and runs once), full load. Seeds 0-9 are the *tuning* seeds (what near-opt was changed on);
the figures reported are on seeds 100 and above, never looked at while tuning (``benchmarks/README.md``).

The reference of each round is the joint optimum without consolidation (``solve_joint(consolidate=False)``,
``method="auto"``: any job may split over servers) when proven within ``--joint-time-limit`` (128 GPUs: 60 s,
larger: 30 s), else the smallest proven upper bound: the joint bound, the ideal ILP optimum, the ideal LP
bound (column ``reference``). References are cached in ``results/family_references<tag>.csv`` (delete it to
recompute), with the joint optimum's time, status and gap and the load average at its start. near-opt's time is
the median of ``--repeats`` runs after a warm-up, each on the round generated afresh (wall and process CPU). Each
mechanism's figure is ``100 * objective / reference``; ``valid`` is the evaluator's verdict.

``--time-only`` times near-opt alone (no references, no shares) and writes ``results/family_times<tag>.csv``:
for seeds whose references are not cached, e.g. the tuning seeds at 1024 GPUs.

``--joint-runs N`` times ``solve_joint(consolidate=False)`` N more times per noisy round (same process, the load
average beside each run; near-opt's start counted in its time) and writes ``results/family_joint_times<tag>.csv``,
a row as soon as it is measured (wall and process CPU seconds, status, gap, what gave the incumbent and the
proof), and ``results/family_joint_summary<tag>.csv`` from it: per member, size and noise the rounds proven, the
median, 90th percentile and maximum of wall and CPU seconds, the largest gap left. Without ``--joint-runs`` the
summary is written from the cached references (one joint run a round); ``--joint-summary-only`` writes just that.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from synergy_opt import RoundInstance, run_mechanism, solve_ideal, solve_joint
from synergy_opt.evaluation import InvalidAllocationWarning, evaluate
from synergy_opt.mechanisms.configs import config_table, priced_targets
from synergy_opt.mechanisms.near_opt import solve_near_opt
from synergy_opt.round_family import FAMILY, member_round
from synergy_opt.solvers import Status

RESULTS = Path(__file__).resolve().parent / "results"
REPORT_SEEDS = tuple(range(100, 110))
NOISES = (0.0, 0.1)
MECHANISMS = ("proportional", "tune", "near-opt")
KEY = ("member", "gpus", "noise", "seed")


def rounds(members: list[str], sizes: list[int], seeds: list[int], noises: list[float]) -> list[dict[str, Any]]:
    """The grid of round specifications; a mixed member (its noise drawn per seed) once per seed."""
    specs = []
    for gpus in sizes:
        for member in members:
            levels = ["drawn"] if FAMILY[member].draw is not None else [f"{n:g}" for n in noises]
            for noise in levels:
                for seed in seeds:
                    specs.append({"member": member, "gpus": gpus, "noise": noise, "seed": seed})
    return specs


def make(spec: dict[str, Any]) -> RoundInstance:
    noise = None if spec["noise"] == "drawn" else float(spec["noise"])
    return member_round(str(spec["member"]), int(spec["gpus"]), int(spec["seed"]), profile_noise=noise)


def _key(spec: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(spec[k]) for k in KEY)


def joint_limit(gpus: int, args: argparse.Namespace) -> float:
    return float(args.joint_time_limit if gpus <= 128 else args.joint_large_time_limit)


def joint_start(instance: RoundInstance, args: argparse.Namespace) -> Any:
    """The joint optimum's first incumbent: near-opt's allocation (``--joint-start near-opt``, its time counted
    in the joint's), or none."""
    return solve_near_opt(instance).allocation if args.joint_start == "near-opt" else None


def reference(instance: RoundInstance, spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The joint optimum where proven, else the smallest proven upper bound on it (see the module docstring)."""
    row: dict[str, Any] = {**spec, "jobs": len(instance.jobs), "servers": instance.cluster.servers,
                           "gpus_per_server": instance.cluster.gpus_per_server,
                           "lp_bound": priced_targets(config_table(instance)).bound}
    ideal = solve_ideal(instance, time_limit=args.ideal_time_limit)
    row["ideal"] = ideal.objective if ideal.status is Status.OPTIMAL else None
    row["ideal_bound"] = ideal.bound
    row["joint_load_avg"] = os.getloadavg()[0]
    start = time.perf_counter()
    joint = solve_joint(instance, consolidate=False, time_limit=joint_limit(int(spec["gpus"]), args),
                        start=joint_start(instance, args))
    row["joint_s"] = time.perf_counter() - start
    row["joint_method"] = joint.method
    row["joint_status"] = joint.status.value
    row["joint"] = joint.evaluation.objective if joint.evaluation is not None and joint.evaluation.valid else None
    row["joint_bound"] = joint.bound
    row["joint_gap"] = joint.gap
    if joint.status is Status.OPTIMAL and row["joint"] is not None:
        row["reference"], row["reference_value"] = "joint", row["joint"]
        return row
    bounds = [("joint-bound", row["joint_bound"]), ("ideal", row["ideal"]), ("ideal-bound", row["ideal_bound"]),
              ("lp", row["lp_bound"])]
    name, value = min(((n, v) for n, v in bounds if v is not None), key=lambda nv: nv[1])
    row["reference"], row["reference_value"] = name, value
    return row


def load(path: Path) -> dict[tuple[str, ...], dict[str, Any]]:
    if not path.exists():
        return {}
    with path.open() as handle:
        return {_key(row): row for row in csv.DictReader(handle)}


def timed(spec: dict[str, Any], repeats: int) -> tuple[float, float, Any]:
    """Median wall and process seconds of near-opt over ``repeats`` runs after a warm-up (each on the round
    generated afresh, so nothing cached on an instance helps the next), and its result."""
    result = solve_near_opt(make(spec))
    walls, cpus = [], []
    for _ in range(repeats):
        instance = make(spec)
        wall, cpu = time.perf_counter(), time.process_time()
        solve_near_opt(instance)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return statistics.median(walls), statistics.median(cpus), result


def figures(args: argparse.Namespace) -> list[dict[str, Any]]:
    ref_path = RESULTS / f"family_references{args.tag}.csv"
    cached = load(ref_path)
    rows: list[dict[str, Any]] = []
    for spec in rounds(args.members, args.sizes, args.seeds, args.noise):
        instance = make(spec)
        ref = cached.get(_key(spec))
        if ref is None:
            ref = reference(instance, spec, args)
            cached[_key(spec)] = ref
            write(ref_path, list(cached.values()))
        value = float(ref["reference_value"])
        if args.references_only:
            print(f"{_key(spec)}: {ref['reference']} {value:.4f} joint {float(ref['joint_s']):.2f} s", flush=True)
            continue
        wall, cpu, result = timed(spec, args.repeats)
        row: dict[str, Any] = {**spec, "gpu_kind": FAMILY[str(spec["member"])].gpu_kind, "jobs": len(instance.jobs),
                               "reference": ref["reference"], "reference_value": value}
        for name in args.mechanisms:
            allocation = result.allocation if name == "near-opt" else run_mechanism(instance, name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InvalidAllocationWarning)
                score = evaluate(instance, allocation)
            row[f"{name}_pct"] = 100 * score.objective / value if value > 0 else 100.0
            row[f"{name}_valid"] = score.valid
        score = evaluate(instance, result.allocation)
        row.update(near_opt_split=len(score.split_jobs), near_opt_source=result.source,
                   tune_ran=result.tune_objective is not None, round_ms=1000 * wall, cpu_ms=1000 * cpu,
                   load_avg_1min=os.getloadavg()[0])
        rows.append(row)
        print(f"{spec['member']:<18} {spec['gpus']:>5} noise={spec['noise']:<5} seed={spec['seed']:<4} "
              f"near-opt {row['near-opt_pct']:7.2f}%  tune {row.get('tune_pct', float('nan')):6.2f}% of "
              f"{ref['reference']:<11} {row['round_ms']:6.1f} ms", flush=True)
    return rows


def time_only(args: argparse.Namespace) -> list[dict[str, Any]]:
    """near-opt's time on every round (as ``figures`` times it), without references: for seeds whose joint
    optimum is not cached (e.g. the tuning seeds at 1024 GPUs)."""
    rows = []
    for spec in rounds(args.members, args.sizes, args.seeds, args.noise):
        wall, cpu, result = timed(spec, args.repeats)
        rows.append({**spec, "gpu_kind": FAMILY[str(spec["member"])].gpu_kind, "source": result.source,
                     "tune_ran": result.tune_objective is not None, "round_ms": 1000 * wall, "cpu_ms": 1000 * cpu,
                     "load_avg_1min": os.getloadavg()[0]})
        print(f"{spec['member']:<18} {spec['gpus']:>5} noise={spec['noise']:<5} seed={spec['seed']:<4} "
              f"{rows[-1]['cpu_ms']:6.1f} ms CPU", flush=True)
    return rows


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per member, size and noise: medians and worst seed of every mechanism, near-opt's time."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["member"], row["gpus"], row["noise"]), []).append(row)
    out = []
    for (member, gpus, noise), group in groups.items():
        near = [r["near-opt_pct"] for r in group]
        worst = min(group, key=lambda r: r["near-opt_pct"])
        entry: dict[str, Any] = {"member": member, "gpu_kind": group[0]["gpu_kind"], "gpus": gpus, "noise": noise,
                                 "seeds": len(group)}
        for name in MECHANISMS:
            if f"{name}_pct" in group[0]:
                values = [r[f"{name}_pct"] for r in group]
                entry[f"{name}_median"] = statistics.median(values)
                entry[f"{name}_min"] = min(values)
        entry.update(near_opt_worst_seed=worst["seed"],
                     near_opt_below_tune=sum(r["near-opt_pct"] < r.get("tune_pct", 0) - 1e-9 for r in group),
                     invalid=sum(not r["near-opt_valid"] for r in group),
                     round_ms_median=statistics.median(r["round_ms"] for r in group),
                     round_ms_max=max(r["round_ms"] for r in group),
                     references=" ".join(sorted({r["reference"] for r in group})))
        assert len(near) == len(group)
        out.append(entry)
    return out


def print_summary(table: list[dict[str, Any]]) -> None:
    print(f"\n{'member':<18} {'GPUs':>5} {'noise':>5} | {'prop':>5} {'tune':>5} {'near-opt':>8} {'(worst':>6} "
          f"{'seed)':<5} | {'ms':>6} | reference")
    for e in table:
        print(f"{e['member']:<18} {e['gpus']:>5} {e['noise']:>5} | {e.get('proportional_median', 0):5.1f} "
              f"{e.get('tune_median', 0):5.1f} {e['near-opt_median']:8.2f} {e['near-opt_min']:6.2f} "
              f"{e['near_opt_worst_seed']:<5} | {e['round_ms_median']:6.1f} | {e['references']}")


def joint_summary(rows: list[dict[str, Any]], timed: bool = False) -> list[dict[str, Any]]:
    """Per member, size and noise: the distribution of the joint optimum's time, how many were proven, the
    largest gap left and the load average at their start; from the reference runs (one run a round, started from
    near-opt's allocation unless ``--joint-start none``), or (``timed``) from ``--joint-runs``' rows, with CPU."""
    status, seconds, gap, load = ("status", "seconds", "gap", "load_avg_1min") if timed else \
        ("joint_status", "joint_s", "joint_gap", "joint_load_avg")
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((str(row["member"]), str(row["gpus"]), str(row["noise"])), []).append(row)
    out = []
    for (member, gpus, noise), group in sorted(groups.items(), key=lambda kv: (int(kv[0][1]), kv[0][0], kv[0][2])):
        gaps = [float(r[gap]) if r[gap] not in ("", None) else math.inf for r in group]
        entry: dict[str, Any] = {"member": member, "gpus": gpus, "noise": noise, "rounds": len(group),
                                 "proven": sum(r[status] == "optimal" for r in group)}
        entry.update(_spread("seconds", [float(r[seconds]) for r in group]))
        if timed:
            entry.update(_spread("cpu_seconds", [float(r["cpu_seconds"]) for r in group]))
        entry.update(gap_max=max(gaps), load_avg_median=statistics.median(float(r[load]) for r in group))
        out.append(entry)
    return out


def _spread(name: str, values: list[float]) -> dict[str, float]:
    """Median, 90th percentile (nearest rank) and maximum."""
    ordered = sorted(values)
    return {f"{name}_median": statistics.median(ordered),
            f"{name}_p90": ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)],
            f"{name}_max": ordered[-1]}


def joint_runs(args: argparse.Namespace, path: Path) -> list[dict[str, Any]]:
    """``solve_joint(consolidate=False)`` ``--joint-runs`` times per noisy round: its time distribution (the CSV at
    ``path`` rewritten after every run, so that a long run keeps what it measured)."""
    rows: list[dict[str, Any]] = []
    for spec in rounds(args.members, args.sizes, args.seeds, args.noise):
        if spec["noise"] == "0":
            continue
        instance = make(spec)
        for run in range(args.joint_runs):
            load_avg = os.getloadavg()[0]
            wall, cpu = time.perf_counter(), time.process_time()
            joint = solve_joint(instance, consolidate=False, time_limit=joint_limit(int(spec["gpus"]), args),
                                start=joint_start(instance, args))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            gap = joint.gap if joint.gap is not None else math.inf
            report = joint.report
            rows.append({**spec, "run": run, "start": args.joint_start, "jobs": len(instance.jobs),
                         "method": joint.method, "status": joint.status.value, "gap": gap, "seconds": wall,
                         "cpu_seconds": cpu, "load_avg_1min": load_avg,
                         "incumbent": "" if report is None else report.incumbent_source,
                         "nodes": "" if report is None else report.nodes, "message": joint.solve.message[:80]})
            write(path, rows)
            print(f"{spec['member']:<18} {spec['gpus']:>5} noise={spec['noise']:<5} seed={spec['seed']:<4} run {run}: "
                  f"{joint.status.value} gap {gap:.2e} in {wall:.2f} s ({cpu:.2f} s CPU, load {load_avg:.2f})",
                  flush=True)
    return rows


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", nargs="+", default=list(FAMILY), choices=list(FAMILY), help="family members")
    parser.add_argument("--sizes", type=int, nargs="+", default=[128], help="cluster sizes in GPUs")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(REPORT_SEEDS), help="seeds (0-9: tuning)")
    parser.add_argument("--noise", type=float, nargs="+", default=list(NOISES), help="profile noise of fixed members")
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), help="mechanisms to compare")
    parser.add_argument("--repeats", type=int, default=3, help="timed near-opt runs per round")
    parser.add_argument("--joint-time-limit", type=float, default=60.0, help="joint seconds at 128 GPUs and below")
    parser.add_argument("--joint-large-time-limit", type=float, default=30.0, help="joint seconds above 128 GPUs")
    parser.add_argument("--ideal-time-limit", type=float, default=120.0, help="seconds for the ideal ILP")
    parser.add_argument("--joint-runs", type=int, default=0, help="time the joint optimum this often per noisy round")
    parser.add_argument("--joint-start", choices=("near-opt", "none"), default="near-opt",
                        help="the joint optimum's first incumbent (near-opt's time counted in the joint's)")
    parser.add_argument("--references-only", action="store_true", help="compute and cache the references only")
    parser.add_argument("--joint-summary-only", action="store_true",
                        help="write family_joint_summary<tag>.csv from the cached references only")
    parser.add_argument("--tag", default="", help="suffix of the CSV names (e.g. -tune for the tuning seeds)")
    parser.add_argument("--time-only", action="store_true",
                        help="near-opt's time alone, no references or shares (results/family_times<tag>.csv)")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.time_only:
        write(RESULTS / f"family_times{args.tag}.csv", time_only(args))
        return 0
    if args.joint_runs:
        times = joint_runs(args, RESULTS / f"family_joint_times{args.tag}.csv")
        write(RESULTS / f"family_joint_summary{args.tag}.csv", joint_summary(times, timed=True))
        return 0
    rows = [] if args.joint_summary_only else figures(args)
    references = list(load(RESULTS / f"family_references{args.tag}.csv").values())
    write(RESULTS / f"family_joint_summary{args.tag}.csv", joint_summary(references))
    if args.references_only or args.joint_summary_only:
        return 0
    table = summary(rows)
    print_summary(table)
    write(RESULTS / f"family{args.tag}.csv", rows)
    write(RESULTS / f"family_summary{args.tag}.csv", table)
    print(f"wrote {RESULTS / f'family{args.tag}.csv'} and family_summary{args.tag}.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
