"""near-opt against the joint optimum (issue 11): quality and time per round, the best-case tolerance under noise,
and how often near-opt is optimal on tiny rounds.

Run from the repository root::

    python benchmarks/bench_near_opt.py                        # the figures: 128, 1024, 4096 GPUs, seeds 0-9
    python benchmarks/bench_near_opt.py --tolerance            # best_case_tolerance for tune, greedy, drf, tetris
    python benchmarks/bench_near_opt.py --tiny 300             # tiny rounds: near-opt against the exact joint
    python benchmarks/bench_near_opt.py --quick                # 128 GPUs, seeds 0-1 (a smoke run, no CSV)

Rounds: the issue's four rows (single-GPU and multi-GPU trace, ``profile_noise`` 0 and 0.05, split (20, 70, 10))
and the same four with split (50, 0, 50), full load, seeds 0-9. The reference of each round is the joint optimum
(``solve_joint(consolidate=False)``, its default ``method="auto"``: the best realizable round, any job may split)
where it is proven within ``--joint-time-limit``; else the smallest proven upper bound on it: the joint model's
bound, the ideal ILP optimum (``solve_ideal``), the ideal LP bound. The joint model runs up to 1024 GPUs; at
4096 the reference is the ideal ILP. The ``reference`` column says which. References are cached in
``results/near_opt_references.csv`` (delete it to recompute). Each mechanism's percentage is
``100 * objective / reference``; near-opt's time per round is the median of ``--repeats`` runs after a warm-up,
each on the round generated afresh (wall and process CPU time; the load average is recorded beside it). Medians
over seeds go to ``results/near_opt_medians.csv``.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from synergy_opt import Cluster, Job, Profile, RoundInstance, generate_round, run_mechanism, solve_ideal, solve_joint
from synergy_opt.evaluation import InvalidAllocationWarning, evaluate
from synergy_opt.mechanisms.configs import config_table, priced_targets
from synergy_opt.mechanisms.near_opt import solve_near_opt
from synergy_opt.solvers import Status

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (128, 1024, 4096)
SPLITS = ((20, 70, 10), (50, 0, 50))
MECHANISMS = ("proportional", "greedy", "tune", "drf", "tetris", "opt", "near-opt")
TOLERANCES = (0.0, 0.035, 0.05, 0.1, 0.15)


def rounds(sizes: Iterable[int], seeds: Iterable[int]) -> list[dict[str, Any]]:
    """The grid of round specifications."""
    return [
        {"gpus": gpus, "split": "/".join(map(str, split)), "trace": trace, "noise": noise, "seed": seed}
        for gpus in sizes for split in SPLITS for trace in ("single", "multi") for noise in (0.0, 0.05)
        for seed in seeds
    ]


def make(spec: dict[str, Any]) -> RoundInstance:
    split = tuple(float(v) for v in str(spec["split"]).split("/"))
    return generate_round(int(spec["gpus"]), split, multi_gpu=spec["trace"] == "multi", seed=int(spec["seed"]),
                          profile_noise=float(spec["noise"]))


def _key(spec: dict[str, Any]) -> tuple[str, ...]:
    """A round's key as the CSV holds it: a noise of 0.0 is written ``0``, so numbers are compared as read back."""
    values = {**spec, "noise": f"{float(spec['noise']):.6g}"}
    return tuple(str(values[k]) for k in ("gpus", "split", "trace", "noise", "seed"))


