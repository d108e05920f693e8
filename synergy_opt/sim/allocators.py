"""The mechanism in the simulator's loop: every name of ``run_mechanism``, the two optima, or a user's callable.

Each round the engine hands an allocator the runnable jobs as a :class:`RoundInstance` (in policy order) and
gets back a :class:`RoundPlan`: an :class:`Allocation`, or, for the ``ideal`` bound, per-job configs with no
placement (the paper's OPT in simulation: the ideal ILP on the pooled cluster, an upper bound). On a
heterogeneous cluster ``ideal-type-free`` (:class:`TypeFreeIdeal`) takes the whole round at once, every job
free to take any type: the type-free ideal ILP of issue 20 on each type's pooled servers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.evaluation import InvalidAllocationError, evaluate
from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.hetero_solve import HeteroIdealResult
from synergy_opt.ideal.solve import solve_ideal
from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.joint.solve import solve_joint
from synergy_opt.mechanisms import MECHANISMS, run_mechanism
from synergy_opt.validation import Function, call_user, callable_name, check_keyword_options

# A round's joint MILP stops here (status FEASIBLE keeps its incumbent); a round it cannot place runs TUNE.
JOINT_TIME_LIMIT_S = 10.0
# Used when the exact optima end without a solution (a time limit before any incumbent).
FALLBACK_MECHANISM = "tune"


@dataclass(frozen=True, eq=False)
class RoundPlan:
    """What a mechanism decided for one round.

    Either ``allocation`` (placements on servers) or, for a bound without placement, the per-GPU CPUs and
    memory of every job in the instance's order. ``fallback`` says the mechanism had no solution and
    a fallback allocated the round instead: ``FALLBACK_MECHANISM`` for ``joint``, GPU-proportional configs for
    ``ideal``.
    """

    allocation: Allocation | None = None
    cpu_per_gpu: np.ndarray | None = None
    mem_gb_per_gpu: np.ndarray | None = None
    fallback: bool = False


Allocator = Callable[[RoundInstance], RoundPlan]
UserMechanism = Callable[[RoundInstance], Allocation]
_MECHANISM = Function(1, "mechanism(instance: RoundInstance) -> Allocation")
TYPE_FREE_IDEAL = "ideal-type-free"
SIM_MECHANISMS = ("ideal", "joint", TYPE_FREE_IDEAL)


@dataclass(frozen=True, eq=False)
class TypeFreeIdeal:
    """The type-free ideal bound's allocator: ``solve_ideal`` (issue 20's type-free ILP, ``options`` its keyword
    arguments) on a heterogeneous round whose jobs may take any type they can use, their baselines the types the
    policy chose (the round's floors). Only a heterogeneous run calls it (sim/hetero_run.py)."""

    options: Mapping[str, Any]

    def __call__(self, instance: HeteroRound) -> HeteroIdealResult:
        result = solve_ideal(instance, **self.options)
        assert isinstance(result, HeteroIdealResult)
        return result

    def on_one_type(self) -> Allocator:
        """On a one-type cluster there is no type to choose: the ``ideal`` allocator, same options."""
        return _ideal_plan(dict(self.options))


def mechanism_names() -> tuple[str, ...]:
    """Every mechanism the simulator runs by name."""
    return (*MECHANISMS, *SIM_MECHANISMS)


def make_allocator(mechanism: str | UserMechanism, options: Mapping[str, Any], seed: int
                   ) -> tuple[str, Allocator | TypeFreeIdeal]:
    """The mechanism's name and a function that allocates one round with it.

    ``options`` go to the mechanism (``run_mechanism``'s options, or ``solve_ideal``'s / ``solve_joint``'s
    keyword arguments for ``ideal``, ``ideal-type-free`` / ``joint``). A user's callable takes the round's
    instance (jobs in policy order) and returns an :class:`Allocation`.
    """
    options = dict(options)
    if isinstance(mechanism, str):
        if mechanism == "ideal":
            return mechanism, _ideal_allocator(options, seed)
        if mechanism == TYPE_FREE_IDEAL:
            return mechanism, TypeFreeIdeal(_ideal_options(options, seed))
        if mechanism == "joint":
            return mechanism, _joint_allocator(options, seed)
        if mechanism in MECHANISMS:
            return mechanism, lambda instance: RoundPlan(run_mechanism(instance, mechanism, **options))
    elif callable(mechanism):
        if options:
            raise InvalidInputError("options", options, "a callable mechanism takes no options")
        return getattr(mechanism, "__name__", "custom"), _user_allocator(_MECHANISM("mechanism", mechanism))
    raise UnknownNameError("mechanism", mechanism, mechanism_names())


def _ideal_options(options: dict[str, Any], seed: int) -> dict[str, Any]:
    options = check_keyword_options(solve_ideal, options, "options", skip=("instance", "relax"))
    options.setdefault("seed", seed)
    return options


def _ideal_allocator(options: dict[str, Any], seed: int) -> Allocator:
    return _ideal_plan(_ideal_options(options, seed))


def _ideal_plan(options: dict[str, Any]) -> Allocator:

    def allocate(instance: RoundInstance) -> RoundPlan:
        result = solve_ideal(instance, **options)
        if not result.has_solution:
            c_p, m_p = instance.cluster.cpu_per_gpu, instance.cluster.mem_gb_per_gpu
            n = len(instance.jobs)
            return RoundPlan(cpu_per_gpu=np.full(n, c_p), mem_gb_per_gpu=np.full(n, m_p), fallback=True)
        return RoundPlan(cpu_per_gpu=result.cpu_per_gpu, mem_gb_per_gpu=result.mem_gb_per_gpu)

    return allocate


def _joint_allocator(options: dict[str, Any], seed: int) -> Allocator:

    options = check_keyword_options(solve_joint, options, "options", skip=("instance",))
    options.setdefault("seed", seed)
    options.setdefault("time_limit", JOINT_TIME_LIMIT_S)

    def allocate(instance: RoundInstance) -> RoundPlan:
        allocation = solve_joint(instance, **options).allocation
        if allocation is None:
            return RoundPlan(run_mechanism(instance, FALLBACK_MECHANISM), fallback=True)
        return RoundPlan(allocation)

    return allocate


def _user_allocator(mechanism: UserMechanism) -> Allocator:
    def allocate(instance: RoundInstance) -> RoundPlan:
        allocation = call_user("mechanism", mechanism, instance)
        if not isinstance(allocation, Allocation):
            raise InvalidInputError("mechanism", callable_name(mechanism),
                                    f"a callable mechanism must return an Allocation, not {type(allocation).__name__}")
        # The toolkit's mechanisms are tested valid; a user's is checked every round it allocates.
        try:
            evaluate(instance, allocation, strict=True)
        except (InvalidAllocationError, InvalidInputError) as error:
            raise InvalidInputError("mechanism", callable_name(mechanism),
                                    f"returned an invalid allocation: {error}") from None
        return RoundPlan(allocation)

    return allocate
