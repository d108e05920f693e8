"""``python -m synergy_opt.sim``: sweeps of simulations (load, policy, split, CPU:GPU ratio, seeds, mechanisms),
one table of JCT figures, CSVs of every run and every job, and with ``--plot`` the paper's figures.

Examples::

    python -m synergy_opt.sim --gpus 128 --policy fifo --load 9 --mechanisms proportional,tune,ideal \\
        --jobs 3000 --seeds 0,1,2 --plot
    python -m synergy_opt.sim --load 2,4,6,8,9 --policy fifo,srtf,las,ftf --workers 2
    python -m synergy_opt.sim --experiment fig9 --load 9        # the paper's Figure 9 setting, at one load
    python -m synergy_opt.sim --experiment list

The options and CSV columns are documented in ``docs/sim.md`` (section "Command line").
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd

from synergy_opt.cli import args as cli_args
from synergy_opt.cli.errors import OneLineParser, run_cli
from synergy_opt.cli.table import print_table, write_csv
from synergy_opt.errors import SynergyError
from synergy_opt.files import atomic_open
from synergy_opt.generate import JOB_KIND
from synergy_opt.sim.allocators import mechanism_names
from synergy_opt.sim.experiments import experiment_names, flag_text, load_experiment
from synergy_opt.sim.gavel import GAVEL_TRACES, gavel_trace_file
from synergy_opt.sim.gavel import SOURCE as GAVEL_SOURCE
from synergy_opt.sim.philly import SOURCE as PHILLY_SOURCE
from synergy_opt.sim.policies import POLICIES
from synergy_opt.sim.sweep import (
    PER_JOB_COLUMNS,
    PER_ROUND_COLUMNS,
    SETTING_COLUMNS,
    SUMMARY_COLUMNS,
    TABLE_COLUMNS,
    RunOutcome,
    SimRun,
    SimSetting,
    run_sweep,
    seed_means,
    varying,
    with_ratios,
)
from synergy_opt.sim.trace import Trace
from synergy_opt.sim.trace_io import load_trace

PROG = "python -m synergy_opt.sim"
DEFAULTS: dict[str, Any] = {
    "gpus": [128], "cpu_per_gpu": [3], "policy": ["fifo"], "load": [9.0], "split": [(20.0, 70.0, 10.0)],
    "multi_gpu": "no", "profile_noise": 0.0, "job_kind": "builtin", "seeds": [0], "round_s": 300.0,
    "preemption_overhead": 0.0, "mechanisms": ["proportional", "tune"], "backfill": "yes",
}
# Flags that shape a generated trace, so that a trace file rules them out.
DEFAULT_JOBS = 1000
GENERATOR_FLAGS = ("load", "multi_gpu", "profile_noise", "job_kind", "jobs")
SIM_MECHANISMS_WITH_TIME_LIMIT = ("ideal", "joint")
GAVEL_PREFIX = "gavel:"


# --- argument types -------------------------------------------------------------------------------------------


def _loads(text: str) -> list[float | None]:
    """Jobs per hour, comma-separated; ``static`` for a static trace (every job at time 0)."""
    loads: list[float | None] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part == "static":
            loads.append(None)
            continue
        try:
            value = float(part)
        except ValueError:
            value = -1.0
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"{part!r} is not a load in jobs/hour > 0 (or 'static')")
        loads.append(value)
    if not loads:
        raise argparse.ArgumentTypeError(f"{text!r} names no load")
    return loads


def _splits(text: str) -> list[tuple[float, float, float]]:
    """One or more workload splits separated by ``/``: ``20,70,10/50,0,50``."""
    return list(dict.fromkeys(cli_args.split(part) for part in text.split("/")))


def _ratios(text: str) -> list[int]:
    values = cli_args.int_list(text)
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r} names no CPU:GPU ratio")
    return [cli_args.generator_value("cpu_per_gpu", value) for value in values]


def _seconds(text: str, allow_zero: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value >= 0 if allow_zero else value > 0) or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds {'>= 0' if allow_zero else '> 0'}")
    return value


def _monitor(text: str) -> tuple[int, int]:
    values = cli_args.int_list(text)
    if len(values) != 2 or not 0 <= values[0] < values[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: give FIRST,LAST trace positions with 0 <= FIRST < LAST")
    return values[0], values[1]


def _trace_file(text: str) -> Path:
    """A trace file's path, or ``gavel:NAME`` for a Gavel trace shipped with the package."""
    if text.startswith(GAVEL_PREFIX):
        try:
            return gavel_trace_file(text[len(GAVEL_PREFIX):])
        except SynergyError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return Path(text)


