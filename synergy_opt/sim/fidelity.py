"""The Figure 9 fidelity experiment (issue 19): where the paper's 3.7x comes from, one factor at a time.

``python -m synergy_opt.sim --experiment fig9-fidelity [--workers N] [--seeds ...] [--out DIR]``

Figure 9's setting throughout: FIFO, 16 servers x (8 GPUs, 24 CPUs, 500 GB), single-GPU jobs, split
(20, 70, 10), 9 jobs/h, 300 s rounds, jobs 4000-4999 monitored, the run ending when the last of them finishes.
It starts from the artifact's own run (its recorded trace, its accounting, its TUNE: 81.09 h -> 21.88 h) and
switches one factor at a time:

- the trace: the artifact's recorded one, or generated (:func:`~synergy_opt.sim.trace.generate_trace`, 9
  jobs/h, seeds 0-9, their spread shown);
- the accounting: the artifact's (whole iterations, finishes at the round's end) or exact
  (:mod:`synergy_opt.sim.progress`);
- the mechanism: proportional, the artifact's TUNE, TUNE in each packing rule (the paper's order, policy
  order, spread), near-opt and the ideal bound; and, on a shorter window (jobs 1000-1099 of the artifact's
  trace, exact accounting) where the joint optimum's per-round MILP is affordable, joint against the others.

Columns (trace / accounting), every mechanism in each: the artifact's run (artifact / artifact), the
accounting switched (artifact / exact), the trace switched (generated / artifact), and this toolkit's own
setting (generated / exact). Each cell: the average JCT (over seeds: mean, min-max) and
proportional's average JCT over it.

Each run is one file in ``DIR/runs/`` (JSON), written when it finishes; a run whose file exists is not run
again, so an interrupted experiment resumes where it stopped (the default folder, ``results/fig9-fidelity``,
is fixed for that reason; :func:`restore_runs` rebuilds those files from a recorded ``runs.csv``). Then
``table.csv`` (one row per block, mechanism, trace and accounting), ``runs.csv`` (one per run) and
``fidelity.png`` are written and the table printed.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from synergy_opt.cli.journal import out_folder_problem, write_command
from synergy_opt.cli.parallel import run_in_order
from synergy_opt.cli.table import print_table, read_csv, write_csv
from synergy_opt.files import atomic_open
from synergy_opt.instance import Cluster
from synergy_opt.sim.artifact_trace import FIG9_MONITOR, fig9_jcts, fig9_trace
from synergy_opt.sim.engine import simulate
from synergy_opt.sim.trace import generate_trace

NAME = "fig9-fidelity"
DESCRIPTION = ("Figure 9 fidelity: the artifact's run (81.09 h -> 21.88 h), switching trace, accounting and "
               "mechanism one at a time")
DEFAULT_OUT = Path("results") / NAME
CLUSTER = Cluster(16, 8, 24, 500)
LOAD = 9.0
TRACE_JOBS = 5000
SHORT_WINDOW = (1000, 1100)
FIGURE_9 = "figure 9"
SHORT = f"jobs {SHORT_WINDOW[0]}-{SHORT_WINDOW[1] - 1}"
REFERENCE = "proportional"


@dataclass(frozen=True)
class Variant:
    """A row of the table: a mechanism with its options."""

    label: str
    mechanism: str
    options: tuple[tuple[str, str], ...] = ()


VARIANTS = (
    Variant("proportional", "proportional"),
    Variant("tune-artifact", "tune-artifact"),
    Variant("tune, paper's order", "tune", (("sort", "demand"), ("fit", "best"))),
    Variant("tune, policy order", "tune", (("sort", "policy"), ("fit", "best"))),
    Variant("tune, spread", "tune", (("sort", "demand"), ("fit", "spread"))),
    Variant("near-opt", "near-opt"),
    Variant("ideal", "ideal"),
)
SHORT_VARIANTS = (VARIANTS[0], VARIANTS[1], VARIANTS[2], VARIANTS[4], VARIANTS[6], Variant("joint", "joint"))
# (trace, accounting) columns, in the table's order; every mechanism runs in each.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("artifact", "artifact"),
    ("artifact", "exact"),
    ("generated", "artifact"),
    ("generated", "exact"),
)


@dataclass(frozen=True)
class FidelityRun:
    """One simulation of the experiment."""

    block: str
    variant: Variant
    trace: str  # "artifact" or "generated"
    progress: str
    seed: int = 42  # the artifact's run is seed 42; a generated trace's seed
    monitor: tuple[int, int] = FIG9_MONITOR

    @property
    def key(self) -> str:
        """The run's file name (without suffix): every field that tells it apart."""
        options = "-".join(value for _, value in self.variant.options)
        parts = [self.block, self.variant.mechanism, options, self.trace, str(self.seed), self.progress]
        return "_".join(part.replace(" ", "") for part in parts if part)


