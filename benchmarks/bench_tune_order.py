"""Which TUNE packing rule gives the shortest JCTs (issue 19): the paper's, policy order, spread.

    python benchmarks/bench_tune_order.py [--workers 1] [--seeds 0-9] [--parts fig9,split,multi]

Every run: 128 GPUs (16 x (8, 24, 500)), FIFO, 300 s rounds, exact progress, jobs 4000-4999 monitored, the run
ending when the last of them finishes, seeds 0-9. Rules (``run_mechanism(..., "tune", sort=, fit=)``):

- ``paper``: the paper's section 4.2, jobs sorted by GPU, CPU, memory demand, largest first, best fit;
- ``policy``: the policy's order (FIFO: arrival), best fit (what the artifact's TUNE does, but best fit);
- ``spread``: the paper's sort, each job on the server with the most free resources (worst fit), which
  spreads the CPU-hungry jobs, placed first, over the servers instead of filling a few with them.

Parts: ``fig9``, Figure 9's setting (single-GPU, split (20,70,10)) at 6, 8, 9 and 10 jobs/h; ``split``, the
(50,0,50) split, single-GPU, at 8 jobs/h; ``multi``, the multi-GPU mix, (20,70,10), at 3.5 jobs/h (each near
its capacity, as 9 jobs/h is Figure 9's: 8 jobs/h is 1.01x TUNE's fluid bound for (50,0,50), 7.92 jobs/h, and
1.05x proportional's, 7.64; 3.5 jobs/h is 0.91x TUNE's bound for the multi-GPU mix, 3.87, and 1.04x
proportional's, 3.38, since multi-GPU jobs leave GPUs idle that the pooled bound counts: at 4 jobs/h every
rule's average JCT is past 220 h on seed 0); and
``rounds`` (deterministic, no timing): single full-load rounds (``generate_round``) at 128 and 1024 GPUs,
single-GPU, multi-GPU, noisy (``profile_noise=0.05``) and split (50,0,50), seeds 0-9, each rule's total
throughput over ``paper``'s, with ``tune-artifact`` and near-opt beside them and how often near-opt is below
each rule (``results/tune_order_rounds.csv``).

Each run's row is appended to ``results/tune_order_runs.csv`` as it finishes (a run already there is not run
again: the script resumes); ``results/tune_order.csv`` holds, per setting and rule, the mean, min and max of
the average JCT over the seeds every rule ran, the mean ratio to ``paper``'s on the same seed, and how many
seeds the rule beats ``paper`` on. The mean speedup of the image and speech jobs is there too (their work over
their time running). Every row records the load average when its run finished.
"""

from __future__ import annotations

import argparse
import os
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from run_log import append_row, recorded_rows, write_rows

from synergy_opt.cli.parallel import run_in_order
from synergy_opt.sim.sweep import SimRun, SimSetting, run_one

RESULTS = Path(__file__).resolve().parent / "results"
RUNS_CSV = RESULTS / "tune_order_runs.csv"
TABLE_CSV = RESULTS / "tune_order.csv"
RULES: dict[str, dict[str, str]] = {
    "paper": {"sort": "demand", "fit": "best"},
    "policy": {"sort": "policy", "fit": "best"},
    "spread": {"sort": "demand", "fit": "spread"},
}
PARTS: dict[str, list[tuple[str, SimSetting]]] = {
    # The loads where CPU and memory run short first: at 6 jobs/h every rule gives every job its best case.
    "fig9": [(f"fig9 {load:g}/h", SimSetting(load=load, jobs=5000, monitor=(4000, 5000)))
             for load in (6.0, 8.0, 9.0, 10.0)],
    "split": [("split (50,0,50) 8/h", SimSetting(load=8.0, split=(50, 0, 50), jobs=5000, monitor=(4000, 5000)))],
    "multi": [("multi-GPU 3.5/h", SimSetting(load=3.5, multi_gpu=True, jobs=5000, monitor=(4000, 5000)))],
}
KEY = ("setting", "rule", "seed")
SENSITIVE = {"alexnet", "res18", "res50", "mobilenet", "shufflenet", "m5", "deepspeech"}


def run_rule(item: tuple[str, str, SimSetting]) -> dict[str, Any]:
    """One run: the setting's trace under TUNE with the rule's options; its summary row."""
    name, rule, setting = item
    outcome = run_one(SimRun(setting, "tune", options=RULES[rule]))
    s = outcome.summary
    jobs = outcome.jobs[outcome.jobs["monitored"]]
    sensitive = jobs[jobs["model"].isin(SENSITIVE)]
    return {"setting": name, "rule": rule, "seed": setting.seed, "load": setting.load,
            "split": s["split"], "multi_gpu": setting.multi_gpu, **RULES[rule],
            "avg_jct_h": s["avg_jct_h"], "p95_jct_h": s["p95_jct_h"], "makespan_h": s["makespan_h"],
            "unfinished": s["unfinished"], "sensitive_mean_speedup": float(sensitive["mean_speedup"].mean()),
            "rounds": s["rounds"], "wall_s": s["wall_s"], "loadavg_1m": round(os.getloadavg()[0], 2)}


def _done() -> dict[tuple[str, str, int], dict[str, Any]]:
    return {(setting, rule, int(seed)): row for (setting, rule, seed), row in recorded_rows(RUNS_CSV, KEY).items()}