def _job_kind(text: str) -> str:
    try:
        kind: str = JOB_KIND("job_kind", text)
    except SynergyError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return kind


# --- the parser -----------------------------------------------------------------------------------------------


class _Parser(OneLineParser):
    """One-line errors, prefixed with the experiment file whose settings are being read, if any."""

    context = ""

    def error(self, message: str) -> NoReturn:
        super().error(f"{self.context}: {message}" if self.context else message)


def build_parser() -> _Parser:
    doc = (__doc__ or "").splitlines()
    parser = _Parser(prog=PROG, description=f"{doc[0]} {doc[1]}",
                     argument_default=None)
    sweep = parser.add_argument_group("the cluster and the trace (comma-separated lists sweep)")
    sweep.add_argument("--gpus", type=cli_args.gpu_sizes, help="cluster size(s) in GPUs, multiples of 8 (128)")
    sweep.add_argument("--cpu-per-gpu", type=_ratios, help="CPU:GPU ratio(s) of the servers and profiles: 3-6 (3)")
    sweep.add_argument("--policy", type=cli_args.names_of("policy", tuple(POLICIES)),
                       help=f"scheduling policy(ies): {', '.join(POLICIES)} (fifo)")
    sweep.add_argument("--load", type=_loads, help="arrivals in jobs/hour, or 'static' (9)")
    sweep.add_argument("--split", type=_splits,
                       help="workload split(s), percent image,language,speech; several joined by / (20,70,10)")
    sweep.add_argument("--multi-gpu", nargs="?", const="yes", choices=("no", "yes", "both"),
                       help="single-GPU jobs (no), the multi-GPU mix (yes; the flag alone), or both (no)")
    sweep.add_argument("--profile-noise", type=cli_args.profile_noise,
                       help="per-job log-normal noise on each throughput matrix (0)")
    sweep.add_argument("--job-kind", type=_job_kind, help="builtin: each model's matrix; modelled: a job "
                       "performance model drawn around its model's (builtin)")
    sweep.add_argument("--jobs", type=cli_args.positive_int,
                       help="generated trace length; more arrivals are drawn while monitored jobs run "
                            "(1000, or LAST of --monitor)")
    sweep.add_argument("--seeds", type=cli_args.seeds,
                       help="a seed count N (seeds 0..N-1) or a list of seeds, e.g. 0,1,2 or 42, (1)")
    sweep.add_argument("--trace", type=_trace_file, metavar="FILE",
                       help="replay a trace file (synergy-trace JSON or CSV, the Philly cluster_job_log, a Gavel "
                            f".trace, or {GAVEL_PREFIX}NAME for a shipped one: {', '.join(GAVEL_TRACES)}) "
                            "instead of generating")
    run = parser.add_argument_group("the simulation")
    run.add_argument("--mechanisms", type=cli_args.names_of("mechanism", mechanism_names()),
                     help=f"comma-separated, or 'all': {', '.join(mechanism_names())} (proportional,tune)")
    run.add_argument("--round-s", type=_seconds, help="round length in seconds (300)")
    run.add_argument("--monitor", type=_monitor, metavar="FIRST,LAST",
                     help="trace positions FIRST <= i < LAST the JCT figures are taken over; the run ends when "
                          "they finish (default: all but the first fifth of a dynamic trace, all of a static one)")
    run.add_argument("--backfill", choices=("yes", "no"),
                     help="no: a job that does not fit blocks the jobs behind it, as in Gavel's FIFO (yes)")
    run.add_argument("--preemption-overhead", type=lambda text: _seconds(text, allow_zero=True),
                     help="seconds of no progress when a preempted job resumes (0)")
    run.add_argument("--time-limit", type=cli_args.seconds_or_none,
                     help="seconds per round for ideal and joint ('none': no limit; joint's default 10)")
    run.add_argument("--experiment", metavar="NAME",
                     help="run a named experiment (a TOML config; flags override it), a .toml file, or 'list'")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--workers", type=cli_args.positive_int, help="local worker processes (1)")
    where.add_argument("--dask", metavar="ADDRESS",
                       help="address of a running Dask scheduler (e.g. tcp://host:8786) to run the sweep on")
    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, metavar="DIR",
                     help="folder for the CSVs and plots (default results/sim-<time>)")
    out.add_argument("--plot", action="store_true", default=None,
                     help="write PNGs: avg JCT vs load, JCT CDF, GPU/CPU/memory use over time")
    out.add_argument("--rounds-csv", action="store_true", default=None, help="also write every run's rounds")
    out.add_argument("--no-progress", action="store_true", default=None, help="no progress bar")
    return parser


def parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, _Parser]:
    """Flags over the experiment's settings over :data:`DEFAULTS`."""
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    if args.experiment is not None and args.experiment != "list":
        experiment = load_experiment(args.experiment)
        parser.context = f"experiment {experiment.path.name}"
        config = parser.parse_args(_experiment_argv(experiment.settings, parser))
        parser.context = ""
        for key, value in vars(config).items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    for key, value in DEFAULTS.items():
        if getattr(args, key) is None and not (key in GENERATOR_FLAGS and args.trace is not None):
            setattr(args, key, value)
    return args, parser


def _experiment_argv(settings: dict[str, Any], parser: _Parser) -> list[str]:
    flags = {action.dest: action for action in parser._actions if action.option_strings}
    argv = []
    for key, value in settings.items():
        action = flags.get(key)
        if action is None or key == "experiment":
            known = ", ".join(sorted(dest for dest in flags if dest not in ("help", "experiment")))
            parser.error(f"unknown setting {key!r}; settings are the flags' names with _ for -: {known}")
        option = action.option_strings[-1]
        if action.nargs == 0:  # a switch: on when true
            if value is not True and value is not False:
                parser.error(f"{key} = {value!r}: must be true or false")
            argv += [option] if value else []
        else:
            argv.append(f"{option}={flag_text(value)}")  # one token: a value may start with "-"
    return argv


# --- from flags to runs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    runs: list[SimRun]
    out: Path


def plan(args: argparse.Namespace, parser: _Parser) -> Plan:
    """The runs of the sweep; bad combinations are parser errors (one line, exit 2) before anything runs."""
    if args.dask is not None and importlib.util.find_spec("distributed") is None:
        parser.error("--dask needs dask.distributed, which is not installed: pip install 'synergy_opt[distributed]'")
    round_s = args.round_s
    if args.preemption_overhead >= round_s:
        parser.error(f"--preemption-overhead {args.preemption_overhead:g}: must be < --round-s ({round_s:g})")
    options: dict[str, Any] = {}
    if args.time_limit is not None:
        others = [m for m in args.mechanisms if m not in SIM_MECHANISMS_WITH_TIME_LIMIT]
        if others:
            parser.error(f"--time-limit applies to {' and '.join(SIM_MECHANISMS_WITH_TIME_LIMIT)} only, "
                         f"not {others[0]}")
        options["time_limit"] = args.time_limit
    multi = {"no": [False], "yes": [True], "both": [False, True]}
    runs: list[SimRun] = []
    settings: list[tuple[SimSetting, Trace | None]]
    if args.trace is not None:
        given = [f"--{flag.replace('_', '-')}" for flag in GENERATOR_FLAGS if getattr(args, flag) is not None]
        if given:
            parser.error(f"--trace replays a file; {given[0]} applies only to generated traces")
        settings = list(_trace_settings(args, parser))
    else:
        settings = [
            (SimSetting(gpus, ratio, policy, load, split, multi_gpu, args.profile_noise, args.job_kind,
                        args.jobs if args.jobs is not None else _default_jobs(args), seed, round_s, args.monitor,
                        args.preemption_overhead, backfill=args.backfill == "yes"), None)
            for gpus, ratio, split, multi_gpu, policy, load, seed in itertools.product(
                args.gpus, args.cpu_per_gpu, args.split, multi[args.multi_gpu], args.policy, args.load, args.seeds)
        ]
    for setting, trace in settings:
        for mechanism in args.mechanisms:
            run_options = options if mechanism in SIM_MECHANISMS_WITH_TIME_LIMIT else {}
            runs.append(SimRun(setting, mechanism, trace, run_options))
    out = args.out or Path("results") / f"sim-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    try:  # fail now, in one line, rather than after the whole sweep has run
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.touch()
        probe.unlink()
    except OSError as error:
        parser.error(f"--out {out}: cannot write there ({error.strerror})")
    return Plan(runs, out)


