"""The benchmark grid: round instances (size, seed, trace) crossed with mechanisms and solvers.

A :class:`Cell` is one unit of work: one instance, one mechanism, one solver (empty for the solver-free
mechanisms). Cells carry everything needed to rebuild their instance, so any process or Dask worker can run
them without a shared file system.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.generate import GENERATOR_ARGUMENTS, GPUS_PER_SERVER, MAX_GPUS, generate_round, type_counts
from synergy_opt.hetero import HeteroRound
from synergy_opt.instance import RoundInstance, prefixed
from synergy_opt.io import instance_to_dict, load_instance
from synergy_opt.placement.model import PLACEMENT_KINDS
from synergy_opt.profiles import gavel_gpu_types
from synergy_opt.solvers import backend
from synergy_opt.solvers.registry import SOLVER
from synergy_opt.validation import SEED, Integer, Items, OneOf, Optional, checked

HEURISTICS = ("proportional", "greedy", "tune", "drf", "tetris", "near-opt")
# Run once per solver: the optimisation-based mechanisms and the ideal ILP and its LP relaxation.
SOLVED = ("opt", "joint", "ideal", "ideal-lp")
ALL_MECHANISMS = (*HEURISTICS, *SOLVED)
TRACES = ("single", "multi")
DEFAULT_SPLIT = (20.0, 70.0, 10.0)


@dataclass(frozen=True)
class InstanceSpec:
    """How to (re)build one round instance: generator arguments, or a saved instance's JSON text."""

    name: str
    gpus: int
    trace: str  # "single", "multi", or "saved" when a saved file does not say
    seed: int | None
    split: tuple[float, float, float] | None
    profile_noise: float | None = 0.0  # None: a saved instance whose metadata does not say
    payload: str | None = None  # JSON of a saved instance
    types: tuple[tuple[str, int], ...] | None = None  # servers per GPU type: a heterogeneous round

    def make(self) -> RoundInstance | HeteroRound:
        if self.payload is not None:
            return load_instance(json.loads(self.payload))
        # Generated specs always have all three.
        assert self.seed is not None and self.split is not None and self.profile_noise is not None
        if self.types is not None:
            return generate_round(split=self.split, multi_gpu=self.trace == "multi", seed=self.seed,
                                  profile_noise=self.profile_noise, types=dict(self.types))
        return generate_round(
            self.gpus, self.split, multi_gpu=self.trace == "multi", seed=self.seed, profile_noise=self.profile_noise
        )

    @property
    def split_text(self) -> str:
        return "" if self.split is None else "/".join(f"{value:g}" for value in self.split)


@dataclass(frozen=True)
class Cell:
    """One mechanism (under one solver, or ``""`` when it needs none) on one instance."""

    spec: InstanceSpec
    mechanism: str
    solver: str = ""


def bench_types(name: str, value: Any) -> dict[str, int]:
    """Servers per GPU type of the bench's heterogeneous rounds: the generator has matrices on the types Gavel
    measured."""
    counts = type_counts(name, value)
    unknown = [kind for kind in counts if kind not in gavel_gpu_types()]
    if unknown:
        raise UnknownNameError(name, unknown[0], gavel_gpu_types())
    return counts


@checked(sizes=Items(Integer(GPUS_PER_SERVER, MAX_GPUS, step=GPUS_PER_SERVER), "cluster sizes in GPUs", True),
         seeds=Items(SEED, "seeds"), traces=Items(OneOf(TRACES), "traces"), split=GENERATOR_ARGUMENTS["split"],
         profile_noise=GENERATOR_ARGUMENTS["profile_noise"], types=Optional(bench_types))
