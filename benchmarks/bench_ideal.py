"""Ideal-allocation ILP: build + solve seconds against cluster size (issue 2's speed targets).

    python benchmarks/bench_ideal.py [--sizes 128,1024,16384] [--repeats 5] [--time-limit 120]
                                     [--direct-up-to 1024] [--seeds 0,1,2]

Single-GPU (20,70,10) instances, HiGHS, with and without ``profile_noise=0.05``, at the default relative gap
(1e-6). Two methods: ``auto`` (what ``solve_ideal`` does by default: the core method of
``synergy_opt.ideal.core`` when no two jobs are alike, else the whole model to HiGHS) and ``direct`` (the
whole model to HiGHS; only up to ``--direct-up-to`` GPUs with noise, as it needs minutes beyond). Prints a
line per run and writes ``benchmarks/results/ideal.csv``. Targets: build + solve <= 50 ms at 1024 GPUs and
<= 1 s at 16384. The artifact's own ideal ILP (cvxpy + GLPK_MI) needs 0.57 s at 128 GPUs and 13.4 s at 1024
(SPEC section 6).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import time
from pathlib import Path

import synergy_opt as so

ARTIFACT_SECONDS = {128: 0.57, 512: 2.7, 1024: 13.4, 2048: 24.5}
RESULTS = Path(__file__).resolve().parent / "results" / "ideal.csv"


def measure(gpus: int, noise: float, seed: int, method: str, repeats: int, time_limit: float) -> dict[str, object]:
    instance = so.generate_round(gpus, profile_noise=noise, seed=seed)
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = so.solve_ideal(instance, time_limit=time_limit, method=method)  # type: ignore[arg-type]
        runs.append((time.perf_counter() - start, result))
    wall = statistics.median(seconds for seconds, _ in runs)
    result = runs[0][1]
    return {
        "gpus": gpus,
        "profile_noise": noise,
        "seed": seed,
        "method": method,
        "solver": result.solver,
        "status": result.status.value,
        "objective": result.objective,
        "gap": result.gap,
        "columns": result.ideal.model.num_vars,
        "classes": result.ideal.num_classes,
        "build_ms": 1000 * statistics.median(r.build_seconds for _, r in runs),
        "solve_ms": 1000 * statistics.median(r.solve_seconds for _, r in runs),
        "total_ms": 1000 * wall,
        "artifact_s": ARTIFACT_SECONDS.get(gpus, ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="128,1024,4096,16384")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--direct-up-to", type=int, default=1024)
    parser.add_argument("--seeds", default="0", help="generator seeds of the noisy rounds")
    args = parser.parse_args()
    rows = []
    for noise in (0.0, 0.05):
        seeds = [int(seed) for seed in args.seeds.split(",")] if noise else [0]
        for method, seed in itertools.product(("auto", "direct"), seeds):
            for gpus in (int(size) for size in args.sizes.split(",")):
                if method == "direct" and noise > 0 and gpus > args.direct_up_to:
                    continue
                repeats = args.repeats if method == "auto" or noise == 0 else 1
                row = measure(gpus, noise, seed, method, repeats, args.time_limit)
                rows.append(row)
                print(" ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
                               for key, value in row.items()), flush=True)
    _add_speedups(rows)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {RESULTS}")


def _add_speedups(rows: list[dict[str, object]]) -> None:
    """Direct time over auto time, for each size and noise measured both ways in this run."""
    direct = {(row["gpus"], row["profile_noise"], row["seed"]): row for row in rows if row["method"] == "direct"}
    for row in rows:
        other = direct.get((row["gpus"], row["profile_noise"], row["seed"]))
        ratio = float(other["total_ms"]) / float(row["total_ms"]) if other and row["method"] == "auto" else ""  # type: ignore[arg-type]
        row["direct_over_auto"] = ratio


if __name__ == "__main__":
    main()