def _append(row: dict[str, Any]) -> None:
    append_row(RUNS_CSV, row)
    print(f"{row['setting']:<22} {row['rule']:<7} seed {row['seed']}: {float(row['avg_jct_h']):7.2f} h "
          f"({float(row['wall_s']):.0f} s)", flush=True)


def table(rows: dict[tuple[str, str, int], dict[str, Any]]) -> list[dict[str, Any]]:
    """Per setting and rule, on the seeds every rule ran (so the rules compare on the same traces): the average
    JCT's mean, min and max, its mean ratio to ``paper``'s, the seeds it beats ``paper`` on."""
    out = []
    named = [name for part in PARTS.values() for name, _ in part]  # the table in the parts' order
    settings = sorted(dict.fromkeys(key[0] for key in rows), key=lambda s: named.index(s) if s in named else len(named))
    for setting in settings:
        by_rule = {rule: {seed: row for (s, r, seed), row in rows.items() if s == setting and r == rule}
                   for rule in RULES}
        common = sorted(set.intersection(*(set(runs) for runs in by_rule.values())))
        if not common:
            continue
        paper = {seed: float(by_rule["paper"][seed]["avg_jct_h"]) for seed in common}
        for rule, runs in by_rule.items():
            mine = {seed: float(runs[seed]["avg_jct_h"]) for seed in common}
            out.append({
                "setting": setting, "rule": rule, **RULES[rule], "seeds": len(common),
                "first_seed": common[0], "last_seed": common[-1],
                "mean_avg_jct_h": statistics.fmean(mine.values()), "min_avg_jct_h": min(mine.values()),
                "max_avg_jct_h": max(mine.values()),
                "mean_ratio_to_paper": statistics.fmean(mine[k] / paper[k] for k in common),
                "seeds_better_than_paper": sum(mine[k] < paper[k] * (1 - 1e-6) for k in common),
                "sensitive_mean_speedup": statistics.fmean(float(runs[k]["sensitive_mean_speedup"]) for k in common),
            })
    return out


ROUND_KINDS: dict[str, dict[str, Any]] = {
    "single-GPU": {}, "multi-GPU": {"multi_gpu": True}, "noisy 0.05": {"profile_noise": 0.05},
    "split (50,0,50)": {"split": (50, 0, 50)},
}
ROUNDS_CSV = RESULTS / "tune_order_rounds.csv"


def rounds(seeds: range) -> None:
    """Each rule's round total over the paper's on generated full-load rounds (see the module's docstring)."""
    from synergy_opt import evaluate, generate_round, run_mechanism

    mechanisms = {**{rule: ("tune", options) for rule, options in RULES.items()},
                  "tune-artifact": ("tune-artifact", {}), "near-opt": ("near-opt", {})}
    rows = []
    for gpus in (128, 1024):
        for kind, arguments in ROUND_KINDS.items():
            ratios: dict[str, list[float]] = {name: [] for name in mechanisms}
            below = dict.fromkeys(RULES, 0)
            for seed in seeds:
                instance = generate_round(gpus, seed=seed, **arguments)
                totals = {name: evaluate(instance, run_mechanism(instance, mechanism, **options)).objective
                          for name, (mechanism, options) in mechanisms.items()}
                for name in mechanisms:
                    ratios[name].append(totals[name] / totals["paper"])
                for rule in RULES:
                    below[rule] += totals["near-opt"] < totals[rule] * (1 - 1e-9)
            for name, values in ratios.items():
                rows.append({"gpus": gpus, "round": kind, "mechanism": name, "seeds": len(values),
                             "median_over_paper": statistics.median(values), "min_over_paper": min(values),
                             "max_over_paper": max(values),
                             "near_opt_below_on": below.get(name, "")})
                print(f"{gpus:5d} {kind:<16} {name:<14} median {statistics.median(values):.4f} "
                      f"[{min(values):.4f}, {max(values):.4f}]"
                      + (f"  near-opt below it on {below[name]}/{len(values)}" if name in below else ""), flush=True)
    write_rows(ROUNDS_CSV, rows)
    print(f"wrote {ROUNDS_CSV}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seeds", default="0-9", help="FIRST-LAST")
    parser.add_argument("--parts", default="fig9,split,multi")
    args = parser.parse_args(argv)
    first, last = (int(v) for v in args.seeds.split("-"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    if "rounds" in parts:
        rounds(range(first, last + 1))
        parts.remove("rounds")
        if not parts:
            return
    done = _done()
    items = [(name, rule, replace(setting, seed=seed))
             for part in parts for name, setting in PARTS[part]
             for seed in range(first, last + 1) for rule in RULES
             if (name, rule, seed) not in done]
    items.sort(key=lambda item: item[0] == "fig9 6/h")  # the least telling setting last
    print(f"{len(items)} runs to do ({len(done)} recorded in {RUNS_CSV.name})", flush=True)
    run_in_order(run_rule, items, workers=args.workers, progress=_append, preload=["synergy_opt.sim.sweep"])
    rows = table(_done())
    write_rows(TABLE_CSV, rows)
    for row in rows:
        print(f"{row['setting']:<22} {row['rule']:<7} mean {row['mean_avg_jct_h']:7.2f} h "
              f"[{row['min_avg_jct_h']:.2f}, {row['max_avg_jct_h']:.2f}]  ratio to paper "
              f"{row['mean_ratio_to_paper']:.3f}  better on {row['seeds_better_than_paper']}/{row['seeds']}")
    print(f"wrote {TABLE_CSV}")


if __name__ == "__main__":
    main()