@dataclass(frozen=True)
class Plan:
    """The experiment's runs, where their files go, and how many run at once."""

    runs: list[FidelityRun]
    out: Path
    workers: int = 1


def fidelity_runs(seeds: Sequence[int] = tuple(range(10)), joint: bool = True) -> list[FidelityRun]:
    """Every run of the experiment, the quick ones (proportional, the artifact's run) first."""
    runs = []
    for trace, progress in COLUMNS:
        for variant in VARIANTS:
            for seed in ((42,) if trace == "artifact" else tuple(seeds)):
                runs.append(FidelityRun(FIGURE_9, variant, trace, progress, seed))
    for variant in SHORT_VARIANTS:
        if variant.mechanism == "joint" and not joint:
            continue
        runs.append(FidelityRun(SHORT, variant, "artifact", "exact", 42, SHORT_WINDOW))
    cost = {"proportional": 0, "tune-artifact": 1, "tune": 1, "ideal": 2, "near-opt": 3, "joint": 4}
    return sorted(runs, key=lambda run: (run.block != FIGURE_9, cost[run.variant.mechanism]))


def run_fidelity(run: FidelityRun) -> dict[str, Any]:
    """Simulate ``run``; its summary row (picklable: a worker process runs it)."""
    generated = run.trace == "generated"
    trace = generate_trace(jobs=TRACE_JOBS, load=LOAD, seed=run.seed) if generated else fig9_trace()
    result = simulate(trace, CLUSTER, policy="fifo", mechanism=run.variant.mechanism, round_s=300.0, seed=run.seed,
                      monitor=run.monitor, accounting=run.progress, **dict[str, Any](run.variant.options))
    s = result.summary
    return {"key": run.key, "block": run.block, "variant": run.variant.label, "mechanism": run.variant.mechanism,
            "options": ",".join(f"{k}={v}" for k, v in run.variant.options), "trace": run.trace,
            "progress": run.progress, "seed": run.seed, "monitor_first": run.monitor[0],
            "monitor_last": run.monitor[1], **{k: s[k] for k in ("avg_jct_h", "p95_jct_h", "makespan_h", "unfinished",
                                                               "rounds", "rounds_solved", "wall_s")},
            "loadavg_1m": round(os.getloadavg()[0], 2)}