def _default_jobs(args: argparse.Namespace) -> int:
    return args.monitor[1] if args.monitor is not None else DEFAULT_JOBS


def _trace_settings(args: argparse.Namespace, parser: _Parser) -> list[tuple[SimSetting, Trace]]:
    """One setting per (size, ratio, split, policy, seed) with its loaded trace, checked against the cluster.

    The split, seed and ratio shape a Philly log's models, the ratio a Gavel trace's profiles; a trace file of
    this toolkit is read once.
    """
    path: Path = args.trace
    first = load_trace(path)  # a missing or non-regular file is an error naming it, with the reason
    philly = first.metadata.get("source") == PHILLY_SOURCE
    gavel = first.metadata.get("source") == GAVEL_SOURCE
    if not philly and args.split != DEFAULTS["split"]:
        parser.error(f"--trace {path.name} is not a Philly log: its models are given "
                     "(--split draws those of a generated trace or a Philly log)")
    settings = []
    for gpus, ratio, split, policy, seed in itertools.product(
            args.gpus, args.cpu_per_gpu, args.split, args.policy, args.seeds):
        if philly:
            trace = load_trace(path, split=split, seed=seed, cpu_per_gpu=ratio, max_gpus=gpus)
        elif gavel and ratio != first.metadata["cpu_per_gpu"]:  # the ratio's built-in profiles
            trace = load_trace(path, cpu_per_gpu=ratio)
        else:
            trace = first
        too_big = [job for job in trace.jobs if job.gpus > gpus]
        if too_big:
            parser.error(f"--trace {path.name}: job {too_big[0].id} asks for {too_big[0].gpus} GPUs, more than "
                         f"the cluster's {gpus}")
        if args.monitor is not None and args.monitor[1] > len(trace):
            parser.error(f"--monitor {args.monitor[0]},{args.monitor[1]}: the trace has {len(trace)} jobs")
        multi_gpu = any(job.gpus > 1 for job in trace.jobs)
        # A trace file has no load: its arrivals are its own (the load column stays empty).
        setting = SimSetting(gpus, ratio, policy, None, split, multi_gpu, 0.0,
                             "builtin", len(trace), seed, args.round_s, args.monitor, args.preemption_overhead,
                             path.name, backfill=args.backfill == "yes")
        settings.append((setting, trace))
    return settings


