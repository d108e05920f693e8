"""Scheduling mechanisms: where each runnable job of a round runs and with how much CPU and memory.

``run_mechanism(instance, name, order=None, **options) -> Allocation`` for the names in ``MECHANISMS``:

- ``proportional``: GPU-proportional shares, GPUs best-fit on one server when possible.
- ``greedy``: Synergy-GREEDY, first fit of best-case demands; may skip jobs.
- ``tune``: Synergy-TUNE, best-fit with fallbacks to proportional and demotion; never below a floor.
- ``drf``, ``tetris``: the big-data baselines with best-case demands as static demands.
- ``opt``: Synergy-OPT, ``synergy_opt.opt.solve_opt(instance).allocation`` (imported when first used).

``order`` is the policy's priority order of job ids (default: as listed). Every mechanism packs into one
shared :class:`~synergy_opt.mechanisms.state.ServerState`; every allocation is scored by
:func:`synergy_opt.evaluate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from synergy_opt.instance import Allocation, RoundInstance
from synergy_opt.mechanisms.drf import pack_drf
from synergy_opt.mechanisms.greedy import pack_greedy
from synergy_opt.mechanisms.order import policy_order
from synergy_opt.mechanisms.proportional import pack_proportional
from synergy_opt.mechanisms.state import ServerState
from synergy_opt.mechanisms.tetris import pack_tetris
from synergy_opt.mechanisms.tune import pack_tune
from synergy_opt.validation import OneOf, Optional, check_keyword_options, checked, ids, round_instance


@dataclass(frozen=True)
class Mechanism:
    """A registered mechanism: ``run(instance, order, **options)`` with ``order`` as job indices."""

    name: str
    run: Callable[..., Allocation]
    places_every_job: bool
    description: str


def _packed(pack: Callable[..., ServerState]) -> Callable[..., Allocation]:
    def run(instance: RoundInstance, order: np.ndarray, **options: Any) -> Allocation:
        checked_options = check_keyword_options(pack, options, skip=("instance", "order"))
        return pack(instance, order, **checked_options).to_allocation()

    run.__doc__ = pack.__doc__
    return run


def _opt(instance: RoundInstance, order: np.ndarray, **options: Any) -> Allocation:
    # Imported here: Synergy-OPT pulls in the model builders and solvers, which the heuristics do not need.
    from synergy_opt.opt import solve_opt

    return solve_opt(instance, **check_keyword_options(solve_opt, options, skip=("instance",))).allocation


MECHANISMS: dict[str, Mechanism] = {
    m.name: m
    for m in (
        Mechanism("proportional", _packed(pack_proportional), True, "GPU-proportional shares, GPUs best-fit"),
        Mechanism("greedy", _packed(pack_greedy), False, "Synergy-GREEDY: first fit of best-case demands"),
        Mechanism("tune", _packed(pack_tune), True, "Synergy-TUNE: best fit, proportional fallback, demotion"),
        Mechanism("drf", _packed(pack_drf), True, "DRF: dominant-share order, static best-case demands"),
        Mechanism("tetris", _packed(pack_tetris), True, "Tetris: alignment-score packing of static demands"),
        Mechanism("opt", _opt, True, "Synergy-OPT: ideal ILP, placement LP, rounding"),
    )
}


@checked(instance=round_instance, name=OneOf(tuple(MECHANISMS)), order=Optional(ids))
def run_mechanism(
    instance: RoundInstance, name: str, order: Iterable[str] | None = None, **options: Any
) -> Allocation:
    """Allocate one round with the mechanism ``name``.

    Parameters
    ----------
    instance
        The round: a cluster and its runnable jobs.
    name
        One of ``MECHANISMS``: proportional, greedy, tune, drf, tetris, opt.
    order
        The policy's priority order: every job id once, highest priority first (default: as listed).
    **options
        Passed to the mechanism, e.g. ``threshold=0.1`` (diminishing returns in the best-case demand) for
        greedy, tune, drf and tetris, or ``skip=True`` for drf and tetris (jobs that do not fit wait).

    Returns
    -------
    Allocation
        Score it with :func:`synergy_opt.evaluate`.

    Raises
    ------
    UnknownNameError
        For an unknown mechanism name.
    InvalidInputError
        For an ``order`` with unknown, repeated or missing job ids.
    """
    mechanism = MECHANISMS[name]
    ranked = policy_order(instance, order)
    if not instance.jobs:
        return Allocation({})  # nothing to place; every mechanism agrees
    return mechanism.run(instance, ranked, **options)


__all__ = ["MECHANISMS", "Mechanism", "ServerState", "run_mechanism"]
