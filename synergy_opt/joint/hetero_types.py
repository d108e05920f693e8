"""Type choices for the joint decomposition of a type-free round: which types to try, in which order.

The first is the type-free ideal ILP's (its optimum is the joint's whenever some placement holds it); then
the ideal ILP's with some CPU and memory of every type left free (:func:`slack_types`; only when the ideal ILP
found a solution); then the ideal LP's, rounded (:func:`~synergy_opt.ideal.hetero_types.lp_types`, near-opt's
choice); then, when none placed every job, the baseline types (a type choice that always places every job, as
today's mechanisms do). Each is computed only when the decomposition asks for the next.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.hetero_core import solve_core
from synergy_opt.ideal.hetero_model import HeteroIdealModel
from synergy_opt.ideal.hetero_solve import HeteroIdealResult
from synergy_opt.ideal.hetero_types import lp_types
from synergy_opt.solvers import SolverParams

# The shares of every type's CPUs and memory the slack choices may use, and the seconds each ideal solve may take.
# The ideal ILP's optimum fills each type's CPUs and memory to the last unit, which whole servers rarely hold;
# with a little left free its types place better. On the 3 x 128 single-GPU round of seed 8 the ideal ILP's and
# LP's types place 327.0278 (best-first proof from there: 30 s), the choice at 99.5% 327.0409 (proof: 167 nodes,
# 3 s; formulations/heterogeneous.md, section 7).
SLACK_SHARES = (0.995, 0.99)
SLACK_SECONDS = 0.5


class TypeSearch:
    """The type choices to try on ``instance``, given its type-free ideal ILP's result."""

    def __init__(self, instance: HeteroRound, ideal: HeteroIdealResult, deadline: float | None = None) -> None:
        self.instance = instance
        self.ideal = ideal
        self.deadline = deadline  # the slack choices' solves end by it
        self.seen: dict[tuple[str, ...], float | None] = {}

    def candidates(self) -> Iterator[list[str]]:
        """Type choices (one type per job, job order), each once; the baseline only when no choice before it
        placed every job (0.8-2.3% below the best on hard 3 x 128-GPU rounds, and as long to solve)."""
        model = self.ideal.model

        def choices() -> Iterator[list[str] | None]:  # each computed only when the one before did not settle
            if self.ideal.has_solution:
                yield list(self.ideal.gpu_types)
                # Not when the ideal ILP found no solution: with less room its searches rarely find one either.
                for share in SLACK_SHARES:
                    seconds = SLACK_SECONDS if self.deadline is None else min(SLACK_SECONDS,
                                                                              self.deadline - time.perf_counter())
                    yield None if model is None or seconds <= 0 else slack_types(model, share, seconds)
            yield lp_types(self.instance)
            yield list(self.instance.baselines)

        for types in choices():
            if types is None or tuple(types) in self.seen:
                continue
            if tuple(types) == tuple(self.instance.baselines) and \
                    any(value is not None for value in self.seen.values()):
                return
            self.seen[tuple(types)] = None
            yield types

    def tell(self, types: list[str], value: float | None) -> None:
        """The joint's value with ``types`` (None: no placement of every job)."""
        self.seen[tuple(types)] = value


def slack_types(ideal: HeteroIdealModel, share: float, time_limit: float | None) -> list[str] | None:
    """The types of the type-free ideal ILP with only ``share`` of every type's CPUs and memory (GPUs and floors
    unchanged), solved by the core search within ``time_limit``; None when it finds no solution."""
    upper = ideal.model.row_upper.copy()
    types = len(ideal.instance.cluster.types)
    upper[ideal.coupling_rows[types:]] *= share  # the GPU rows come first
    tight = replace(ideal, model=replace(ideal.model, row_upper=upper))
    result = solve_core(tight, SolverParams(time_limit=time_limit))
    if not result.has_solution:
        return None
    names = ideal.instance.cluster.names
    return [names[int(kind)] for kind in ideal.col_type[ideal.decode(np.rint(result.solution()))]]
