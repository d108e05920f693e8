"""``python -m synergy_opt.sim``: sweeps of simulations (load, policy, split, CPU:GPU ratio, seeds, mechanisms),
one table of JCT figures, CSVs of every run and every job, and with ``--plot`` the paper's figures.

Examples::

    python -m synergy_opt.sim --gpus 128 --policy fifo --load 9 --mechanisms proportional,tune,ideal \\
        --jobs 3000 --seeds 0,1,2 --plot
    python -m synergy_opt.sim --load 2,4,6,8,9 --policy fifo,srtf,las,ftf --workers 2
    python -m synergy_opt.sim --experiment fig9 --load 9        # the paper's Figure 9 setting, at one load
    python -m synergy_opt.sim --experiment fig9-fidelity --workers 2   # the artifact's Figure 9, factor by factor
    python -m synergy_opt.sim --experiment list
    python -m synergy_opt.sim --resume results/sim-20260101-120000   # continue an interrupted sweep
    python -m synergy_opt.sim plot results/sim-20260101-120000       # redraw a result folder's figures
    python -m synergy_opt.sim compare results/a results/b            # two result folders side by side

The options and CSV columns are documented in ``docs/sim.md`` (section "Command line").
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import itertools
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

from tqdm import tqdm

from synergy_opt.cli import args as cli_args
from synergy_opt.cli.errors import OneLineParser, run_cli
from synergy_opt.cli.journal import (
    Journal,
    out_folder_problem,
    read_command,
    recorded_argv,
    run_journaled,
    run_key,
    write_command,
)
from synergy_opt.cli.parallel import MAX_WORKERS
from synergy_opt.errors import InvalidInputError, SynergyError
from synergy_opt.hetero import HeteroCluster, parse_type_counts
from synergy_opt.sim import compare as sim_compare
from synergy_opt.sim.allocators import mechanism_names
from synergy_opt.sim.artifact_trace import SOURCE as ARTIFACT_SOURCE
from synergy_opt.sim.bounds import MAX_ROUND_S
from synergy_opt.sim.engine import cpu_ratio
from synergy_opt.sim.experiments import check_setting, experiment_names, flag_text, load_experiment
from synergy_opt.sim.fidelity import DESCRIPTION as FIDELITY_DESCRIPTION
from synergy_opt.sim.fidelity import NAME as FIDELITY
from synergy_opt.sim.fidelity import cli_main as fidelity_main
from synergy_opt.sim.gavel import GAVEL_TRACES, gavel_trace_file
from synergy_opt.sim.gavel import SOURCE as GAVEL_SOURCE
from synergy_opt.sim.gavel_policies import GAVEL_POLICIES
from synergy_opt.sim.outputs import JOURNAL, file_digest, print_summary, run_fields, to_record, write_folder
from synergy_opt.sim.philly import SOURCE as PHILLY_SOURCE
from synergy_opt.sim.policies import ARTIFACT_POLICIES, POLICIES, REFILL_POLICIES
from synergy_opt.sim.sweep import PRELOAD, SimRun, SimSetting, check_run, run_one
from synergy_opt.sim.timing import DEFAULT_ROUND_TIMING, RoundTiming
from synergy_opt.sim.trace import MAX_TRACE_JOBS, Trace
from synergy_opt.sim.trace_io import load_trace
from synergy_opt.sim.trace_metadata import TRACE_JOB_KIND

PROG = "python -m synergy_opt.sim"
TOOL = "sim"
DEFAULTS: dict[str, Any] = {
    "gpus": [128], "cpu_per_gpu": [3], "policy": ["fifo"], "load": [9.0], "split": [(20.0, 70.0, 10.0)],
    "multi_gpu": "no", "profile_noise": 0.0, "job_kind": "builtin", "seeds": [0], "round_s": 300.0,
    "preemption_overhead": 0.0, "mechanisms": ["proportional", "tune"], "backfill": "yes",
    "round_timing": DEFAULT_ROUND_TIMING,
}
# Flags that shape a generated trace, so that a trace file rules them out.
DEFAULT_JOBS = 1000
GENERATOR_FLAGS = ("load", "multi_gpu", "profile_noise", "job_kind", "jobs")
SIM_MECHANISMS_WITH_TIME_LIMIT = ("ideal", "ideal-type-free", "joint")
GAVEL_PREFIX = "gavel:"
# How and where a sweep runs, not what it computes: the only flags --resume takes beside the recorded ones.
RUN_ONLY_FLAGS = ("--workers", "--dask", "--no-progress", "--wide")
MAX_RUNS = 100_000  # simulations in one sweep (the product of every list flag, times the mechanisms)
SUBCOMMANDS = ("plot", "compare")


# --- argument types -------------------------------------------------------------------------------------------


def _loads(text: str) -> list[float | None]:
    """Jobs per hour, comma-separated; ``static`` for a static trace (every job at time 0)."""
    loads: list[float | None] = []
    for part in cli_args.items(text):
        if part == "static":
            loads.append(None)
            continue
        try:
            value = cli_args.number(part)
        except argparse.ArgumentTypeError:
            value = -1.0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{part[:60]!r} is not a load in jobs/hour > 0 (or 'static')")
        loads.append(value)
    if not loads:
        raise argparse.ArgumentTypeError(f"{text[:60]!r} names no load")
    return list(dict.fromkeys(loads))


def _splits(text: str) -> list[tuple[float, float, float]]:
    """One or more workload splits separated by ``/``: ``20,70,10/50,0,50``."""
    return list(dict.fromkeys(cli_args.split(part) for part in cli_args.items(text, "/")))


def _ratios(text: str) -> list[int]:
    values = cli_args.int_list(text)
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r} names no CPU:GPU ratio")
    return list(dict.fromkeys(cli_args.generator_value("cpu_per_gpu", value) for value in values))


def _seconds(text: str, allow_zero: bool = False, most: float = math.inf) -> float:
    try:
        value = cli_args.number(text)
    except argparse.ArgumentTypeError:
        value = -1.0
    if not (value >= 0 if allow_zero else value > 0) or value > most:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds {'>= 0' if allow_zero else '> 0'}"
                                         + (f" and <= {most:g}" if most < math.inf else ""))
    return value


def _monitor(text: str) -> tuple[int, int]:
    values = cli_args.int_list(text)
    if len(values) != 2 or not 0 <= values[0] < values[1] <= MAX_TRACE_JOBS:
        raise argparse.ArgumentTypeError(f"{text[:60]!r}: give FIRST,LAST trace positions with 0 <= FIRST < LAST "
                                         f"<= {MAX_TRACE_JOBS}")
    return values[0], values[1]


def _trace_file(text: str) -> Path:
    """A trace file's path, or ``gavel:NAME`` for a Gavel trace shipped with the package."""
    if text.startswith(GAVEL_PREFIX):
        try:
            return gavel_trace_file(text[len(GAVEL_PREFIX):])
        except SynergyError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return Path(text)