# -- references ------------------------------------------------------------------------------------------------
def reference(instance: RoundInstance, spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The joint optimum where proven, else the smallest proven upper bound on it (see the module docstring)."""
    row: dict[str, Any] = dict(spec)
    table = config_table(instance)
    row["lp_bound"] = priced_targets(table).bound
    start = time.perf_counter()
    ideal = solve_ideal(instance, time_limit=args.ideal_time_limit)
    row["ideal_s"] = time.perf_counter() - start
    row["ideal"] = ideal.objective if ideal.status is Status.OPTIMAL else None
    row["ideal_bound"] = ideal.bound
    row["joint"] = row["joint_bound"] = row["joint_status"] = row["joint_s"] = None
    noisy = float(spec["noise"]) > 0
    if instance.cluster.total_gpus <= (args.joint_noisy_max_gpus if noisy else args.joint_max_gpus):
        start = time.perf_counter()
        joint = solve_joint(instance, consolidate=False, time_limit=args.joint_time_limit,
                            upper_bound=row["ideal"])
        row["joint_s"] = time.perf_counter() - start
        row["joint_status"] = joint.status.value
        if joint.evaluation is not None and joint.evaluation.valid:
            row["joint"] = joint.evaluation.objective
        row["joint_bound"] = joint.bound
    if row["joint_status"] == "optimal" and row["joint"] is not None:
        row["reference"], row["reference_value"] = "joint", row["joint"]
        return row
    bounds = [("joint-bound", row["joint_bound"]), ("ideal", row["ideal"]), ("ideal-bound", row["ideal_bound"]),
              ("lp", row["lp_bound"])]
    name, value = min(((n, v) for n, v in bounds if v is not None), key=lambda nv: nv[1])
    row["reference"], row["reference_value"] = name, value
    return row


def load_references(path: Path) -> dict[tuple[str, ...], dict[str, Any]]:
    if not path.exists():
        return {}
    with path.open() as handle:
        return {_key(row): row for row in csv.DictReader(handle)}


# -- the figures -------------------------------------------------------------------------------------------------
def timed(spec: dict[str, Any], repeats: int) -> tuple[float, float, Any]:
    """Median wall and process seconds of near-opt over ``repeats`` runs after a warm-up, and its result. Every
    run gets the round freshly generated (untimed), so nothing a run caches on the instance (its profile groups,
    floors) helps the next: each is timed as a scheduler meets a new round."""
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
    ref_path = RESULTS / "near_opt_references.csv"
    cached = load_references(ref_path)
    rows: list[dict[str, Any]] = []
    references: list[dict[str, Any]] = []
    for spec in rounds(args.sizes, args.seeds):
        instance = make(spec)
        ref = cached.get(_key(spec))
        if ref is None:
            ref = reference(instance, spec, args)
            cached[_key(spec)] = ref
            if not args.quick:
                _write(ref_path, list(cached.values()))
        references.append(ref)
        if args.references_only:
            print(f"{spec}: {ref['reference']} {float(ref['reference_value']):.4f}", flush=True)
            continue
        value = float(ref["reference_value"])
        wall, cpu, result = timed(spec, args.repeats)
        for name in args.mechanisms:
            if name == "opt" and instance.cluster.total_gpus > args.opt_max_gpus:
                continue
            start = time.perf_counter()
            allocation = result.allocation if name == "near-opt" else run_mechanism(instance, name)
            seconds = time.perf_counter() - start
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InvalidAllocationWarning)
                score = evaluate(instance, allocation)
            row = {**spec, "mechanism": name, "objective": score.objective, "valid": score.valid,
                   "floors_violated": len(score.floors_violated), "jobs_unplaced": len(score.unplaced),
                   "jobs_split": len(score.split_jobs), "reference": ref["reference"], "reference_value": value,
                   "pct": 100 * score.objective / value, "round_ms": 1000 * seconds}
            if name == "near-opt":
                row.update(round_ms=1000 * wall, cpu_ms=1000 * cpu, source=result.source,
                           tune_ran=result.tune_objective is not None, load_avg_1min=os.getloadavg()[0])
            rows.append(row)
        near = rows[-1] if rows[-1]["mechanism"] == "near-opt" else None
        if near is not None:
            print(f"{spec['gpus']:>5} {spec['split']:>8} {spec['trace']:<6} noise={spec['noise']:<4} "
                  f"seed={spec['seed']}: near-opt {near['pct']:.2f}% of {ref['reference']} "
                  f"in {near['round_ms']:.1f} ms (cpu {near['cpu_ms']:.1f} ms)", flush=True)
    return rows


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["gpus"], row["split"], row["trace"], row["noise"], row["mechanism"]), []).append(row)
    out = []
    for (gpus, split, trace, noise, mechanism), group in groups.items():
        pct = [r["pct"] for r in group]
        out.append({
            "gpus": gpus, "split": split, "trace": trace, "noise": noise, "mechanism": mechanism, "runs": len(group),
            "pct_median": statistics.median(pct), "pct_min": min(pct),
            "round_ms_median": statistics.median(r["round_ms"] for r in group),
            "cpu_ms_median": statistics.median(r["cpu_ms"] for r in group) if "cpu_ms" in group[0] else None,
            "references": " ".join(sorted({r["reference"] for r in group})),
            "invalid": sum(not r["valid"] for r in group),
            "floors_violated": sum(r["floors_violated"] for r in group),
            "jobs_split_median": statistics.median(r["jobs_split"] for r in group),
            "tune_ran": sum(bool(r.get("tune_ran")) for r in group) if mechanism == "near-opt" else None,
        })
    return out


def print_table(summary: list[dict[str, Any]]) -> None:
    names = list(dict.fromkeys(r["mechanism"] for r in summary))
    print(f"\n{'GPUs':>5} {'split':>8} {'trace':<6} {'noise':>5} | " + " ".join(f"{n:>12}" for n in names)
          + " | near-opt ms (cpu) | reference")
    keys = list(dict.fromkeys((r["gpus"], r["split"], r["trace"], r["noise"]) for r in summary))
    for key in keys:
        group = {r["mechanism"]: r for r in summary if (r["gpus"], r["split"], r["trace"], r["noise"]) == key}
        cells = " ".join(f"{group[n]['pct_median']:>12.1f}" if n in group else f"{'-':>12}" for n in names)
        near = group.get("near-opt")
        timing = "" if near is None else f"{near['round_ms_median']:.1f} ({near['cpu_ms_median']:.1f})"
        print(f"{key[0]:>5} {key[1]:>8} {key[2]:<6} {key[3]:>5} | {cells} | {timing:>17} | "
              f"{near['references'] if near else ''}")


# -- best-case tolerance --------------------------------------------------------------------------------------
def tolerance_study(args: argparse.Namespace) -> list[dict[str, Any]]:
    """tune, greedy, drf and tetris at several tolerances: % of each round's LP bound and of tolerance 0."""
    rows = []
    for spec in rounds(args.sizes, args.seeds):
        instance = make(spec)
        bound = priced_targets(config_table(instance)).bound
        for name in ("tune", "greedy", "drf", "tetris"):
            base = None
            for tolerance in TOLERANCES:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", InvalidAllocationWarning)
                    value = evaluate(instance, run_mechanism(instance, name, best_case_tolerance=tolerance)).objective
                base = value if base is None else base
                rows.append({**spec, "mechanism": name, "tolerance": tolerance, "objective": value,
                             "pct_lp": 100 * value / bound, "vs_exact": 100 * value / base})
    summary: dict[tuple[Any, ...], list[float]] = {}
    for row in rows:
        summary.setdefault((row["gpus"], row["split"], row["trace"], row["noise"], row["mechanism"]), []).append(row)
    print(f"{'GPUs':>5} {'split':>8} {'trace':<6} {'noise':>5} {'mech':<7} | % of LP bound at tolerance "
          + " ".join(f"{t:>6}" for t in TOLERANCES) + " | min % of tolerance 0 (seeds)")
    for key, group in summary.items():
        pct = [statistics.median(r["pct_lp"] for r in group if r["tolerance"] == t) for t in TOLERANCES]
        worst = [min(r["vs_exact"] for r in group if r["tolerance"] == t) for t in TOLERANCES]
        print(f"{key[0]:>5} {key[1]:>8} {key[2]:<6} {key[3]:>5} {key[4]:<7} | {'':>26}"
              + " ".join(f"{p:>6.1f}" for p in pct) + " | " + " ".join(f"{w:>6.1f}" for w in worst))
    return rows


# -- tiny rounds ---------------------------------------------------------------------------------------------------
def tiny_round(rng: np.random.Generator) -> RoundInstance:
    """1-2 servers of 1-4 GPUs, up to 5 jobs (some larger than a server), small random profiles."""
    cluster = Cluster(int(rng.integers(1, 3)), int(rng.integers(1, 5)), float(rng.choice([1, 2, 3, 4, 6, 8])),
                      float(rng.choice([1, 2, 4, 8])))
    free = cluster.total_gpus
    jobs = []
    for index in range(int(rng.integers(1, 6))):
        if free == 0:
            break
        gpus = min(free, 1 if rng.random() < 0.5 else int(rng.integers(1, 2 * cluster.gpus_per_server + 1)))
        free -= gpus
        cpu = np.unique(rng.choice([0.5, 1.0, 1.5, 2.0, 3.0], size=int(rng.integers(1, 3))))
        mem = np.unique(rng.choice([0.5, 1.0, 2.0, 4.0], size=int(rng.integers(1, 3))))
        tput = rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, 3.0], size=(cpu.size, mem.size))
        jobs.append(Job(f"j{index}", gpus, Profile(cpu, mem, tput)))
    return RoundInstance(cluster, tuple(jobs))