def run_plan(plan: Plan, progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run what ``plan.out/runs`` does not hold yet; every run's row (recorded ones read back)."""
    folder = plan.out / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    recorded = {run.key: _read(folder / f"{run.key}.json") for run in plan.runs}
    todo = [run for run in plan.runs if recorded[run.key] is None]

    def done(row: dict[str, Any]) -> None:
        with atomic_open(folder / f"{row['key']}.json") as handle:
            json.dump(row, handle, indent=1, allow_nan=True)
        recorded[row["key"]] = row
        if progress is not None:
            progress(row)

    run_in_order(run_fidelity, todo, workers=plan.workers, progress=done, preload=["synergy_opt.sim.fidelity"])
    return [row for row in (recorded[run.key] for run in plan.runs) if row is not None]


def restore_runs(recorded: Path, out: Path) -> int:
    """Write each row of a recorded ``runs.csv`` (e.g. ``benchmarks/results/fig9_fidelity_runs.csv``) as its
    run's file in ``out/runs`` unless one is there, so that ``--out out`` resumes from it; how many written."""
    folder = out / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for row in read_csv(recorded):
        path = folder / f"{row['key']}.json"
        if path.is_file():
            continue
        with atomic_open(path) as handle:
            json.dump({**row, "options": row["options"] or ""}, handle, indent=1, allow_nan=True)
        written += 1
    return written


def _read(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, OSError):
        return None  # a torn or foreign file: run again


TABLE_COLUMNS = ("block", "variant", "trace", "progress", "runs", "mean_avg_jct_h", "min_avg_jct_h",
                 "max_avg_jct_h", "proportional_ratio", "min_ratio", "max_ratio", "artifact_avg_jct_h")


def fidelity_table(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per block, variant, trace and accounting: the average JCT over its runs (mean, min, max), proportional's
    mean over it (``proportional_ratio``) and the per-seed ratios' range; the artifact's recorded average
    where it exists (its own run)."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["block"], row["variant"], row["trace"], row["progress"]), []).append(row)
    recorded = {"proportional": fig9_jcts("proportional"), "tune-artifact": fig9_jcts("tune-artifact")}
    table = []
    for (block, variant, trace, progress), group in groups.items():
        reference = {r["seed"]: r["avg_jct_h"] for r in groups.get((block, REFERENCE, trace, progress), [])}
        values = [float(r["avg_jct_h"]) for r in group]
        ratios = [reference[r["seed"]] / r["avg_jct_h"] for r in group if r["seed"] in reference]
        mean = statistics.fmean(values)
        artifact = None
        if block == FIGURE_9 and trace == "artifact" and progress == "artifact" and variant in recorded:
            artifact = statistics.fmean(recorded[variant].values()) / 3600
        table.append({
            "block": block, "variant": variant, "trace": trace, "progress": progress, "runs": len(group),
            "mean_avg_jct_h": mean, "min_avg_jct_h": min(values), "max_avg_jct_h": max(values),
            "proportional_ratio": statistics.fmean(reference.values()) / mean if reference else None,
            "min_ratio": min(ratios) if ratios else None, "max_ratio": max(ratios) if ratios else None,
            "artifact_avg_jct_h": artifact,
        })
    order = {variant.label: k for k, variant in enumerate(VARIANTS)}
    order.update((variant.label, len(order)) for variant in SHORT_VARIANTS if variant.label not in order)
    columns = {column: k for k, column in enumerate(COLUMNS)}
    return sorted(table, key=lambda r: (r["block"] != FIGURE_9, order[r["variant"]],
                                        columns.get((r["trace"], r["progress"]), 9)))


def printed_rows(table: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The table as printed: a row per block and mechanism, a cell per (trace, accounting) column."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    headers = [("block", "block"), ("variant", "mechanism")]
    for trace, progress in COLUMNS:
        headers.append((f"{trace}/{progress}", f"{trace} trace, {progress} acct: avg JCT h (x prop)"))
    for row in table:
        out = rows.setdefault((row["block"], row["variant"]), {"block": row["block"], "variant": row["variant"]})
        out[f"{row['trace']}/{row['progress']}"] = _cell(row)
    return list(rows.values()), headers


def _cell(row: dict[str, Any]) -> str:
    text = f"{row['mean_avg_jct_h']:.2f}"
    if row["runs"] > 1:
        text += f" [{row['min_avg_jct_h']:.1f}-{row['max_avg_jct_h']:.1f}]"
    if row["proportional_ratio"] is not None:
        text += f" ({row['proportional_ratio']:.2f}x"
        if row["runs"] > 1 and row["min_ratio"] is not None:
            text += f", {row['min_ratio']:.2f}-{row['max_ratio']:.2f}"
        text += ")"
    return text


def figure(table: Sequence[dict[str, Any]]) -> Any:
    """Average JCT per mechanism (a panel per block), a marker per (trace, accounting), seeds' range as bars."""
    from synergy_opt.cli.plots import new_figure, shared_legend  # matplotlib only when drawing

    blocks = list(dict.fromkeys(row["block"] for row in table))
    fig = new_figure(11, 1.0 + 0.45 * len(VARIANTS) * len(blocks))
    axes = fig.subplots(len(blocks), 1, squeeze=False)[:, 0]
    markers = "osD^"
    for axis, block in zip(axes, blocks, strict=True):
        rows = [row for row in table if row["block"] == block]
        labels = list(dict.fromkeys(row["variant"] for row in rows))
        for k, (trace, progress) in enumerate(COLUMNS):
            mine = [row for row in rows if (row["trace"], row["progress"]) == (trace, progress)]
            y = [labels.index(row["variant"]) + 0.15 * (k - 1.5) for row in mine]
            x = [row["mean_avg_jct_h"] for row in mine]
            spread = [[row["mean_avg_jct_h"] - row["min_avg_jct_h"] for row in mine],
                      [row["max_avg_jct_h"] - row["mean_avg_jct_h"] for row in mine]]
            axis.errorbar(x, y, xerr=spread, fmt=markers[k], capsize=2, label=f"{trace} trace, {progress} accounting")
        axis.set_yticks(range(len(labels)), labels)
        axis.invert_yaxis()
        axis.set_xlabel("average JCT of the monitored jobs (hours)")
        axis.set_title(f"Figure 9's setting at 9 jobs/h, {block}", fontsize=9)
        axis.grid(True, axis="x", alpha=0.3)
    shared_legend(fig, list(axes))
    fig.tight_layout()
    return fig


def main(out: Path | None, workers: int, seeds: Sequence[int] | None, show_progress: bool) -> int:
    """Run (or resume) the experiment, write its files, print its table; the exit code."""
    from synergy_opt.cli.plots import save_figure

    plan = Plan(fidelity_runs(seeds if seeds is not None else tuple(range(10))), out or DEFAULT_OUT, workers)
    plan.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(f"{NAME}: {len(plan.runs)} simulations, results in {plan.out} (resumes from {plan.out / 'runs'})",
          flush=True)
    with tqdm(total=len(plan.runs), desc=NAME, unit="run", disable=not show_progress, file=sys.stderr) as bar:
        bar.update(sum((plan.out / "runs" / f"{run.key}.json").is_file() for run in plan.runs))

        def step(row: dict[str, Any]) -> None:
            bar.set_postfix_str(f"{row['variant']} {row['trace']} {row['progress']}", refresh=False)
            bar.update()

        rows = run_plan(plan, step)
    table = fidelity_table(rows)
    printed, headers = printed_rows(table)
    # wide: its row labels and four columns do not fit the default width, and a fitted table cuts columns
    print_table(printed, headers, title=f"{NAME}: {DESCRIPTION}", block=("block",), wide=True)
    paths = [write_csv(rows, plan.out / "runs.csv", list(rows[0])),
             write_csv(table, plan.out / "table.csv", TABLE_COLUMNS),
             save_figure(figure(table), plan.out / "fidelity.png")]
    for path in paths:
        print(f"wrote {path}")
    print(f"wall time {time.perf_counter() - started:.1f} s")
    return 0


#: The flags ``--experiment fig9-fidelity`` takes; its setting is fixed, so any other is an error.
CLI_FLAGS = ("experiment", "out", "workers", "seeds", "no_progress")
# What the command line's parser sets itself (the argv it records), not a flag.
_PARSED = ("recorded",)


def cli_main(args: Any, error: Callable[[str], Any]) -> int:
    """``python -m synergy_opt.sim --experiment fig9-fidelity``: ``args`` the parsed flags, ``error`` the
    parser's one-line error (exit 2)."""
    given = [name for name, value in vars(args).items() if value is not None and name not in (*CLI_FLAGS, *_PARSED)]
    if given:
        error(f"--experiment {NAME} has a fixed setting; it takes only --out, --workers, --seeds and "
              f"--no-progress, not --{given[0].replace('_', '-')}")
    out = args.out or DEFAULT_OUT
    # Its own folder resumes (runs/); a sweep's folder of either command line is refused, as they refuse its.
    problem = out_folder_problem(out, NAME)
    if problem:
        error(problem)
    write_command(out, NAME, getattr(args, "recorded", []))
    return main(out, args.workers or 1, args.seeds, not args.no_progress)


__all__ = ["NAME", "VARIANTS", "FidelityRun", "Plan", "fidelity_runs", "fidelity_table", "restore_runs", "run_fidelity"]
