"""Gavel's policies on 3 GPU types: this toolkit's LPs against Gavel's own formulations, same inputs, same run.

Run from the repository root (Gavel's side needs the bench extra: ``pip install -e ".[bench]"``)::

    python benchmarks/bench_policies.py                  # 1,000 and 10,000 jobs, every policy; writes the CSV
    python benchmarks/bench_policies.py --jobs 1000 --repeats 1 --policies max_min_fairness

Inputs, drawn once per size (seed 0) on k80, p100 and v100 with ``jobs // 10`` GPUs of each type:

- ``gavel``: jobs as Gavel's job generator draws them (``scheduler/utils.py``: scale factor 1, 2, 4, 8 with
  probability .7, .1, .15, .05; the job type uniform among those with a throughput at that scale factor on
  every type; ``10 ** U(1.5, 3)`` minutes on a v100 with probability .8, else ``10 ** U(3, 4)``, as steps), each
  job's throughputs Gavel's (the shipped ``isolated_throughputs.json``): jobs are alike by job type and scale
  factor, as in Gavel's simulator; seconds since arrival ``U(0, 3600)``, the time alone so far the same (Gavel's
  finish-time fairness counts time since start in both);
- ``distinct``: the same jobs with each throughput times ``exp(N(0, 0.05))``, so that no two jobs are alike.

Policies and methods, each timed ``--repeats`` times after an untimed warm-up (median wall and process CPU
seconds, the load average at the start of each size and inputs recorded beside them):

- ``gavel-cvxpy-ecos``: Gavel's formulation in cvxpy solved by ECOS as Gavel does, cvxpy's compilation included
  as in Gavel (``scheduler/policies/``): max-min fairness maximises ``min(sum(c * x, axis=1))``; makespan
  (``min_total_duration``) bisects on ``T`` from [100 s, 1e6 s] until within 5%, each step a feasibility problem;
  finish-time fairness minimises the largest ratio with ``inv_pos`` (written over the vector of jobs rather than
  Gavel's one expression per job, which only compiles slower); max-sum-throughput maximises the summed
  throughput;
- ``highs``: ``solve_<policy>(problem, ...)``, the defaults (identical jobs as one class, exact; from 500 rows
  the decomposition of formulations/policies.md rows D1-D4, for every policy but max-sum-throughput);
- ``highs-whole-lp``: the same with ``method="lp"`` (the whole LP);
- ``highs-per-job``: the defaults with ``aggregate=False`` (a row per job).

Water filling (``max_min_fairness_water_filling``) has no Gavel column (Gavel's needs a MILP solver, GLPK_MI,
that the bench extra does not install; a helper compared the two on 35 problems, docs/sim.md); its methods are
``highs`` (bottlenecks from the level LP's duals), ``highs-per-job`` and ``pyomo-highs`` (no duals reported:
each level's dual LP solved too, formulations/policies.md W2).

Each method's objective is recorded and its relative difference to ``highs`` (makespan: Gavel's is within 5%).
Results go to ``benchmarks/results/policies.csv``; the rows of (policy, jobs) not run this time are kept.
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
from typing import Any

import numpy as np

from synergy_opt.gavel_throughputs import load_gavel_throughputs
from synergy_opt.policies import (
    PolicyProblem,
    PolicyResult,
    solve_finish_time_fairness,
    solve_makespan,
    solve_max_min_fairness,
    solve_max_sum_throughput,
    solve_water_filling,
)
from synergy_opt.policies.max_min import normalised_coefficients
from synergy_opt.policies.problem import job_classes

TYPES = ("k80", "p100", "v100")
SIZES = (1000, 10000)
NOISE = 0.05
RESULTS = Path(__file__).resolve().parent / "results" / "policies.csv"
SCALE_FACTORS = (1, 2, 4, 8)
SCALE_PROBABILITIES = (0.7, 0.1, 0.15, 0.05)
POLICIES = ("max_min_fairness", "makespan", "finish_time_fairness", "max_sum_throughput",
            "max_min_fairness_water_filling")


@dataclass(frozen=True)
class Inputs:
    """A policy problem and the per-job state makespan and finish-time fairness read."""

    problem: PolicyProblem
    remaining: np.ndarray
    elapsed: np.ndarray


@dataclass(frozen=True)
class Row:
    policy: str
    jobs: int
    inputs: str
    gpus_per_type: int
    classes: int
    method: str
    repeats: int
    wall_median_s: float
    cpu_median_s: float
    objective: float
    rel_diff_vs_highs: float
    vs_gavel_wall: float | None
    load_avg_1min: float


def draw_problem(jobs: int, inputs: str, seed: int = 0) -> PolicyProblem:
    """``jobs`` jobs drawn as Gavel's generator draws them, with Gavel's throughputs (``distinct``: noisy)."""
    return draw_inputs(jobs, inputs, seed).problem


def draw_inputs(jobs: int, inputs: str, seed: int = 0) -> Inputs:
    """:func:`draw_problem`'s jobs, with steps left and seconds since arrival (see the module)."""
    rng = np.random.default_rng(seed)
    table = load_gavel_throughputs()
    scale = rng.choice(SCALE_FACTORS, size=jobs, p=SCALE_PROBABILITIES)
    kinds = {s: sorted(job for (job, k) in table.steps_per_s["v100"] if k == s
                       and all(table.get(t, job, s) for t in TYPES)) for s in SCALE_FACTORS}
    job_types = [kinds[s][rng.integers(len(kinds[s]))] for s in scale]
    throughputs = np.array([[table.get(t, job, int(s)) for t in TYPES] for job, s in zip(job_types, scale,
                                                                                           strict=True)])
    if inputs == "distinct":
        throughputs = throughputs * np.exp(rng.normal(0.0, NOISE, throughputs.shape))
    # Drawn after the throughputs, so that the problem is the one drawn before steps were added.
    minutes = np.where(rng.random(jobs) < 0.8, 10 ** rng.uniform(1.5, 3, jobs), 10 ** rng.uniform(3, 4, jobs))
    remaining = minutes * 60 * throughputs[:, TYPES.index("v100")]
    elapsed = rng.uniform(0, 3600, jobs)
    return Inputs(PolicyProblem(throughputs, scale, np.full(len(TYPES), jobs // 10), types=TYPES), remaining,
                  elapsed)


def _base_constraints(cp: Any, x: Any, problem: PolicyProblem) -> list[Any]:
    """Gavel's ``get_base_constraints``: x >= 0, each type's GPUs, each job's time."""
    scale = np.repeat(problem.scale_factors[:, None].astype(float), problem.num_types, axis=1)
    return [x >= 0, cp.sum(cp.multiply(scale, x), axis=0) <= problem.gpus, cp.sum(x, axis=1) <= 1]


def gavel_max_min(data: Inputs) -> float:
    """Gavel's ``MaxMinFairnessPolicyWithPerf`` in cvxpy, by ECOS."""
    import cvxpy as cp  # the bench extra

    problem = data.problem
    coefficients = normalised_coefficients(problem)  # throughputs / (weight * proportional) * scale factor
    x = cp.Variable(problem.throughputs.shape)
    program = cp.Problem(cp.Maximize(cp.min(cp.sum(cp.multiply(coefficients, x), axis=1))),
                         _base_constraints(cp, x, problem))
    program.solve(solver="ECOS")
    return float(program.value)


def gavel_makespan(data: Inputs) -> float:
    """Gavel's ``MinTotalDurationPolicy``: bisection on ``T`` to 5% over feasibility problems, by ECOS."""
    import cvxpy as cp

    problem = data.problem

    def feasible(horizon: float) -> bool:
        x = cp.Variable(problem.throughputs.shape)
        finish = cp.sum(cp.multiply(problem.throughputs, x), axis=1) >= data.remaining / horizon
        program = cp.Problem(cp.Maximize(1), [*_base_constraints(cp, x, problem), finish])
        program.solve(solver="ECOS")
        return program.status == "optimal"

    low, high, last_high = 100.0, 1e6, 1e6
    best = None
    while best is None:
        while 1.05 * low < high:
            middle = (low + high) / 2
            if feasible(middle):
                best, high = middle, middle
            else:
                low = middle
        low, high, last_high = last_high, last_high * 10, last_high * 10
    return best


def gavel_finish_time(data: Inputs) -> float:
    """Gavel's ``FinishTimeFairnessPolicyWithPerf`` (over the vector of jobs), by ECOS."""
    import cvxpy as cp

    problem = data.problem
    expected = data.elapsed + data.remaining / problem.isolated_throughputs()
    x = cp.Variable(problem.throughputs.shape)
    throughput = cp.sum(cp.multiply(problem.throughputs, x), axis=1)
    ratios = cp.multiply(data.elapsed + cp.multiply(data.remaining, cp.inv_pos(throughput)), 1 / expected)
    program = cp.Problem(cp.Minimize(cp.max(ratios)), _base_constraints(cp, x, problem))
    program.solve(solver="ECOS")
    return float(program.value)


def gavel_max_sum(data: Inputs) -> float:
    """Gavel's ``ThroughputSumWithPerf`` (no costs, no SLOs), by ECOS."""
    import cvxpy as cp

    problem = data.problem
    x = cp.Variable(problem.throughputs.shape)
    program = cp.Problem(cp.Maximize(cp.sum(cp.multiply(problem.throughputs, x))), _base_constraints(cp, x, problem))
    program.solve(solver="ECOS")
    return float(program.value)


GAVEL: dict[str, Callable[[Inputs], float]] = {
    "max_min_fairness": gavel_max_min, "makespan": gavel_makespan, "finish_time_fairness": gavel_finish_time,
    "max_sum_throughput": gavel_max_sum,
}


def ours(policy: str, **settings: Any) -> Callable[[Inputs], float]:
    def run(data: Inputs) -> float:
        result: PolicyResult
        if policy == "max_min_fairness":
            result = solve_max_min_fairness(data.problem, **settings)
        elif policy == "makespan":
            result = solve_makespan(data.problem, data.remaining, **settings)
        elif policy == "max_min_fairness_water_filling":
            result = solve_water_filling(data.problem, **settings)
        elif policy == "finish_time_fairness":
            result = solve_finish_time_fairness(data.problem, data.remaining, data.elapsed, data.elapsed, **settings)
        else:
            result = solve_max_sum_throughput(data.problem, **settings)
        assert result.objective is not None, result.status
        return result.objective

    return run


def methods(policy: str) -> dict[str, Callable[[Inputs], float]]:
    if policy == "max_min_fairness_water_filling":  # Gavel's needs a MILP solver (GLPK_MI): not in the bench extra
        return {"highs": ours(policy), "highs-per-job": ours(policy, aggregate=False),
                "pyomo-highs": ours(policy, solver="pyomo-highs")}
    table = {"gavel-cvxpy-ecos": GAVEL[policy], "highs": ours(policy),
             "highs-whole-lp": ours(policy, method="lp"), "highs-per-job": ours(policy, aggregate=False)}
    if policy == "max_sum_throughput":
        del table["highs-whole-lp"]  # it has no other method
    return table


def classes(policy: str, data: Inputs) -> int:
    """How many classes the default solve has (rows of its LP)."""
    problem = data.problem
    columns: tuple[np.ndarray, ...] = {
        "max_min_fairness": (normalised_coefficients(problem), problem.scale_factors, problem.throughputs > 0),
        "max_min_fairness_water_filling": (normalised_coefficients(problem), problem.scale_factors,
                                           problem.throughputs > 0),
        "makespan": (problem.throughputs, problem.scale_factors, data.remaining),
        "finish_time_fairness": (problem.throughputs, problem.scale_factors, data.remaining, data.elapsed),
        "max_sum_throughput": (problem.throughputs, problem.scale_factors),
    }[policy]
    return int(job_classes(True, *columns)[0].size)


def timed(method: Callable[[Inputs], float], data: Inputs, repeats: int) -> tuple[float, float, float]:
    value = method(data)  # warm-up: imports, first solver call
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        value = method(data)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=lambda s: [int(v) for v in s.split(",")], default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policies", type=lambda s: s.split(","), default=list(POLICIES))
    parser.add_argument("--methods", type=lambda s: s.split(","), default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for policy in args.policies:
        for jobs in args.jobs:
            for inputs in ("gavel", "distinct"):
                data = draw_inputs(jobs, inputs)
                load = os.getloadavg()[0]
                table = methods(policy)
                chosen = [name for name in table if args.methods is None or name in args.methods]
                measured = {name: timed(table[name], data, args.repeats) for name in chosen}
                reference = measured.get("highs", next(iter(measured.values())))[2]
                gavel_wall = measured["gavel-cvxpy-ecos"][0] if "gavel-cvxpy-ecos" in measured else None
                count = classes(policy, data)
                for name, (wall, cpu, value) in measured.items():
                    rows.append(Row(policy, jobs, inputs, int(data.problem.gpus[0]), count, name, args.repeats,
                                    wall, cpu, value, (value - reference) / reference,
                                    None if gavel_wall is None else wall / gavel_wall, load))
                    print(f"{policy:>20} {jobs:>6} {inputs:>8} {count:>6} classes {name:>16}: {wall:8.4f} s wall, "
                          f"{cpu:8.4f} s CPU, objective {value:.9g}, load {load:.1f}", flush=True)
    records: list[dict[str, Any]] = [asdict(row) for row in rows]
    if args.out.is_file():  # a rerun of some policies or sizes (more repeats, a quieter machine) keeps the rest
        ran = {(row.policy, str(row.jobs)) for row in rows}
        with args.out.open(newline="") as handle:
            kept = [old for old in csv.DictReader(handle) if (old.get("policy"), old.get("jobs")) not in ran]
        order = {name: index for index, name in enumerate(POLICIES)}
        records = sorted([*kept, *records], key=lambda r: (order.get(str(r["policy"]), len(order)), int(r["jobs"])))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(records)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
