"""Joint exact MILP (SPEC 2.4): status, gap and seconds against cluster size (issue 3's speed target).

    python benchmarks/bench_joint.py [--sizes 32,64,128] [--seeds 5] [--formulations patterns,servers]
                                     [--time-limit 60] [--noise 0]

Full-load (20,70,10) rounds from ``generate_round``, single-GPU and multi-GPU, each solved with and without
consolidation, HiGHS, one thread, ``mip_gap=1e-4``. Prints one line per solve and writes
``benchmarks/results/joint.csv``. Target: proven optimal (gap <= 1e-4) within 60 s at 128 GPUs (16 servers).
``ideal_ilp`` is the ideal ILP's optimum on the same round (the upper bound); ``loss_vs_ideal`` is the share of
it the placement costs.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import synergy_opt as so

RESULTS = Path(__file__).resolve().parent / "results" / "joint.csv"


def measure(
    gpus: int, multi_gpu: bool, seed: int, consolidate: bool, formulation: str, noise: float, time_limit: float
) -> dict[str, object]:
    instance = so.generate_round(gpus, multi_gpu=multi_gpu, seed=seed, profile_noise=noise)
    ideal = so.solve_ideal(instance).objective
    start = time.perf_counter()
    result = so.solve_joint(instance, consolidate=consolidate, formulation=formulation,  # type: ignore[arg-type]
                            time_limit=time_limit, mip_gap=1e-4)
    wall = time.perf_counter() - start
    evaluation = result.evaluation
    joint = result.joint
    patterns = getattr(joint, "patterns", None)
    return {
        "gpus": gpus,
        "multi_gpu": multi_gpu,
        "seed": seed,
        "profile_noise": noise,
        "consolidate": consolidate,
        "formulation": result.formulation,
        "jobs": len(instance.jobs),
        "patterns": 0 if patterns is None else len(patterns),
        "columns": joint.model.num_vars,
        "rows": joint.model.num_cons,
        "status": result.status.value,
        "objective": result.objective,
        "bound": result.bound,
        "gap": result.gap,
        "ideal_ilp": ideal,
        "loss_vs_ideal": None if result.objective is None or not ideal else (ideal - result.objective) / ideal,
        "valid": None if evaluation is None else evaluation.valid,
        "jobs_split": None if evaluation is None else len(evaluation.split_jobs),
        "build_s": result.build_seconds,
        "solve_s": result.solve_seconds,
        "total_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="32,64,128")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--formulations", default="patterns")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--noise", type=float, default=0.0, help="profile_noise of the generated rounds")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = []
    for formulation in args.formulations.split(","):
        for gpus in (int(size) for size in args.sizes.split(",")):
            for multi_gpu in (False, True):
                for consolidate in (True, False):
                    for seed in range(args.seeds):
                        row = measure(gpus, multi_gpu, seed, consolidate, formulation, args.noise, args.time_limit)
                        rows.append(row)
                        print(" ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
                                       for key, value in row.items()), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    worst = max((r for r in rows if r["gpus"] == max(int(s) for s in args.sizes.split(","))),
                key=lambda r: float(r["total_s"]))  # type: ignore[arg-type]
    proven = sum(r["status"] == "optimal" for r in rows)
    print(f"{proven}/{len(rows)} proven optimal; slowest at the largest size: {worst['total_s']:.3g} s "
          f"({'multi' if worst['multi_gpu'] else 'single'}-GPU, seed {worst['seed']}, {worst['formulation']})")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