def _trace_jobs(text: str) -> int:
    return cli_args.bounded_int(1, MAX_TRACE_JOBS)(text)


def _type_text(text: str) -> str:
    """``--types`` as given once its form is checked (an empty value would silently mean no types)."""
    try:
        parse_type_counts("--types", text)
    except SynergyError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _job_kind(text: str) -> str:
    try:
        kind: str = TRACE_JOB_KIND("job_kind", text)
    except SynergyError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return kind


# --- the parser -----------------------------------------------------------------------------------------------


def build_parser() -> OneLineParser:
    doc = (__doc__ or "").splitlines()
    parser = OneLineParser(prog=PROG, description=f"{doc[0]} {doc[1]} Subcommands: plot DIR, compare DIR_A DIR_B.",
                     argument_default=None, allow_abbrev=False)
    sweep = parser.add_argument_group("the cluster and the trace (comma-separated lists sweep)")
    sweep.add_argument("--gpus", type=cli_args.gpu_sizes, help="cluster size(s) in GPUs, multiples of 8 (128)")
    sweep.add_argument("--cpu-per-gpu", type=_ratios, help="CPU:GPU ratio(s) of the servers and profiles: 3-6 (3)")
    # 'all' leaves out the artifact's variants (replaying its runs, one GPU type only: docs/fidelity.md).
    researchers = [name for name in POLICIES if name not in (*ARTIFACT_POLICIES, *REFILL_POLICIES)]
    sweep.add_argument("--policy", type=cli_args.names_of("policy", (*POLICIES, *GAVEL_POLICIES),
                                                          (*researchers, *GAVEL_POLICIES)),
                       help=f"scheduling policy(ies): {', '.join(POLICIES)}, or Gavel's {', '.join(GAVEL_POLICIES)}; "
                            "'all': all but the artifact's (fifo)")
    sweep.add_argument("--types", type=_type_text, metavar="TYPE:SERVERS,...",
                       help="a heterogeneous cluster, servers of 8 GPUs per GPU type, e.g. k80:2,p100:2,v100:2 "
                            "(--gpus is their total); the policy picks each job's type")
    sweep.add_argument("--load", type=_loads, help="arrivals in jobs/hour, or 'static' (9)")
    sweep.add_argument("--split", type=_splits,
                       help="workload split(s), percent image,language,speech; several joined by / (20,70,10)")
    sweep.add_argument("--multi-gpu", nargs="?", const="yes", choices=("no", "yes", "both"),
                       help="single-GPU jobs (no), the multi-GPU mix (yes; the flag alone), or both (no)")
    sweep.add_argument("--profile-noise", type=cli_args.profile_noise,
                       help="per-job log-normal noise on each throughput matrix (0)")
    sweep.add_argument("--job-kind", type=_job_kind, help="builtin: each model's matrix; modelled: a job "
                       "performance model drawn around its model's; artifact: the matrix the paper's artifact runs "
                       "the job by, its model file's demand and speed-up (builtin)")
    sweep.add_argument("--jobs", type=_trace_jobs,
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
    run.add_argument("--round-s", type=lambda text: _seconds(text, most=MAX_ROUND_S),
                     help="round length in seconds (300)")
    run.add_argument("--monitor", type=_monitor, metavar="FIRST,LAST",
                     help="trace positions FIRST <= i < LAST the JCT figures are taken over; the run ends when "
                          "they finish (default: all but the first fifth of a dynamic trace, all of a static one)")
    run.add_argument("--backfill", choices=("yes", "no"),
                     help="no: a job that does not fit blocks the jobs behind it, as in Gavel's FIFO; the queue "
                          "policies only (yes)")
    run.add_argument("--round-timing", choices=get_args(RoundTiming),
                     help="grid: rounds on the --round-s grid, an idle stretch skipped to the next boundary; gavel: "
                          "as Gavel's simulator, a round after an idle stretch starts at the arrival, one whose jobs "
                          "all finish early ends then (grid)")
    run.add_argument("--preemption-overhead", type=lambda text: _seconds(text, allow_zero=True),
                     help="seconds of no progress when a preempted job resumes (0)")
    run.add_argument("--time-limit", type=cli_args.seconds_or_none,
                     help="seconds per round for ideal, ideal-type-free, joint ('none': no limit; joint's default 10)")
    run.add_argument("--experiment", metavar="NAME",
                     help="run a named experiment (a TOML config; flags override it), a .toml file, or 'list'")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--workers", type=cli_args.bounded_int(1, MAX_WORKERS),
                       help=f"local worker processes, 1-{MAX_WORKERS} (1)")
    where.add_argument("--dask", metavar="ADDRESS",
                       help="address of a running Dask scheduler (e.g. tcp://host:8786) to run the sweep on")
    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, metavar="DIR",
                     help="folder for the CSVs and plots (default results/sim-<time>); each run's results are "
                          "kept there as it finishes")
    out.add_argument("--resume", type=Path, metavar="DIR",
                     help="continue the sweep recorded in DIR (interrupted, or a worker lost): runs already "
                          "there are skipped; only " + ", ".join(RUN_ONLY_FLAGS) + " may be given with it")
    out.add_argument("--plot", action=argparse.BooleanOptionalAction, default=None,
                     help="write PNGs: avg JCT vs load, JCT CDF, GPU/CPU/memory use over time (on for --experiment)")
    out.add_argument("--rounds-csv", action="store_true", default=None, help="also write every run's rounds")
    out.add_argument("--wide", action="store_true", default=None,
                     help="print every column of the table (by default it fits 100 columns)")
    out.add_argument("--no-progress", action="store_true", default=None, help="no progress bar")
    return parser


def parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, OneLineParser]:
    """Flags over the experiment's settings over :data:`DEFAULTS`; ``--resume DIR`` reads the flags back from
    DIR (``args.recorded`` holds the flags that define the sweep, for ``command.json``)."""
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    if args.resume is not None:
        extra = [flag for flag in _flags(given) if flag not in (*RUN_ONLY_FLAGS, "--resume")]
        if extra:
            parser.error(f"--resume {args.resume} continues the sweep recorded there; {extra[0]} cannot change it "
                         f"(only {', '.join(RUN_ONLY_FLAGS)} may be given with --resume)")
        folder = args.resume
        recorded = read_command(folder, TOOL)
        run_only = {key: getattr(args, key) for key in ("workers", "dask", "no_progress", "wide")}
        # Kept for the plan's checks too: every flag they read came from the file.
        parser.context = f"--resume {folder} (its command.json)"
        args = parser.parse_args(recorded)
        for key, value in run_only.items():
            if value is not None:
                setattr(args, key, value)
        args.resume = args.out = folder
    else:
        recorded = recorded_argv(given, ("--workers", "--dask", "--out"), ("--no-progress", "--wide"))
    args.recorded = recorded
    if args.experiment == FIDELITY:
        return args, parser  # a fixed setting of its own (synergy_opt.sim.fidelity)
    if args.experiment is not None and args.experiment != "list":
        experiment = load_experiment(args.experiment)
        outer = parser.context  # a resumed folder's, if any
        parser.context = ", ".join(filter(None, (outer, f"experiment {experiment.path.name}")))
        config = parser.parse_args(_experiment_argv(experiment.settings, parser))
        parser.context = outer
        for key, value in vars(config).items():
            if getattr(args, key, None) is None:
                setattr(args, key, value)
        if args.plot is None:
            args.plot = True  # an experiment draws its figure unless told not to
    if args.types is not None:  # the types' servers are the cluster: --gpus is their total, or left out
        total = _type_cluster(args.types, args.cpu_per_gpu or DEFAULTS["cpu_per_gpu"], parser).total_gpus
        if args.gpus is not None and list(args.gpus) != [total]:
            parser.error(f"--gpus {','.join(map(str, args.gpus))}: --types {args.types} has {total} GPUs "
                         "(leave --gpus out)")
        args.gpus = [total]
    args.cpu_per_gpu_given = args.cpu_per_gpu is not None  # else a trace file's own ratio (_trace_settings)
    for key, value in DEFAULTS.items():
        if getattr(args, key) is None and not (key in GENERATOR_FLAGS and args.trace is not None):
            setattr(args, key, value)
    return args, parser


