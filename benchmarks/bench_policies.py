"""Gavel's max-min fairness LP on 3 GPU types: this toolkit's LP against Gavel's own formulation, same inputs.

Run from the repository root (Gavel's side needs the bench extra: ``pip install -e ".[bench]"``)::

    python benchmarks/bench_policies.py                  # 1,000 and 10,000 jobs; writes the CSV
    python benchmarks/bench_policies.py --jobs 1000 --repeats 1

Inputs, drawn once per size (seed 0) on k80, p100 and v100 with ``jobs // 10`` GPUs of each type:

- ``gavel``: jobs as Gavel's job generator draws them (``scheduler/utils.py``: scale factor 1, 2, 4, 8 with
  probability .7, .1, .15, .05; the job type uniform among those with a throughput at that scale factor on
  every type), each job's throughputs Gavel's (the shipped ``isolated_throughputs.json``): jobs are alike by
  job type and scale factor, as in Gavel's simulator.
- ``distinct``: the same jobs with each throughput times ``exp(N(0, 0.05))``, so that no two jobs are alike.

Methods, each timed ``--repeats`` times after an untimed warm-up (median wall and process CPU seconds, the
load average at the start of each size recorded beside them):

- ``gavel-cvxpy-ecos``: Gavel's ``MaxMinFairnessPolicyWithPerf.get_allocation`` formulation in cvxpy
  (``x`` a ``(jobs, types)`` variable, maximise ``min(sum(c * x, axis=1))`` under its base constraints),
  solved by ECOS as Gavel does; the time includes cvxpy's compilation, as in Gavel;
- ``highs``: ``solve_max_min_fairness(problem)``, the default (identical jobs as one class, exact);
- ``highs-per-job``: the same with ``aggregate=False`` (an LP row per job).

Each method's least normalised throughput ``z`` is recorded and its relative difference to ``highs``.
Results go to ``benchmarks/results/policies.csv``.
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

import numpy as np

from synergy_opt.gavel_throughputs import load_gavel_throughputs
from synergy_opt.policies import PolicyProblem, solve_max_min_fairness
from synergy_opt.policies.max_min import normalised_coefficients
from synergy_opt.policies.problem import job_classes

TYPES = ("k80", "p100", "v100")
SIZES = (1000, 10000)
NOISE = 0.05
RESULTS = Path(__file__).resolve().parent / "results" / "policies.csv"
SCALE_FACTORS = (1, 2, 4, 8)
SCALE_PROBABILITIES = (0.7, 0.1, 0.15, 0.05)


@dataclass(frozen=True)
class Row:
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
    return PolicyProblem(throughputs, scale, np.full(len(TYPES), jobs // 10), types=TYPES)


def gavel_cvxpy(problem: PolicyProblem) -> float:
    """Gavel's formulation (``max_min_fairness.py``, ``MaxMinFairnessPolicyWithPerf``) in cvxpy, by ECOS."""
    import cvxpy as cp  # the bench extra

    scale = np.repeat(problem.scale_factors[:, None].astype(float), problem.num_types, axis=1)
    # Gavel's objective coefficients: throughputs / (weight * proportional throughput) * scale factor.
    coefficients = normalised_coefficients(problem)
    x = cp.Variable(problem.throughputs.shape)
    objective = cp.Maximize(cp.min(cp.sum(cp.multiply(coefficients, x), axis=1)))
    constraints = [x >= 0, cp.sum(cp.multiply(scale, x), axis=0) <= problem.gpus, cp.sum(x, axis=1) <= 1]
    problem_ = cp.Problem(objective, constraints)
    problem_.solve(solver="ECOS")
    return float(problem_.value)


def ours(aggregate: bool) -> Callable[[PolicyProblem], float]:
    def run(problem: PolicyProblem) -> float:
        result = solve_max_min_fairness(problem, aggregate=aggregate)
        assert result.objective is not None, result.status
        return result.objective

    return run


METHODS: dict[str, Callable[[PolicyProblem], float]] = {
    "gavel-cvxpy-ecos": gavel_cvxpy, "highs": ours(True), "highs-per-job": ours(False),
}


def timed(method: Callable[[PolicyProblem], float], problem: PolicyProblem, repeats: int
          ) -> tuple[float, float, float]:
    value = method(problem)  # warm-up: imports, first solver call
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        value = method(problem)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=lambda s: [int(v) for v in s.split(",")], default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", type=lambda s: s.split(","), default=list(METHODS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for jobs in args.jobs:
        for inputs in ("gavel", "distinct"):
            problem = draw_problem(jobs, inputs)
            load = os.getloadavg()[0]
            classes = int(job_classes(True, normalised_coefficients(problem), problem.scale_factors,
                                      problem.throughputs > 0)[0].size)
            measured = {name: timed(METHODS[name], problem, args.repeats) for name in args.methods}
            reference = measured.get("highs", next(iter(measured.values())))[2]
            gavel_wall = measured["gavel-cvxpy-ecos"][0] if "gavel-cvxpy-ecos" in measured else None
            for name, (wall, cpu, value) in measured.items():
                rows.append(Row(jobs, inputs, int(problem.gpus[0]), classes, name, args.repeats, wall, cpu, value,
                                (value - reference) / reference, None if gavel_wall is None else wall / gavel_wall,
                                load))
                print(f"{jobs:>6} {inputs:>8} {classes:>6} classes {name:>17}: {wall:8.4f} s wall, "
                      f"{cpu:8.4f} s CPU, z = {value:.7f}, load {load:.1f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
