"""Placement LP and fragmentation MILPs: seconds and split jobs against the 3s bound (issue 3's speed targets).

    python benchmarks/bench_placement.py [--lp-sizes 128,512,1024] [--milp-seeds 3] [--time-limit 20]

Production-derived (20,70,10) rounds, single-GPU and multi-GPU (1-16 GPUs), with ``profile_noise`` 0 and 0.05;
demands from the ideal ILP; HiGHS, one thread. Three sections, one CSV (``benchmarks/results/placement.csv``):

- ``lp``: the placement LP at each size, median of ``--repeats`` runs: build, solve and read-back
  milliseconds, split jobs against ``3s``, whether HiGHS returned a vertex. Variants: ``lp`` (class-aggregated,
  zero objective: the default), ``lp-fill`` (the "fill" objective), ``lp-per-job`` (one column per job and
  server, once) and ``lp-pdlp`` (HiGHS's first-order PDLP, no crossover: not a vertex, so the bound may fail).
- ``milp``: the min-split MILP and the integral-GPU MILP at 128 GPUs, per seed: status, split jobs, bound,
  seconds, formulation (server patterns or compact), and the LP's split jobs on the same round.
- ``opt``: ``solve_opt`` at 128 GPUs with each placement: the rounded objective against the ideal ILP.

Target: the LP under 1 s at 1024 GPUs. For orientation, the artifact's placement LP (cvxpy + OSQP) takes 0.44 s
at 128 GPUs and 8.0 s at 512 and splits every job (SPEC section 6).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path
from typing import Any

import synergy_opt as so
from synergy_opt.placement.solve import PlacementResult, placement_demands, solve_placement
from synergy_opt.solvers import SolverParams

ARTIFACT_LP_SECONDS = {128: 0.44, 512: 8.0}
RESULTS = Path(__file__).resolve().parent / "results" / "placement.csv"
TRACES = ((False, 0.0), (True, 0.0), (False, 0.05), (True, 0.05))


def _round(gpus: int, multi_gpu: bool, noise: float, seed: int) -> tuple[so.RoundInstance, so.IdealResult]:
    instance = so.generate_round(gpus, multi_gpu=multi_gpu, seed=seed, profile_noise=noise)
    return instance, so.solve_ideal(instance)


def _placement_row(section: str, gpus: int, multi_gpu: bool, noise: float, seed: int, variant: str,
                   result: PlacementResult, seconds: float, **extra: Any) -> dict[str, Any]:
    servers = result.placement.servers
    return {
        "section": section,
        "gpus": gpus,
        "trace": "multi" if multi_gpu else "single",
        "profile_noise": noise,
        "seed": seed,
        "variant": variant,
        "formulation": result.formulation,
        "jobs": result.placement.demands.num_jobs,
        "classes": result.placement.groups.size,
        "columns": result.placement.model.num_vars,
        "status": result.status.value,
        "source": result.source,
        "split": "" if result.num_split is None else result.num_split,
        "bound_3s": 3 * servers,
        "is_vertex": result.is_vertex,
        "objective": result.solve.objective,
        "best_bound": result.solve.bound,
        "total_ms": 1000 * seconds,
        **extra,
    }


def measure_lp(gpus: int, multi_gpu: bool, noise: float, repeats: int) -> list[dict[str, Any]]:
    instance, ideal = _round(gpus, multi_gpu, noise, seed=0)
    demands = placement_demands(instance, ideal)
    rows = []
    variants = (
        ("lp", repeats, {}, {}),
        ("lp-fill", repeats, {"objective": "fill"}, {}),
        ("lp-per-job", 1, {"aggregate": False}, {}),
        ("lp-pdlp", 1, {}, {"solver": "pdlp"}),
    )
    for variant, runs, build, options in variants:
        params = SolverParams(options=options)
        timed = []
        for _ in range(runs):
            start = time.perf_counter()
            result = solve_placement(demands, "lp", params=params, **build)
            timed.append((time.perf_counter() - start, result))
        result = timed[0][1]
        rows.append(_placement_row(
            "lp", gpus, multi_gpu, noise, 0, variant, result, statistics.median(seconds for seconds, _ in timed),
            build_ms=1000 * statistics.median(r.placement.build_seconds + r.solve.build_seconds for _, r in timed),
            solve_ms=1000 * statistics.median(r.solve.solve_seconds for _, r in timed),
            artifact_s=ARTIFACT_LP_SECONDS.get(gpus, ""),
        ))
    return rows


def measure_milp(multi_gpu: bool, noise: float, seed: int, time_limit: float) -> list[dict[str, Any]]:
    instance, ideal = _round(128, multi_gpu, noise, seed)
    demands = placement_demands(instance, ideal)
    params = SolverParams(time_limit=time_limit)
    rows = []
    for kind in ("milp", "milp-integral"):
        start = time.perf_counter()
        result = solve_placement(demands, kind, params=params)
        seconds = time.perf_counter() - start
        lp_split = result.lp.num_split if result.lp is not None else ""
        rows.append(_placement_row("milp", 128, multi_gpu, noise, seed, kind, result, seconds, lp_split=lp_split,
                                   gap=result.solve.gap))
    return rows


def measure_opt(multi_gpu: bool, noise: float, seed: int, time_limit: float) -> list[dict[str, Any]]:
    instance = so.generate_round(128, multi_gpu=multi_gpu, seed=seed, profile_noise=noise)
    rows = []
    for kind in ("lp", "milp", "milp-integral"):
        result = so.solve_opt(instance, placement=kind, time_limit=time_limit)
        report = result.rounding
        rows.append({
            **_placement_row("opt", 128, multi_gpu, noise, seed, kind, result.placement,
                             result.timings["total_seconds"]),
            "ideal_objective": report.ideal_objective,
            "opt_objective": result.objective,
            "loss_pct": 100 * report.relative_loss,
            "replaced": len(report.replaced),
            "demoted": len(report.demoted),
            "valid": result.evaluation.valid,
        })
    return rows


def _show(row: dict[str, Any]) -> None:
    keys = ("section", "gpus", "trace", "profile_noise", "seed", "variant", "formulation", "status", "source",
            "split", "bound_3s", "lp_split", "is_vertex", "gap", "total_ms", "build_ms", "solve_ms",
            "ideal_objective", "opt_objective", "loss_pct", "replaced", "demoted", "artifact_s")
    shown = [f"{key}={row[key]:.4g}" if isinstance(row[key], float) else f"{key}={row[key]}"
             for key in keys if key in row and row[key] not in ("", None)]
    print(" ".join(shown), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lp-sizes", default="128,512,1024")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--milp-seeds", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per MILP solve")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for multi_gpu, noise in TRACES:
        for gpus in (int(size) for size in args.lp_sizes.split(",")):
            for row in measure_lp(gpus, multi_gpu, noise, args.repeats):
                rows.append(row)
                _show(row)
    for multi_gpu, noise in TRACES:
        for seed in range(args.milp_seeds):
            for row in measure_milp(multi_gpu, noise, seed, args.time_limit):
                rows.append(row)
                _show(row)
    for multi_gpu, noise in TRACES:
        for row in measure_opt(multi_gpu, noise, 0, args.time_limit):
            rows.append(row)
            _show(row)
    fields = list(dict.fromkeys(key for row in rows for key in row))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    for variant in ("lp", "lp-fill", "lp-per-job", "lp-pdlp"):
        lp = [row for row in rows if row["variant"] == variant and row["section"] == "lp"]
        within = sum(int(r["split"]) <= r["bound_3s"] for r in lp)
        print(f"{variant}: split <= 3s in {within}/{len(lp)} rounds, vertex in {sum(bool(r['is_vertex']) for r in lp)}"
              f"; slowest {max(r['total_ms'] for r in lp):.1f} ms")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
