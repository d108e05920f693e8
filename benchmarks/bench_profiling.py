"""Optimistic against exhaustive profiling, and what modelled jobs change in a round.

Run from the repository root::

    python benchmarks/bench_profiling.py            # every figure; writes the CSVs and the plot
    python benchmarks/bench_profiling.py --quick    # fewer seeds (a smoke run)

Three tables, in ``benchmarks/results/``:

- ``profiling.csv``: per built-in model (its fitted :class:`JobModel` as the job), on the paper's grid
  (1-24 CPUs x memory in 50 GB steps to 500 GB: 240 points) and on the built-in grid (9 x 5), the points and
  simulated minutes (one a point) of the optimistic and the exhaustive profiler, and the optimistic profile's
  largest relative error against the exhaustive one: exact, and with 2% measurement noise (the worst error
  and the most points of ``--noise-seeds`` runs); then the same for the built-in matrices themselves
  (``job = "matrix"``).
- ``profiling_rounds.csv``: on 128-GPU full-load rounds (single- and multi-GPU jobs, seeds ``--seeds``),
  built-in, log-normal-noise (``profile_noise=0.1``) and modelled (``jobs="modelled"``) jobs, and modelled
  jobs with the dataset spread at 0.3 instead of 0.1 (``modelled wide``, the same jobs otherwise): the
  objective of proportional, TUNE and the ideal ILP (``evaluate`` / ``solve_ideal``) and the gains over
  proportional.
- ``profiling_rounds.png``: those gains.
- ``profiling_sensitivity.csv``: per kind of job and model, over the single-GPU rounds, the mean of a job's
  best throughput over its floor, and of its plateau (grid points at its best throughput).
- ``profiling_jct.csv``, ``profiling_jct.png``: what profiling costs in average JCT. Dynamic traces (single-GPU
  jobs, split 20/70/10, ``--jct-jobs`` jobs, seeds ``--jct-seeds``) on a 32-GPU cluster at several loads,
  simulated with SRTF and TUNE (``synergy_opt.simulate``, 5-minute rounds): no profiling; each job profiled on
  arrival on its own 9 x 5 grid (optimistic: 2-9 minutes, exhaustive: 45); and on the paper's 24 x 10 grid
  (the optimistic search on the job's fitted model: 2-8 minutes; exhaustive: 240). GPU-proportional without
  profiling (it needs none) is the baseline.

Every figure is deterministic (no timing), so the machine's load does not move them; it is recorded anyway.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from synergy_opt import evaluate, generate_round, model_names, run_mechanism, solve_ideal
from synergy_opt.instance import Cluster, Job, RoundInstance
from synergy_opt.profiles import builtin_profile
from synergy_opt.profiling import (
    JobModel,
    builtin_job_model,
    draw_job_model,
    profile_exhaustive,
    profile_job,
    profile_matrix,
)
from synergy_opt.profiling.sampler import PARAMETER_SPREAD
from synergy_opt.sim import Trace, generate_trace, simulate, with_profiling_delay

RESULTS = Path(__file__).resolve().parent / "results"
GRIDS = {
    "paper 24x10": (np.arange(1.0, 25.0), np.arange(50.0, 501.0, 50.0)),
    "builtin 9x5": (np.array([1, 2, 3, 4, 5, 6, 9, 12, 24.0]), np.array([20.83, 62.5, 125, 187.5, 250])),
}
KINDS = ("builtin", "noise 0.1", "modelled", "modelled wide")
WIDE = tuple((key, 0.3 if key == "dataset_gb" else sigma) for key, sigma in PARAMETER_SPREAD)


@dataclass(frozen=True)
class ProfilingRow:
    grid: str
    model: str
    job: str
    cpu_axis: int
    optimistic_points: int
    exhaustive_points: int
    optimistic_minutes: float
    exhaustive_minutes: float
    speedup: float
    max_error_exact: float
    max_error_noise2: float | None
    max_points_noise2: int | None
    load_avg_1min: float


@dataclass(frozen=True)
class RoundRow:
    jobs: str
    multi_gpu: bool
    seed: int
    proportional: float
    tune: float
    ideal: float
    tune_gain: float
    ideal_gain: float
    load_avg_1min: float


def relative_error(profile: np.ndarray, exact: np.ndarray) -> float:
    return float((np.abs(profile - exact) / np.where(exact > 0, exact, 1.0)).max())


def profiling_rows(noise_seeds: int) -> list[ProfilingRow]:
    rows = []
    for grid, (cpu, mem) in GRIDS.items():
        for name in model_names():
            model = builtin_job_model(name)
            exhaustive = profile_exhaustive(model.samples_per_s, cpu, mem)
            optimistic = profile_job(model.samples_per_s, cpu, mem, model.memory_model)
            noisy, noisy_points = [], []
            for seed in range(noise_seeds):
                rng = np.random.default_rng(seed)

                def measure(c: float, m: float, rng: np.random.Generator = rng, job: JobModel = model) -> float:
                    return float(job.samples_per_s(c, m)) * (1 + 0.02 * rng.uniform(-1, 1))

                result = profile_job(measure, cpu, mem, model.memory_model)
                noisy.append(relative_error(result.profile.tput, exhaustive.profile.tput))
                noisy_points.append(result.points)
            rows.append(ProfilingRow(
                grid, name, "model", cpu.size, optimistic.points, exhaustive.points, optimistic.minutes,
                exhaustive.minutes, exhaustive.minutes / optimistic.minutes,
                relative_error(optimistic.profile.tput, exhaustive.profile.tput), max(noisy), max(noisy_points),
                os.getloadavg()[0],
            ))
    for name in model_names():
        profile = builtin_profile(name)
        optimistic, exhaustive = profile_matrix(profile, "optimistic"), profile_matrix(profile, "exhaustive")
        rows.append(ProfilingRow(
            "builtin 9x5", name, "matrix", profile.cpu_per_gpu.size, optimistic.points, exhaustive.points,
            optimistic.minutes, exhaustive.minutes, exhaustive.minutes / optimistic.minutes,
            relative_error(optimistic.profile.tput, profile.tput), None, None, os.getloadavg()[0],
        ))
    return rows


def make_round(kind: str, multi_gpu: bool, seed: int) -> RoundInstance:
    if kind == "noise 0.1":
        return generate_round(gpus=128, multi_gpu=multi_gpu, seed=seed, profile_noise=0.1)
    if kind == "modelled":
        return generate_round(gpus=128, multi_gpu=multi_gpu, seed=seed, jobs="modelled")
    instance = generate_round(gpus=128, multi_gpu=multi_gpu, seed=seed)
    if kind == "builtin":
        return instance
    # The built-in round's jobs, each given a model drawn with the wider dataset spread.
    rng = np.random.default_rng([seed, 1])
    cpu, mem = GRIDS["builtin 9x5"]
    jobs = tuple(Job(job.id, job.gpus, draw_job_model(rng, str(job.model), WIDE).profile(cpu, mem), model=job.model,
                     work=job.work) for job in instance.jobs)
    return RoundInstance(instance.cluster, jobs, {**instance.metadata, "jobs": "modelled wide"})


def sensitivity_rows(seeds: list[int]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for kind in KINDS:
        jobs = [(job, floor) for seed in seeds for instance in [make_round(kind, False, seed)]
                for job, floor in zip(instance.jobs, instance.floors, strict=True)]
        for name in model_names():
            picked = [(job.profile.tput, floor) for job, floor in jobs if job.model == name]
            rows.append({
                "jobs": kind, "model": name, "count": len(picked),
                "best_over_floor": float(np.mean([tput.max() / floor for tput, floor in picked])),
                "plateau_points": float(np.mean([(tput >= tput.max() * (1 - 1e-9)).sum() for tput, _ in picked])),
            })
    return rows


def round_rows(seeds: list[int]) -> list[RoundRow]:
    rows = []
    for kind in KINDS:
        for multi_gpu in (False, True):
            for seed in seeds:
                instance = make_round(kind, multi_gpu, seed)
                proportional = evaluate(instance, run_mechanism(instance, "proportional")).objective
                tune = evaluate(instance, run_mechanism(instance, "tune")).objective
                ideal = solve_ideal(instance).objective
                rows.append(RoundRow(kind, multi_gpu, seed, proportional, tune, ideal, tune / proportional,
                                     ideal / proportional, os.getloadavg()[0]))
    return rows


JCT_VARIANTS = ("proportional", "tune", "tune + optimistic 9x5", "tune + exhaustive 9x5",
                "tune + optimistic 24x10", "tune + exhaustive 24x10")


def paper_grid_delays(trace: Trace, method: str) -> Trace:
    """Each job profiled on the paper's grid: its built-in model's fitted job model searched, or 240 points."""
    cpu, mem = GRIDS["paper 24x10"]
    minutes: dict[str, float] = {}
    for name in model_names():
        model = builtin_job_model(name)
        minutes[name] = (profile_job(model.samples_per_s, cpu, mem, model.memory_model).minutes
                         if method == "optimistic" else float(cpu.size * mem.size))
    return Trace(tuple(replace(job, profiling_s=60.0 * minutes[str(job.model)]) for job in trace.jobs),
                 trace.metadata)


def jct_rows(loads: list[float], seeds: list[int], jobs: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    cluster = Cluster(4)
    for load in loads:
        for seed in seeds:
            trace = generate_trace(jobs=jobs, load=load, seed=seed)
            traces = {
                "proportional": trace, "tune": trace,
                "tune + optimistic 9x5": with_profiling_delay(trace, "optimistic"),
                "tune + exhaustive 9x5": with_profiling_delay(trace, "exhaustive"),
                "tune + optimistic 24x10": paper_grid_delays(trace, "optimistic"),
                "tune + exhaustive 24x10": paper_grid_delays(trace, "exhaustive"),
            }
            for variant in JCT_VARIANTS:
                mechanism = "proportional" if variant == "proportional" else "tune"
                result = simulate(traces[variant], cluster, policy="srtf", mechanism=mechanism)
                monitored = result.monitored_jobs
                rows.append({
                    "load_per_h": load, "seed": seed, "variant": variant, "avg_jct_h": result.summary["avg_jct_h"],
                    "p99_jct_h": result.summary["p99_jct_h"], "unfinished": result.summary["unfinished"],
                    "mean_profiling_min": float(monitored["profiling_s"].mean() / 60.0),
                    "load_avg_1min": os.getloadavg()[0],
                })
    return rows


def plot_jct(rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    loads = sorted({float(str(r["load_per_h"])) for r in rows})
    for variant in JCT_VARIANTS:
        means = [statistics.mean(float(str(r["avg_jct_h"])) for r in rows
                                 if r["variant"] == variant and r["load_per_h"] == load) for load in loads]
        ax.plot(loads, means, marker="o", label=variant, linestyle="--" if variant == "proportional" else "-")
    ax.set_xlabel("load (jobs per hour), 32 GPUs")
    ax.set_ylabel("average JCT (h), SRTF")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write(path: Path, rows: list[ProfilingRow] | list[RoundRow] | list[dict[str, object]]) -> None:
    dicts = [row if isinstance(row, dict) else asdict(row) for row in rows]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dicts[0]))
        writer.writeheader()
        writer.writerows(dicts)


def plot(rows: list[RoundRow], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, multi_gpu in zip(axes, (False, True), strict=True):
        for offset, (what, colour) in enumerate((("tune_gain", "tab:blue"), ("ideal_gain", "tab:orange"))):
            for index, kind in enumerate(KINDS):
                gains = [getattr(r, what) for r in rows if r.jobs == kind and r.multi_gpu == multi_gpu]
                ax.scatter(np.full(len(gains), index + 0.15 * (2 * offset - 1)), gains, color=colour, s=14,
                           label=what.replace("_gain", "") if index == 0 else None)
        ax.set_xticks(range(len(KINDS)), list(KINDS))
        ax.set_title(f"128 GPUs, {'multi' if multi_gpu else 'single'}-GPU jobs")
        ax.axhline(1.0, color="grey", lw=0.5)
    axes[0].set_ylabel("objective / proportional")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# The flags' defaults, of a full run and of --quick's smoke run.
FULL_DEFAULTS = {"seeds": "0,1,2,3,4,5,6,7,8,9", "noise_seeds": 50, "jct_loads": "1.5,2.5,3.0,3.5", "jct_seeds": "0,1",
                 "jct_jobs": 400}
QUICK_DEFAULTS = {"seeds": "0,1,2", "noise_seeds": 5, "jct_loads": "2.5", "jct_seeds": "0", "jct_jobs": 150}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: the defaults of the other flags become round seeds 0,1,2, 5 noise seeds, "
                             "JCT load 2.5, JCT seed 0 and 150 jobs (a flag given still wins)")
    parser.add_argument("--seeds", help="round seeds (comma-separated; default 0-9)")
    parser.add_argument("--noise-seeds", type=int, help="noisy profiling runs per model and grid (default 50)")
    parser.add_argument("--jct-loads", help="arrival rates (jobs per hour; default 1.5,2.5,3.0,3.5)")
    parser.add_argument("--jct-seeds", help="trace seeds of the JCT sweep (default 0,1)")
    parser.add_argument("--jct-jobs", type=int, help="jobs per trace of the JCT sweep (default 400)")
    args = parser.parse_args()
    defaults = QUICK_DEFAULTS if args.quick else FULL_DEFAULTS
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    seeds = [int(s) for s in args.seeds.split(",")]
    noise_seeds = args.noise_seeds
    RESULTS.mkdir(exist_ok=True)

    profiling = profiling_rows(noise_seeds)
    write(RESULTS / "profiling.csv", profiling)
    print(f"{'grid':12s} {'model':11s} {'job':6s} {'points opt/exh':>15s} {'minutes':>13s} {'x':>5s} "
          f"{'err exact':>9s} {'err 2%':>7s} {'points 2%':>9s}")
    for r in profiling:
        noise = "" if r.max_error_noise2 is None else f"{r.max_error_noise2:7.3f} {r.max_points_noise2:9d}"
        print(f"{r.grid:12s} {r.model:11s} {r.job:6s} {r.optimistic_points:7d}/{r.exhaustive_points:<7d} "
              f"{r.optimistic_minutes:5.0f}/{r.exhaustive_minutes:<7.0f} {r.speedup:5.1f} "
              f"{r.max_error_exact:9.4f} {noise}")

    rounds = round_rows(seeds)
    write(RESULTS / "profiling_rounds.csv", rounds)
    plot(rounds, RESULTS / "profiling_rounds.png")
    print(f"\n{'jobs':14s} {'trace':6s} {'tune gain median [min, max]':>30s} {'ideal gain median [min, max]':>30s}")
    for kind in KINDS:
        for multi_gpu in (False, True):
            picked = [r for r in rounds if r.jobs == kind and r.multi_gpu == multi_gpu]
            cells = []
            for what in ("tune_gain", "ideal_gain"):
                gains = [getattr(r, what) for r in picked]
                cells.append(f"{statistics.median(gains):.3f} [{min(gains):.3f}, {max(gains):.3f}]")
            print(f"{kind:14s} {'multi' if multi_gpu else 'single':6s} {cells[0]:>30s} {cells[1]:>30s}")
    sensitivity = sensitivity_rows(seeds)
    write(RESULTS / "profiling_sensitivity.csv", sensitivity)
    print("\nmean best throughput / floor, single-GPU rounds")
    print(f"{'model':12s}" + "".join(f"{kind:>15s}" for kind in KINDS))
    for name in model_names():
        cells = [next(r["best_over_floor"] for r in sensitivity if r["jobs"] == kind and r["model"] == name)
                 for kind in KINDS]
        print(f"{name:12s}" + "".join(f"{float(str(c)):15.2f}" for c in cells))
    loads = [float(x) for x in args.jct_loads.split(",")]
    jct_seeds = [int(x) for x in args.jct_seeds.split(",")]
    jct = jct_rows(loads, jct_seeds, args.jct_jobs)
    write(RESULTS / "profiling_jct.csv", jct)
    plot_jct(jct, RESULTS / "profiling_jct.png")
    print("\naverage JCT (h), SRTF, 32 GPUs, mean over seeds; in brackets the mean profiling delay (min)")
    print(f"{'load/h':>7s}" + "".join(f"{v:>26s}" for v in JCT_VARIANTS))
    for load in loads:
        cells = []
        for variant in JCT_VARIANTS:
            picked = [r for r in jct if r["variant"] == variant and r["load_per_h"] == load]
            mean_jct = statistics.mean(float(str(r["avg_jct_h"])) for r in picked)
            delay = statistics.mean(float(str(r["mean_profiling_min"])) for r in picked)
            cells.append(f"{mean_jct:.2f} [{delay:.0f}]")
        print(f"{load:7.1f}" + "".join(f"{c:>26s}" for c in cells))
    print(f"\nload average (1 min) at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
