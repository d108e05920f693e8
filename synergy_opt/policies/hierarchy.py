"""Gavel's hierarchical policies: entities (users, teams) over jobs, for water filling (formulations/policies.md, W4).

Gavel (OSDI '20, section 4.3; ``max_min_fairness_water_filling`` with ``entity_weights``,
``entity_to_job_mapping`` and ``priority_reweighting_policies``) shares the cluster between entities in
proportion to their weights, and each entity's share among its jobs by the entity's reweighting policy:

- ``"fairness"``: each job not yet frozen gets the entity's weight times its own priority weight over the sum of
  the own weights of the entity's jobs not yet frozen (a frozen job hands its part to the rest);
- ``"fifo"``: the first job not yet frozen (job order, Gavel's sorted job ids: arrival order) gets the entity's
  weight, the others 0 until it is frozen.

The weights are recomputed before every level of water filling, and a level raises each job at its weight's
rate from where it stands (:func:`~synergy_opt.policies.water_filling.solve_water_filling`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from synergy_opt.errors import InvalidInputError, UnknownNameError

REWEIGHTING = ("fairness", "fifo")


@dataclass(frozen=True)
class Entities:
    """Each job's entity (``job_entity``, in job order), each entity's weight, and each entity's reweighting
    policy (``"fairness"`` when not named)."""

    job_entity: Sequence[str]
    weights: Mapping[str, float]
    reweighting: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.job_entity, np.ndarray):
            object.__setattr__(self, "job_entity", self.job_entity.tolist())
        if isinstance(self.job_entity, str) or not isinstance(self.job_entity, Sequence):
            raise InvalidInputError("job_entity", self.job_entity, "must be a list naming each job's entity")
        for j, name in enumerate(self.job_entity):
            if not isinstance(name, str) or not name:
                raise InvalidInputError(f"job_entity[{j}]", name, "must be an entity's name (a non-empty string)")
        if not isinstance(self.weights, Mapping):
            raise InvalidInputError("weights", self.weights, "must map each entity to its weight")
        for name in dict.fromkeys(self.job_entity):
            if name not in self.weights:
                raise InvalidInputError(f"weights[{name!r}]", None, "missing: every entity of a job needs a weight")
        for name, weight in self.weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)) \
                    or not np.isfinite(weight) or weight <= 0:
                raise InvalidInputError(f"weights[{name!r}]", weight, "must be a finite number > 0")
        if not isinstance(self.reweighting, Mapping):
            raise InvalidInputError("reweighting", self.reweighting, "must map entities to 'fairness' or 'fifo'")
        for name, policy in self.reweighting.items():
            if name not in self.weights:
                raise InvalidInputError(f"reweighting[{name!r}]", policy, "names no entity of weights")
            if policy not in REWEIGHTING:
                raise UnknownNameError(f"reweighting[{name!r}]", policy, REWEIGHTING)
        object.__setattr__(self, "job_entity", tuple(self.job_entity))
        object.__setattr__(self, "weights", {name: float(w) for name, w in self.weights.items()})
        object.__setattr__(self, "reweighting", dict(self.reweighting))

    def arrays(self, jobs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per job its entity's position, and per entity (positions in ``weights``' order) its weight and
        whether it is FIFO; ``jobs`` is the problem's job count, which ``job_entity`` must match."""
        if len(self.job_entity) != jobs:
            raise InvalidInputError("job_entity", self.job_entity, f"must name an entity for each of the {jobs} jobs")
        names = list(self.weights)
        index = {name: e for e, name in enumerate(names)}
        entity = np.array([index[name] for name in self.job_entity], dtype=np.int64)
        weight = np.array([self.weights[name] for name in names])
        fifo = np.array([self.reweighting.get(name, "fairness") == "fifo" for name in names])
        return entity, weight, fifo


@dataclass(frozen=True, eq=False)
class Rates:
    """The reweighting of counted classes: each class's entity, its jobs' own priority weight, its size and its
    first job (FIFO order); per entity its weight and whether it is FIFO."""

    entity: np.ndarray
    own: np.ndarray
    counts: np.ndarray
    first: np.ndarray
    entity_weight: np.ndarray
    fifo: np.ndarray

    def of(self, frozen: np.ndarray) -> np.ndarray:
        """Each class's weight (per job of it) while the classes ``frozen`` are frozen (0 for those)."""
        rates = np.zeros(self.entity.size)
        active = ~frozen
        entities = self.entity_weight.size
        fair = active & ~self.fifo[self.entity]
        share = np.bincount(self.entity[fair], weights=(self.counts * self.own)[fair], minlength=entities)
        rates[fair] = self.entity_weight[self.entity[fair]] * self.own[fair] / share[self.entity[fair]]
        queued = active & self.fifo[self.entity]
        head = np.full(entities, np.iinfo(np.int64).max)
        np.minimum.at(head, self.entity[queued], self.first[queued])
        leading = queued & (self.first == head[self.entity])
        rates[leading] = self.entity_weight[self.entity[leading]]
        return rates