# --- running and reporting ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep; returns the exit code (2 for bad input, with a one-line message on stderr)."""
    return run_cli(PROG, _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args, parser = parse(argv)
    if args.experiment == "list":
        for name in experiment_names():
            print(f"{name:8} {load_experiment(name).description}")
        return 0
    the_plan = plan(args, parser)
    started = time.perf_counter()
    where = f"Dask at {args.dask}" if args.dask else f"{args.workers or 1} process(es)"
    print(f"{len(the_plan.runs)} simulations on {where}", flush=True)
    try:
        outcomes = _run(the_plan.runs, args)
    except OSError as error:  # raised by distributed (a TimeoutError among them) when no scheduler answers
        if not args.dask:
            raise
        print(f"{PROG}: error: --dask {args.dask}: cannot reach the scheduler ({error})", file=sys.stderr)
        return 2
    summaries = with_ratios([outcome.summary for outcome in outcomes])
    table = seed_means(summaries)
    print_summary(table)
    for path in write_outputs(the_plan.out, summaries, table, outcomes, args.rounds_csv or args.plot):
        print(f"wrote {path}")
    if args.plot:
        from synergy_opt.sim.plots import save_sweep_plots  # matplotlib only when asked for

        rounds = _stacked([outcome.rounds for outcome in outcomes], PER_ROUND_COLUMNS)
        jobs = _stacked([outcome.jobs for outcome in outcomes], PER_JOB_COLUMNS)
        for path in save_sweep_plots(table, jobs, rounds, the_plan.out):
            print(f"wrote {path}")
    print(f"wall time {time.perf_counter() - started:.1f} s")
    return 0


def _run(runs: list[SimRun], args: argparse.Namespace) -> list[RunOutcome]:
    from tqdm import tqdm

    with tqdm(total=len(runs), desc="sim", unit="run", disable=bool(args.no_progress), file=sys.stderr,
              dynamic_ncols=True, mininterval=0.5) as bar:
        def done(outcome: RunOutcome) -> None:
            s = outcome.summary
            bar.set_postfix_str(f"{s['policy']} load {s['load']} {s['mechanism']}", refresh=False)
            bar.update()

        return run_sweep(runs, workers=args.workers or 1, dask=args.dask, progress=done)


_TABLE_HEADERS = (
    ("mechanism", "mechanism"), ("runs", "runs"), ("avg_jct_h", "avg JCT h"), ("p95_jct_h", "p95 h"),
    ("p99_jct_h", "p99 h"), ("makespan_h", "makespan h"), ("unfinished", "unfinished"),
    ("proportional_ratio", "prop/this"), ("rounds", "rounds"), ("wall_s", "wall s"),
)


def print_summary(table: list[dict[str, Any]]) -> None:
    """One table: a row per (setting, mechanism), the settings that vary as columns, the rest in the title."""
    columns = [c for c in SETTING_COLUMNS if c not in ("seed", "mechanism")]
    swept = varying(table, columns)
    fixed = [c for c in columns if c not in swept]
    title = "seeds " + (table[0]["seeds"] if table else "") + " (means): " + ", ".join(
        f"{column} {_shown(table[0][column])}" for column in fixed if table)
    headers = [(column, column.replace("_", " ")) for column in swept] + list(_TABLE_HEADERS)
    print_table(table, title=title, headers=headers, block=swept)


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def write_outputs(folder: Path, summaries: list[dict[str, Any]], table: list[dict[str, Any]],
                  outcomes: list[RunOutcome], rounds: bool) -> list[Path]:
    """``summary.csv`` (a row per run), ``table.csv`` (the printed table), ``jobs.csv`` (every job of every run)
    and, when asked, ``rounds.csv``; returns their paths."""
    paths = [write_csv(summaries, folder / "summary.csv", SUMMARY_COLUMNS),
             write_csv(table, folder / "table.csv", TABLE_COLUMNS)]
    frames: dict[str, tuple[list[pd.DataFrame], Sequence[str]]] = {
        "jobs": ([o.jobs for o in outcomes], PER_JOB_COLUMNS)}
    if rounds:
        frames["rounds"] = ([o.rounds for o in outcomes], PER_ROUND_COLUMNS)
    for name, (parts, columns) in frames.items():
        path = folder / f"{name}.csv"
        with atomic_open(path, newline="") as handle:
            _stacked(parts, columns).to_csv(handle, index=False)
        paths.append(path)
    return paths


def _stacked(parts: list[pd.DataFrame], columns: Sequence[str]) -> pd.DataFrame:
    parts = [part for part in parts if len(part)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(columns))