def _type_cluster(types: str, ratios: Sequence[int], parser: OneLineParser) -> HeteroCluster:
    """``--types``' cluster at each CPU:GPU ratio (checked here, so that a bad count is one line)."""
    try:
        clusters = [SimSetting(cpu_per_gpu=ratio, types=types).cluster for ratio in ratios]
    except SynergyError as error:
        parser.error(f"--types {types}: {error}")
    return clusters[0]  # type: ignore[return-value]


def _flags(argv: Sequence[str]) -> list[str]:
    return [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")]


def _experiment_argv(settings: dict[str, Any], parser: OneLineParser) -> list[str]:
    """The settings as flags, each value checked by its TOML type first (so ``gpus = "16"`` is refused)."""
    flags = {action.dest: action for action in parser._actions if action.option_strings}
    argv = []
    for key, value in settings.items():
        try:
            check_setting(key, key, value)
        except SynergyError as error:
            parser.error(str(error))
        action = flags[key]
        if action.nargs == 0:  # a switch (--plot/--no-plot, --rounds-csv): a boolean, checked above
            if value:
                argv.append(action.option_strings[0])
            elif len(action.option_strings) > 1:
                argv.append(action.option_strings[-1])
        else:
            argv.append(f"{action.option_strings[-1]}={flag_text(value)}")  # one token: a value may start with "-"
    return argv


# --- from flags to runs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    runs: list[SimRun]
    keys: list[str]
    out: Path
    notes: tuple[str, ...] = ()  # said on stderr when the sweep starts (a rejected plan prints only its error)


def plan(args: argparse.Namespace, parser: OneLineParser) -> Plan:
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
    gavel = [policy for policy in args.policy if policy in GAVEL_POLICIES]
    if args.backfill == "no" and gavel:
        parser.error(f"--backfill no applies to the queue policies only, not {gavel[0]} (Gavel's policies pick "
                     "each round's jobs by their own round mechanism)")
    multi = {"no": [False], "yes": [True], "both": [False, True]}
    settings: list[tuple[SimSetting, Trace | None]]
    digest: str | None = None
    notes: list[str] = []
    if args.trace is not None:
        given = [f"--{flag.replace('_', '-')}" for flag in GENERATOR_FLAGS if getattr(args, flag) is not None]
        if given:
            parser.error(f"--trace replays a file; {given[0]} applies only to generated traces")
        _check_size(parser, args.gpus, args.cpu_per_gpu, args.split, args.policy, args.seeds, args.mechanisms)
        settings, notes = _trace_settings(args, parser)
        digest = file_digest(args.trace)
    else:
        lists = (args.gpus, args.cpu_per_gpu, args.split, multi[args.multi_gpu], args.policy, args.load, args.seeds)
        _check_size(parser, *lists, args.mechanisms)
        settings = [
            (SimSetting(gpus, ratio, policy, load, split, multi_gpu, args.profile_noise, args.job_kind,
                        args.jobs if args.jobs is not None else _default_jobs(args), seed, round_s, args.monitor,
                        args.preemption_overhead, backfill=args.backfill == "yes", types=args.types or "",
                        round_timing=args.round_timing), None)
            for gpus, ratio, split, multi_gpu, policy, load, seed in itertools.product(*lists)
        ]
        try:  # every generated trace's arguments, before the sweep writes its folder
            for setting, _ in settings:
                setting.check_generated()
        except InvalidInputError as error:
            experiment_name = f"experiment {args.experiment}" if args.experiment else ""
            parser.context = ", ".join(filter(None, (parser.context, experiment_name)))
            parser.error(str(error))
    runs: list[SimRun] = []
    for setting, trace in settings:
        for mechanism in args.mechanisms:
            run_options = options if mechanism in SIM_MECHANISMS_WITH_TIME_LIMIT else {}
            runs.append(SimRun(setting, mechanism, trace, run_options))
    # Each trace against its cluster and policy now, rather than after the sweep has printed its header and written
    # its folder: a file's (or a Philly log's draw) once per setting, a generated one per seed (its jobs differ).
    checked: set[tuple[int, SimSetting]] = set()
    try:
        for run in runs:
            key = (id(run.trace), run.setting if run.trace is None else replace(run.setting, seed=0))
            if key not in checked:
                checked.add(key)
                check_run(run)
    except InvalidInputError as error:
        where = f"--trace {args.trace.name}" if args.trace is not None else f"the trace of seed {run.setting.seed}"
        parser.error(f"{where}: {error}")
    keys = [run_key(run_fields(run, digest)) for run in runs]
    out = args.out or Path("results") / f"sim-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    # Fail now, in one line, rather than after the whole sweep has run.
    earlier = None if args.resume is not None else (JOURNAL, "the runs of an earlier sweep")
    problem = out_folder_problem(out, TOOL, earlier)
    if problem:
        parser.error(problem)
    return Plan(runs, keys, out, tuple(notes))


def _check_size(parser: OneLineParser, *lists: Sequence[Any]) -> None:
    count = math.prod(len(values) for values in lists)
    if count > MAX_RUNS:
        parser.error(f"the flags make {count} simulations; a sweep is at most {MAX_RUNS}")


def _default_jobs(args: argparse.Namespace) -> int:
    return args.monitor[1] if args.monitor is not None else DEFAULT_JOBS


def _trace_settings(args: argparse.Namespace, parser: OneLineParser
                    ) -> tuple[list[tuple[SimSetting, Trace | None]], list[str]]:
    """One setting per (size, ratio, split, policy, seed) with its loaded trace, checked against the cluster,
    and the notes to say when the sweep starts (the jobs the file skipped).

    The split, seed and ratio shape a Philly log's models, the ratio a Gavel trace's profiles; a trace file of
    this toolkit is read once.
    """
    path: Path = args.trace
    first = _read_trace(parser, path)
    philly = first.metadata.get("source") == PHILLY_SOURCE
    gavel = first.metadata.get("source") == GAVEL_SOURCE
    # Gavel traces and artifact records name built-in models: each ratio reads that ratio's profiles.
    by_model = gavel or first.metadata.get("source") == ARTIFACT_SOURCE
    skipped = first.metadata.get("skipped")
    notes: list[str] = []
    if not first.jobs:
        parser.error(f"--trace {path.name}: no jobs to simulate" + (f" (skipped: {skipped})" if skipped else ""))
    if skipped and isinstance(skipped, dict):  # a Gavel trace's or Philly log's jobs it cannot run: said once the
        reasons = "; ".join(f"{reason}: {count}" for reason, count in skipped.items())  # plan is checked
        counts = [count for count in skipped.values() if isinstance(count, int) and not isinstance(count, bool)]
        total = f"{sum(counts)} " if len(counts) == len(skipped) else ""  # a saved trace's metadata may hold text
        notes.append(f"--trace {path.name}: {total}jobs skipped ({reasons})")
    gavel_options: dict[str, Any] = {}
    if gavel and args.types is not None:  # run times on the cluster's reference type, the simulator's unit
        gavel_options["gpu_type"] = SimSetting(types=args.types).cluster.reference  # type: ignore[union-attr]
        if gavel_options["gpu_type"] not in first.metadata["types"]:
            parser.error(f"--types {args.types}: the reference type {gavel_options['gpu_type']} (where a Gavel "
                         f"trace's run times are read) has no Gavel throughputs ({', '.join(first.metadata['types'])})")
        if gavel_options["gpu_type"] != first.metadata["gpu_type"]:
            first = _read_trace(parser, path, **gavel_options)
    if not philly and args.split != DEFAULTS["split"]:
        parser.error(f"--trace {path.name} is not a Philly log: its models are given "
                     "(--split draws those of a generated trace or a Philly log)")
    # A trace of this toolkit carries its models' profiles at its own CPU:GPU ratio: its servers have that ratio
    # unless --cpu-per-gpu says otherwise (they had the default 3 whatever the trace's).
    ratios = args.cpu_per_gpu if args.cpu_per_gpu_given or philly or gavel else [cpu_ratio(first)]
    settings: list[tuple[SimSetting, Trace | None]] = []
    for gpus, ratio, split, policy, seed in itertools.product(args.gpus, ratios, args.split, args.policy, args.seeds):
        if philly:
            trace = _read_trace(parser, path, split=split, seed=seed, cpu_per_gpu=ratio, max_gpus=gpus)
            skips = trace.metadata.get("skipped")  # a saved trace keeps its own counts (and may hold text)
            # Read from the log at this size (a saved trace's max_gpus is its own, and its note said its drops).
            applied = first.metadata.get("max_gpus") is None and trace.metadata.get("max_gpus") == gpus
            dropped = skips.get(f"more than {gpus} GPUs") if applied and isinstance(skips, dict) else None
            note = f"--trace {path.name}: on {gpus} GPUs, {dropped} more skipped (more than {gpus} GPUs)"
            if dropped and note not in notes:  # the log's other skips are said once, above
                notes.append(note)
        elif by_model and ratio != first.metadata["cpu_per_gpu"]:  # the ratio's built-in profiles
            trace = _read_trace(parser, path, cpu_per_gpu=ratio, **gavel_options)
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
                             path.name, backfill=args.backfill == "yes", types=args.types or "",
                             round_timing=args.round_timing)
        settings.append((setting, trace))
    return settings, notes


