"""Gavel's multi-level fairness experiment (its paper's hierarchical-policy figure) with this toolkit's solver.

Run from the repository root::

    python benchmarks/bench_hierarchical.py            # writes results/hierarchical.csv and hierarchical.png

The experiment as Gavel's notebook ``scheduler/notebooks/figures/evaluation/hierarchical.ipynb`` sets it up
(stanford-futuredata/gavel c4fa400): 3 k80, 3 p100 and 3 v100 GPUs; 72 timesteps, one job more every 4 (1 to
18 jobs); job ``i`` of entity ``i // 6``, the entities of weights 1, 2 and 3; each job's type drawn by Python's
``random.choice`` over Gavel's job table after ``random.seed(0)`` (so the first ``k`` jobs are the same at every
timestep), its throughputs Gavel's measured ones at 1 GPU (the shipped ``isolated_throughputs.json``); own
priority weights ``(i % 2) + 1`` under ``fairness``, 1 under ``fifo``. Each job's share of the summed normalised
throughput at each timestep is written, with the sum (Gavel's figure stacks the shares by entity), for both
reweighting policies.
"""

from __future__ import annotations

import argparse
import csv
import random
import time
from pathlib import Path

import numpy as np

from synergy_opt.gavel_throughputs import load_gavel_throughputs
from synergy_opt.policies import Entities, PolicyProblem, solve_water_filling

RESULTS = Path(__file__).resolve().parent / "results"
TYPES = ("k80", "p100", "v100")
# Gavel's JobTable (scheduler/job_table.py), in its order: random.choice's draws depend on it.
JOB_TABLE = (
    [f"ResNet-18 (batch size {b})" for b in (16, 32, 64, 128, 256)]
    + [f"ResNet-50 (batch size {b})" for b in (16, 32, 64, 128)]
    + [f"Transformer (batch size {b})" for b in (16, 32, 64, 128, 256)]
    + [f"LM (batch size {b})" for b in (5, 10, 20, 40, 80)]
    + [f"Recommendation (batch size {b})" for b in (512, 1024, 2048, 4096, 8192)]
    + ["A3C", "CycleGAN"]
)
JOBS, TIMESTEPS, EVERY, ENTITIES, GPUS_PER_TYPE = 18, 72, 4, 3, 3


def instance(jobs: int, reweighting: str) -> tuple[PolicyProblem, Entities]:
    """The notebook's ``create_problem_instance`` with ``jobs`` jobs."""
    table = load_gavel_throughputs()
    random.seed(0)
    kinds = [random.choice(JOB_TABLE) for _ in range(jobs)]
    throughputs = [[table.get(t, kind, 1) or 0.0 for t in TYPES] for kind in kinds]
    weights = [1.0 if reweighting == "fifo" else float(i % 2 + 1) for i in range(jobs)]
    names = [f"entity{e}" for e in range(ENTITIES)]
    # Ids must be distinct (the job types repeat): the job's place and its type.
    problem = PolicyProblem(np.array(throughputs), [1] * jobs, [GPUS_PER_TYPE] * len(TYPES), weights, TYPES,
                            tuple(f"{i}:{kind}" for i, kind in enumerate(kinds)))
    entities = Entities([names[i // (JOBS // ENTITIES)] for i in range(jobs)],
                        {name: float(e + 1) for e, name in enumerate(names)}, dict.fromkeys(names, reweighting))
    return problem, entities


def normalised(problem: PolicyProblem, x: np.ndarray) -> np.ndarray:
    return np.asarray((problem.throughputs * x).sum(axis=1) / problem.proportional_throughputs())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "hierarchical.csv")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for reweighting in ("fairness", "fifo"):
        shares: dict[int, np.ndarray] = {}
        for jobs in range(1, JOBS + 1):  # the problem of each job count, once
            problem, entities = instance(jobs, reweighting)
            started = time.perf_counter()
            result = solve_water_filling(problem, entities=entities)
            seconds = time.perf_counter() - started
            values = normalised(problem, result.allocation)
            shares[jobs] = values
            print(f"{reweighting} {jobs:2d} jobs: {result.iterations} LPs, {seconds * 1e3:.1f} ms, "
                  f"entity totals {[round(float(values[entities_of(jobs, e)].sum()), 3) for e in range(ENTITIES)]}")
        for step in range(1, TIMESTEPS + 1):
            jobs = min(1 + (step - 1) // EVERY, JOBS)
            values = shares[jobs]
            for job in range(jobs):
                rows.append({"reweighting": reweighting, "timestep": step, "jobs": jobs, "job": job,
                             "entity": job // (JOBS // ENTITIES), "normalised": float(values[job]),
                             "share": float(values[job] / values.sum()), "total": float(values.sum())})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out}")
    if not args.no_plot:
        plot(rows, args.out.with_suffix(".png"))
    return 0


def entities_of(jobs: int, entity: int) -> slice:
    size = JOBS // ENTITIES
    return slice(entity * size, min((entity + 1) * size, jobs))


def plot(rows: list[dict[str, float | int | str]], where: Path) -> None:
    """Each entity's share of the summed normalised throughput against the timestep, stacked, per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 3.2), sharey=True)
    for ax, reweighting in zip(axes, ("fairness", "fifo"), strict=True):
        steps = np.arange(1, TIMESTEPS + 1)
        share = np.zeros((ENTITIES, TIMESTEPS))
        for row in rows:
            if row["reweighting"] == reweighting:
                share[int(row["entity"]), int(row["timestep"]) - 1] += float(row["share"])
        ax.stackplot(steps, share, labels=[f"entity {e} (weight {e + 1})" for e in range(ENTITIES)])
        ax.set_title(f"within entities: {reweighting}")
        ax.set_xlabel("timestep (a job added every 4)")
        ax.set_xlim(1, TIMESTEPS)
    axes[0].set_ylabel("share of total\nnormalised throughput")
    axes[1].legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(where, dpi=120)
    print(f"wrote {where}")


if __name__ == "__main__":
    raise SystemExit(main())