def generated_specs(
    sizes: Iterable[int],
    seeds: Iterable[int],
    traces: Iterable[str] = TRACES,
    split: tuple[float, float, float] = DEFAULT_SPLIT,
    profile_noise: float = 0.0,
    types: dict[str, int] | None = None,
) -> list[InstanceSpec]:
    """Production-derived full-load rounds, size-major so that a sweep's progress follows cluster size. With
    ``types`` (servers per GPU type), heterogeneous type-free rounds of those servers instead (``sizes`` unused)."""
    seeds, traces = list(seeds), list(traces)
    if types is not None:
        gpus, name = 8 * sum(types.values()), ",".join(f"{kind}:{count}" for kind, count in types.items())
        return [InstanceSpec(f"gen-{name}-{trace}-s{seed}", gpus, trace, seed, split, profile_noise,
                             types=tuple(types.items()))
                for trace in traces for seed in seeds]
    return [
        InstanceSpec(f"gen-{gpus}-{trace}-s{seed}", gpus, trace, seed, split, profile_noise)
        for gpus in sizes
        for trace in traces
        for seed in seeds
    ]


def saved_specs(directory: str | Path) -> list[InstanceSpec]:
    """Every ``*.json`` round instance in ``directory`` (sorted by cluster size, then name)."""
    paths = sorted(Path(directory).glob("*.json"))
    if not paths:
        raise InvalidInputError("instances", str(directory), "holds no *.json round instances")
    specs = []
    for path in paths:
        try:
            instance = load_instance(path)
        except InvalidInputError as error:  # which of the folder's files (a malformed one names its path already)
            if str(path) in str(error):
                raise
            raise prefixed(error, path.name, ": ") from error
        meta = instance.metadata
        trace = ("multi" if meta["multi_gpu"] else "single") if "multi_gpu" in meta else "saved"
        split = meta.get("split")
        specs.append(
            InstanceSpec(
                name=path.stem,
                gpus=instance.cluster.total_gpus,
                trace=trace,
                seed=meta.get("seed"),
                split=None if split is None else tuple(float(v) for v in split),  # type: ignore[arg-type]
                profile_noise=float(meta["profile_noise"]) if "profile_noise" in meta else None,
                # Re-serialised so that every worker reads exactly what this process read.
                payload=json.dumps(instance_to_dict(instance)),
            )
        )
    return sorted(specs, key=lambda spec: (spec.gpus, spec.name))


def unsupported(mechanism: str, solver: str, opt_placement: str = "lp") -> str | None:
    """Why ``solver`` cannot run ``mechanism`` at all, from its declared capabilities (None if it can)."""
    caps = backend(solver).capabilities
    # The LP relaxation, OPT's placement LP and its min-split MILP have continuous variables.
    continuous = mechanism == "ideal-lp" or (mechanism == "opt" and opt_placement in ("lp", "milp"))
    if continuous and not caps.continuous:
        hint = "; --opt-placement milp-integral runs it" if mechanism == "opt" else ""
        return f"the solver takes integer variables only{hint}"
    if mechanism in ("ideal", "joint", "opt") and not caps.integer:
        return "the solver takes no integer variables"
    return None


@checked(mechanisms=Items(OneOf(ALL_MECHANISMS), "mechanism names"), solvers=Items(SOLVER, "solver names", True),
         opt_placement=OneOf(PLACEMENT_KINDS))
def build_grid(
    specs: Sequence[InstanceSpec], mechanisms: Sequence[str], solvers: Sequence[str], opt_placement: str = "lp"
) -> tuple[list[Cell], list[str]]:
    """The cells to run, in a fixed order, and a note for each (mechanism, solver) pair left out (a list of
    names is checked: one name, a string, once made a cell per letter)."""
    cells: list[Cell] = []
    skipped: dict[tuple[str, str], str] = {}
    for spec in specs:
        for mechanism in mechanisms:
            if mechanism not in SOLVED:
                cells.append(Cell(spec, mechanism))
                continue
            for solver in solvers:
                reason = unsupported(mechanism, solver, opt_placement)
                if reason is None:
                    cells.append(Cell(spec, mechanism, solver))
                else:
                    skipped[mechanism, solver] = reason
    notes = [f"{mechanism} under {solver}: not run ({reason})" for (mechanism, solver), reason in skipped.items()]
    return cells, notes