def _read_trace(parser: OneLineParser, path: Path, **options: Any) -> Trace:
    """``load_trace(path, **options)``; a fault in the file is one line naming ``--trace`` and the file."""
    try:
        return load_trace(path, **options)
    except InvalidInputError as error:  # a missing or unreadable file names its path already
        parser.error(str(error) if str(path) in str(error) else f"--trace {path}: {error}")


# --- running and reporting ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep (or ``plot DIR``, ``compare DIR_A DIR_B``); returns the exit code (2 for bad input, 1 for a
    failed run, 130 when interrupted, each with a one-line message on stderr)."""
    return run_cli(PROG, _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0] in SUBCOMMANDS:
        return sim_compare.subcommand(PROG, given)
    args, parser = parse(given)
    if args.experiment == "list":
        for name in experiment_names():
            print(f"{name:8} {load_experiment(name).description}")
        print(f"{FIDELITY} {FIDELITY_DESCRIPTION}")
        return 0
    if args.experiment == FIDELITY:  # its own runs, table and figure
        return fidelity_main(args, parser.error)
    the_plan = plan(args, parser)
    started = time.perf_counter()
    rounds = bool(args.rounds_csv or args.plot)
    journal = Journal(the_plan.out, JOURNAL)
    journal.start(resume=args.resume is not None)
    write_command(the_plan.out, TOOL, args.recorded)
    where = f"Dask at {args.dask}" if args.dask else f"{args.workers or 1} process(es)"
    done = journal.count(the_plan.keys)
    print(f"{len(the_plan.runs)} simulations on {where}, results in {the_plan.out}"
          + (f" ({done} already there)" if done else ""), flush=True)
    for note in the_plan.notes:
        print(note, file=sys.stderr, flush=True)
    try:
        records = _run(the_plan, journal, args, rounds)
    except OSError as error:  # raised by distributed (a TimeoutError among them) when no scheduler answers
        if not args.dask:
            raise
        print(f"{PROG}: error: --dask {args.dask}: cannot reach the scheduler ({error})", file=sys.stderr)
        return 2
    paths, table = write_folder(the_plan.out, records, rounds)
    print_summary(table, wide=bool(args.wide))
    for path in paths:
        print(f"wrote {path}")
    if args.plot:
        for path in sim_compare.plot_folder(the_plan.out):
            print(f"wrote {path}")
    print(f"wall time {time.perf_counter() - started:.1f} s")
    return 0


def _run(the_plan: Plan, journal: Journal, args: argparse.Namespace, rounds: bool) -> list[Any]:
    quiet = bool(args.no_progress)
    with tqdm(total=len(the_plan.runs), desc="sim", unit="run", disable=quiet, file=sys.stderr,
              dynamic_ncols=True, mininterval=0.5) as bar:
        bar.update(journal.count(the_plan.keys))

        def finished(outcome: Any) -> None:
            s = outcome.summary
            bar.set_postfix_str(f"{s['policy']} load {s['load']} {s['mechanism']}", refresh=False)
            bar.update()

        return run_journaled(run_one, the_plan.runs, the_plan.keys, journal,
                             functools.partial(to_record, rounds=rounds), workers=args.workers or 1,
                             dask=args.dask, progress=finished, preload=PRELOAD,
                             local=None if quiet else functools.partial(_run_here, position=1))


def _run_here(run: SimRun, position: int) -> Any:
    """One run in this process, with a bar of its own: monitored jobs finished, and the simulated time."""
    with tqdm(desc=f"  {run.mechanism}", unit="job", file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
              position=position, leave=False) as bar:
        def advance(time_s: float, finished: int, monitored: int) -> None:
            if bar.total != monitored:
                bar.total = monitored
            bar.n = finished
            bar.set_postfix_str(f"t {time_s / 3600:.1f} h", refresh=False)
            bar.refresh() if finished == monitored else bar.update(0)

        return run_one(run, progress=advance)