def tiny(args: argparse.Namespace) -> list[dict[str, Any]]:
    """near-opt against the exact joint MILP (cross-checked against brute force in tests/test_joint.py)."""
    rng = np.random.default_rng(0)
    rows = []
    for index in range(args.tiny):
        instance = tiny_round(rng)
        joint = solve_joint(instance, consolidate=False, mip_gap=0.0)
        assert joint.status is Status.OPTIMAL and joint.objective is not None
        result = solve_near_opt(instance)
        own = result.own_objective
        rows.append({"round": index, "jobs": len(instance.jobs), "servers": instance.cluster.servers,
                     "joint": joint.objective, "near_opt": result.objective, "own": own, "source": result.source,
                     "optimal": result.objective >= joint.objective - 1e-6,
                     "own_optimal": own >= joint.objective - 1e-6,
                     "pct": 100 * result.objective / joint.objective if joint.objective > 0 else 100.0})
    optimal = sum(r["optimal"] for r in rows)
    own = sum(r["own_optimal"] for r in rows)
    print(f"tiny rounds: near-opt optimal on {optimal} of {len(rows)} ({100 * optimal / len(rows):.1f}%), its own "
          f"allocation (before the TUNE comparison) on {own}; median {statistics.median(r['pct'] for r in rows):.1f}%, "
          f"worst {min(r['pct'] for r in rows):.1f}% of the joint optimum")
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="cluster sizes in GPUs")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)), help="generator seeds")
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), help="mechanisms to compare")
    parser.add_argument("--repeats", type=int, default=3, help="timed near-opt runs per round")
    parser.add_argument("--joint-time-limit", type=float, default=20.0, help="seconds for the joint model")
    parser.add_argument("--joint-max-gpus", type=int, default=1024, help="joint model on noise-free rounds up to")
    parser.add_argument("--joint-noisy-max-gpus", type=int, default=1024, help="joint model on noisy rounds up to")
    parser.add_argument("--ideal-time-limit", type=float, default=120.0, help="seconds for the ideal ILP")
    parser.add_argument("--opt-max-gpus", type=int, default=1024, help="run opt up to this size")
    parser.add_argument("--tolerance", action="store_true", help="the best-case tolerance study instead")
    parser.add_argument("--tiny", type=int, default=0, help="tiny rounds against the exact joint instead")
    parser.add_argument("--quick", action="store_true", help="smoke run: 128 GPUs, seeds 0-1, no CSV")
    parser.add_argument("--references-only", action="store_true", help="compute and cache the references only")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.seeds, args.repeats = [128], [0, 1], 1
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.tiny:
        rows = tiny(args)
        if not args.quick:
            _write(RESULTS / "near_opt_tiny.csv", rows)
        return 0
    if args.tolerance:
        rows = tolerance_study(args)
        if not args.quick:
            _write(RESULTS / "near_opt_tolerance.csv", rows)
        return 0
    rows = figures(args)
    if args.references_only:
        return 0
    summary = medians(rows)
    print_table(summary)
    if not args.quick:
        _write(RESULTS / "near_opt.csv", rows)
        _write(RESULTS / "near_opt_medians.csv", summary)
        print(f"wrote {RESULTS / 'near_opt.csv'} and near_opt_medians.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
