"""``python -m synergy_opt.bench``: every mechanism and the ideal ILP and LP bound, on full-load round instances,
under every installed solver; one table of medians over seeds, and the rows as CSV.

Examples::

    python -m synergy_opt.bench --gpus 128
    python -m synergy_opt.bench --gpus 16,32,64,128,256,512,1024 --plot --workers 2
    python -m synergy_opt.bench --instances instances --mechanisms tune,opt,ideal --solvers highs
    python -m synergy_opt.bench --resume results/bench-128-20260101-120000   # continue an interrupted run
    python -m synergy_opt.bench plot results/bench-128-20260101-120000       # redraw a result folder's plots
    python -m synergy_opt.bench compare results/a results/b                  # two result folders side by side
    python -m synergy_opt.bench --types k80:4,p100:4,v100:4 --profile-noise 0.05

The CSV columns are documented in ``docs/bench.md``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from synergy_opt.bench import compare as bench_compare
from synergy_opt.bench.cells import RunOptions, run_cell
from synergy_opt.bench.grid import (
    ALL_MECHANISMS,
    DEFAULT_SPLIT,
    InstanceSpec,
    bench_types,
    build_grid,
    generated_specs,
    saved_specs,
)
from synergy_opt.bench.runner import PRELOAD, cell_fields
from synergy_opt.bench.table import print_table, write_folder
from synergy_opt.bench.table import title as table_title
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
from synergy_opt.cli.table import TABLE_WIDTH
from synergy_opt.errors import SynergyError
from synergy_opt.placement.model import PLACEMENT_KINDS
from synergy_opt.solvers import available_solvers, solver_names

PROG = "python -m synergy_opt.bench"
TOOL = "bench"
DEFAULT_GPUS = (128,)
DEFAULT_SEEDS = 3
DEFAULT_TIME_LIMIT = 5.0  # keeps --gpus 128 (every solver) well inside a minute on 2 cores
JOURNAL = "cells"
RUN_ONLY_FLAGS = ("--workers", "--dask", "--no-progress", "--wide")
MAX_CELLS = 1_000_000  # cells in one bench run (instances x mechanisms x solvers)
SUBCOMMANDS = ("plot", "compare")


def _solvers(text: str) -> list[str]:
    if text == "all":
        return list(available_solvers())
    names = cli_args.names_of("solver", solver_names())(text)
    missing = [name for name in names if name not in available_solvers()]
    if missing:
        raise argparse.ArgumentTypeError(
            f"solver {missing[0]!r} is not installed here; installed: {', '.join(available_solvers())}"
        )
    return list(names)


def _tolerance(text: str) -> float:
    value = cli_args.number(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a number in [0, 1)")
    return value


def _type_counts(text: str) -> dict[str, int]:
    """Servers per GPU type; the generator has matrices on the types Gavel measured."""
    try:
        return bench_types("--types", text)
    except SynergyError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> OneLineParser:
    doc = (__doc__ or "").splitlines()
    parser = OneLineParser(prog=PROG, description=f"{doc[0]} {doc[1]} Subcommands: plot DIR, compare DIR_A DIR_B.",
                           allow_abbrev=False)
    grid = parser.add_argument_group("instances")
    grid.add_argument("--gpus", type=cli_args.gpu_sizes, default=None,
                      help=f"cluster size(s) in GPUs, comma-separated multiples of 8 (default {DEFAULT_GPUS[0]})")
    grid.add_argument("--seeds", type=cli_args.seeds, default=None,
                      help=f"a seed count N (seeds 0..N-1) or a list of seeds (default {DEFAULT_SEEDS})")
    grid.add_argument("--split", type=cli_args.split, default=None,
                      help="workload split, percent image,language,speech (default 20,70,10)")
    grid.add_argument("--multi-gpu", choices=("no", "yes", "both"), default=None,
                      help="single-GPU trace (no), multi-GPU trace (yes), or both (default both)")
    grid.add_argument("--profile-noise", type=cli_args.profile_noise, default=None,
                      help="per-job log-normal noise on each throughput matrix (default 0)")
    grid.add_argument("--types", type=_type_counts, default=None, metavar="TYPE:SERVERS,...",
                      help="heterogeneous type-free rounds of these servers per GPU type, e.g. k80:4,p100:4,v100:4 "
                           "(instead of --gpus)")
    grid.add_argument("--instances", type=Path, default=None, metavar="DIR",
                      help="run on the saved *.json round instances in DIR instead of generating")
    run = parser.add_argument_group("what to run")
    run.add_argument("--mechanisms", type=cli_args.names_of("mechanism", ALL_MECHANISMS), default=list(ALL_MECHANISMS),
                     help="comma-separated, or 'all' (default): " + ", ".join(ALL_MECHANISMS))
    run.add_argument("--solvers", type=_solvers, default=None,
                     help="comma-separated solver backends, or 'all' (default: every installed one)")
    run.add_argument("--time-limit", type=cli_args.seconds_or_none, default=DEFAULT_TIME_LIMIT,
                     help="seconds per solve for opt, joint and the ideal ILP, or 'none' "
                          f"(default {DEFAULT_TIME_LIMIT:g})")
    run.add_argument("--opt-placement", choices=PLACEMENT_KINDS, default="lp", help="OPT's placement step (default lp)")
    run.add_argument("--joint-consolidate", action="store_true",
                     help="joint MILP keeps every job that fits on one server on one server (the paper's rule); "
                          "by default it may split any job, so that it bounds every mechanism")
    run.add_argument("--spend-spare", choices=("on", "off"), default=None,
                     help="end every solver-free mechanism with the spare-capacity step, or none "
                          "(default: each mechanism's own, on for near-opt only)")
    run.add_argument("--best-case-tolerance", type=_tolerance, default=None,
                     help="best-case demands within this fraction of the maximum (greedy, tune, drf, tetris, "
                          "near-opt; default 0.035)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--workers", type=cli_args.bounded_int(1, MAX_WORKERS), default=1,
                       help=f"local worker processes, 1-{MAX_WORKERS} (default 1)")
    where.add_argument("--dask", metavar="ADDRESS", default=None,
                       help="address of a running Dask scheduler (e.g. tcp://host:8786) to run the grid on")
    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, default=None, metavar="DIR",
                     help="folder for rows.csv, medians.csv and the plots (default results/bench-<sizes>-<time>); "
                          "each cell's row is kept there as it finishes")
    out.add_argument("--resume", type=Path, default=None, metavar="DIR",
                     help="continue the run recorded in DIR: cells already there are skipped; only "
                          + ", ".join(RUN_ONLY_FLAGS) + " may be given with it")
    out.add_argument("--plot", action="store_true", help="write PNGs of gap and time against cluster size")
    out.add_argument("--wide", action="store_true", help="print every column (by default the table fits 100 columns)")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


@dataclass(frozen=True)
class Plan:
    specs: list[InstanceSpec]
    mechanisms: list[str]
    solvers: list[str]
    options: RunOptions
    out: Path


def plan(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Plan:
    """Turn parsed flags into what to run; conflicting flags are parser errors (exit 2)."""
    generator_flags = {"--gpus": args.gpus, "--seeds": args.seeds, "--split": args.split,
                       "--multi-gpu": args.multi_gpu, "--profile-noise": args.profile_noise, "--types": args.types}
    if args.types is not None and args.gpus is not None:
        parser.error("--types sets the cluster (servers per GPU type); --gpus applies to homogeneous rounds")
    if args.instances is not None:
        given = [flag for flag, value in generator_flags.items() if value is not None]
        if given:
            parser.error(f"--instances runs saved instances; {given[0]} applies only to generated ones")
        if not args.instances.is_dir():
            parser.error(f"--instances {args.instances}: not a directory")
        try:
            specs = saved_specs(args.instances)
        except SynergyError as error:
            parser.error(f"--instances {args.instances}: {error}")
    else:
        traces = {"no": ["single"], "yes": ["multi"], "both": ["single", "multi"]}[args.multi_gpu or "both"]
        sizes, seeds = args.gpus or DEFAULT_GPUS, args.seeds or range(DEFAULT_SEEDS)
        count = len(sizes) * len(seeds) * len(traces) * len(args.mechanisms) * max(len(args.solvers or ()), 6)
        if count > MAX_CELLS:
            parser.error(f"the flags make about {count} cells; a bench run is at most {MAX_CELLS}")
        specs = generated_specs(sizes, seeds, traces, args.split or DEFAULT_SPLIT, args.profile_noise or 0.0,
                                 args.types)
    solvers = args.solvers if args.solvers is not None else list(available_solvers())
    sizes = sorted({spec.gpus for spec in specs})
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    size_text = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    out = args.out or Path("results") / f"bench-{size_text}-{stamp}"
    if out.suffix == ".csv":
        parser.error(f"--out {out}: --out is a folder (as the simulator's), where rows.csv and medians.csv go; "
                     f"give e.g. --out {out.with_suffix('')}")
    # Fail now, in one line, rather than after the whole grid has run.
    earlier = None if args.resume is not None else (JOURNAL, "the cells of an earlier run")
    problem = out_folder_problem(out, TOOL, earlier)
    if problem:
        parser.error(problem)
    options = RunOptions(time_limit=args.time_limit, opt_placement=args.opt_placement,
                         joint_consolidate=args.joint_consolidate,
                         spend_spare=None if args.spend_spare is None else args.spend_spare == "on",
                         best_case_tolerance=args.best_case_tolerance)
    return Plan(specs, args.mechanisms, solvers, options, out)


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, OneLineParser]:
    """The flags; ``--resume DIR`` reads them back from DIR (``args.recorded``: what ``command.json`` keeps)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume is None:
        args.recorded = recorded_argv(argv, ("--workers", "--dask", "--out"), ("--no-progress", "--wide"))
        return args, parser
    extra = [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")
             and arg.split("=", 1)[0] not in (*RUN_ONLY_FLAGS, "--resume")]
    if extra:
        parser.error(f"--resume {args.resume} continues the run recorded there; {extra[0]} cannot change it "
                     f"(only {', '.join(RUN_ONLY_FLAGS)} may be given with --resume)")
    folder, given = args.resume, args
    recorded = read_command(folder, TOOL)
    # Kept for the plan's checks too: every flag they read came from the file.
    parser.context = f"--resume {folder} (its command.json)"
    args = parser.parse_args(recorded)
    for flag in RUN_ONLY_FLAGS:
        key = flag[2:].replace("-", "_")
        if any(arg.split("=", 1)[0] == flag for arg in argv):
            setattr(args, key, getattr(given, key))
    args.resume = args.out = folder
    args.recorded = recorded
    return args, parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench (or ``plot DIR``, ``compare DIR_A DIR_B``); returns the exit code (2 for bad input, 1 for a
    failed run, 130 when interrupted, each with a one-line message on stderr)."""
    return run_cli(PROG, _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0] in SUBCOMMANDS:
        return bench_compare.subcommand(PROG, given)
    args, parser = parse(given)
    the_plan = plan(args, parser)
    started = time.perf_counter()
    cells, notes = build_grid(the_plan.specs, the_plan.mechanisms, the_plan.solvers,
                              the_plan.options.opt_placement)
    journal = Journal(the_plan.out, JOURNAL)
    journal.start(resume=args.resume is not None)
    write_command(the_plan.out, TOOL, args.recorded)
    keys = [run_key(cell_fields(cell, the_plan.options)) for cell in cells]
    done = journal.count(keys)
    where = f"Dask at {args.dask}" if args.dask else f"{args.workers} process(es)"
    limit = the_plan.options.time_limit
    print(f"{len(the_plan.specs)} instances, {len(cells)} cells, on {where}; "
          f"{f'time limit {limit:g} s per solve' if limit else 'no time limit'}; results in {the_plan.out}"
          + (f" ({done} cells already there)" if done else ""), flush=True)
    try:
        rows = _run(cells, keys, journal, the_plan.options, args)
    except OSError as error:  # raised by distributed (a TimeoutError among them) when no scheduler answers
        if not args.dask:
            raise
        print(f"{PROG}: error: --dask {args.dask}: cannot reach the scheduler ({error})", file=sys.stderr)
        return 2
    paths, summary = write_folder(the_plan.out, rows)
    print_table(summary, title=table_title(summary, saved=args.instances is not None), wide=args.wide)
    for note in notes + _errors(rows):
        print(textwrap.fill(note, TABLE_WIDTH, subsequent_indent="  ", break_on_hyphens=False))
    print(f"wrote {paths[0]} ({len(rows)} rows) and {paths[1]}")
    if args.plot:
        for path in bench_compare.plot_folder(the_plan.out):
            print(f"wrote {path}")
    print(f"wall time {time.perf_counter() - started:.1f} s")
    return 0


def _run(cells: list[Any], keys: list[str], journal: Journal, options: RunOptions,
         args: argparse.Namespace) -> list[dict[str, Any]]:
    with tqdm(total=len(cells), desc="bench", unit="cell", disable=args.no_progress, file=sys.stderr,
              dynamic_ncols=True, mininterval=0.5) as bar:
        bar.update(journal.count(keys))

        def done(row: dict[str, Any]) -> None:
            bar.set_postfix_str(f"{row['gpus']} GPUs {row['mechanism']} {row['solver']}".rstrip(), refresh=False)
            bar.update()

        return run_journaled(functools.partial(run_cell, options=options), cells, keys, journal, dict,
                             unit="cells", workers=args.workers, dask=args.dask, progress=done, preload=PRELOAD)


def _errors(rows: list[dict[str, Any]]) -> list[str]:
    """One line per distinct failure, so a broken mechanism is visible under the table."""
    seen: dict[tuple[str, str, str, str], int] = {}
    for row in rows:
        if row["status"] == "error":
            key = (row["status"], row["mechanism"], row["solver"], row["message"])
            seen[key] = seen.get(key, 0) + 1
    return [f"{status}: {m}{' under ' + s if s else ''} ({n} cells): {msg}" for (status, m, s, msg), n in seen.items()]


if __name__ == "__main__":
    sys.exit(main())
