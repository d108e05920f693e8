"""What a heterogeneity-aware policy decides over: jobs' throughputs on each GPU type, and the cluster's GPUs.

The policies of Gavel (Narayanan et al., OSDI '20; github.com/stanford-futuredata/gavel, MIT License,
``scheduler/policies/``) give each job ``i`` a time fraction ``x[i, t]`` on each GPU type ``t``: the share of
rounds it should run on ``scale_factors[i]`` GPUs of that type. Every policy keeps Gavel's base constraints
(formulations/policies.md, rows B1-B3), built once here:

- ``x[i, t] >= 0``, and 0 where the job has no throughput on the type (B1);
- ``sum_i scale_factors[i] * x[i, t] <= gpus[t]`` for every type (B2);
- ``sum_t x[i, t] <= 1`` for every job (B3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from synergy_opt.errors import InvalidInputError, UnknownNameError
from synergy_opt.profile import THROUGHPUT_RANGE, throughputs_out_of_range
from synergy_opt.solvers.model import ModelBuilder
from synergy_opt.validation import Number, real_array

# A job's priority weight: the policy LPs divide by it, and one 1e12 times another is no priority a
# scheduler sets (a weight of 1e-200 made a coefficient inf, and the LP fail).
PRIORITY_WEIGHT = Number(1e-12, 1e12)


@dataclass(frozen=True, eq=False)
class PolicyProblem:
    """The input of every policy formulation.

    Attributes
    ----------
    throughputs
        ``(jobs, types)``: job ``i``'s throughput on ``scale_factors[i]`` GPUs of type ``t`` (Gavel: steps per
        second; any unit shared by a job's row). 0: the job cannot run on that type. As in Gavel's LPs, a type
        of fewer GPUs than a job's scale factor is not ruled out: the job may get time there that no round can
        use (give it 0 there to rule it out; the simulator refuses a job that no type it can use holds).
    scale_factors
        GPUs each job runs on.
    gpus
        GPUs of each type.
    priority_weights
        Gavel's priority weights (default 1): a job of weight ``w`` is owed ``w`` times the normalised share.
    types, job_ids
        Names, for reading results (default ``t0, t1, ...`` and ``0, 1, ...``).
    """

    throughputs: np.ndarray
    scale_factors: np.ndarray
    gpus: np.ndarray
    priority_weights: np.ndarray | None = None
    types: tuple[str, ...] = ()
    job_ids: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        throughputs = real_array("throughputs", self.throughputs, 2)
        if throughputs.shape[1] == 0:
            raise InvalidInputError("throughputs", self.throughputs, "needs one column per GPU type (at least one)")
        bad = throughputs_out_of_range(throughputs)
        if bad.any():
            i, t = np.argwhere(bad)[0]
            raise InvalidInputError(f"throughputs[{i}][{t}]", float(throughputs[i, t]),
                                    f"must be {THROUGHPUT_RANGE} (the LPs' scaling)")
        jobs, types = throughputs.shape
        scale = whole_counts("scale_factors", self.scale_factors, jobs, low=1)
        gpus = whole_counts("gpus", self.gpus, types, low=0)
        weights = np.ones(jobs) if self.priority_weights is None else real_array(
            "priority_weights", self.priority_weights, 1)
        if weights.shape != (jobs,):
            raise InvalidInputError("priority_weights", self.priority_weights, f"must hold one weight per job ({jobs})")
        for index, weight in enumerate(weights.tolist()):
            PRIORITY_WEIGHT(f"priority_weights[{index}]", weight)
        names = tuple(self.types) or tuple(f"t{t}" for t in range(types))
        ids = tuple(self.job_ids) or tuple(str(i) for i in range(jobs))
        if len(names) != types:
            raise InvalidInputError("types", self.types, f"must name the {types} GPU types")
        if len(ids) != jobs:
            raise InvalidInputError("job_ids", self.job_ids, f"must name the {jobs} jobs")
        for name, given in (("types", names), ("job_ids", ids)):
            if len(set(given)) != len(given):  # results are read by name (as_dict): a repeat would drop one
                raise InvalidInputError(name, given, "must be distinct")
        for name, value in (("throughputs", throughputs), ("scale_factors", scale), ("gpus", gpus),
                            ("priority_weights", weights), ("types", names), ("job_ids", ids)):
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def num_jobs(self) -> int:
        return int(self.throughputs.shape[0])

    @property
    def num_types(self) -> int:
        return int(self.throughputs.shape[1])

    def agnostic(self) -> PolicyProblem:
        """The same problem seen by a heterogeneity-agnostic policy: every throughput 1 (Gavel's
        ``MaxMinFairnessPolicy``: the job is assumed to run alike on every type)."""
        return PolicyProblem(np.ones_like(self.throughputs), self.scale_factors, self.gpus, self.priority_weights,
                             self.types, self.job_ids)

    def seen_on(self, gpu_type: str) -> PolicyProblem:
        """The problem with every type's throughput that of ``gpu_type`` (Gavel's agnostic finish-time fairness
        and makespan read each job's v100 throughput for every type)."""
        if gpu_type not in self.types:
            raise UnknownNameError("gpu_type", gpu_type, self.types)
        column = self.throughputs[:, [self.types.index(gpu_type)]]
        return PolicyProblem(np.repeat(column, self.num_types, axis=1), self.scale_factors, self.gpus,
                             self.priority_weights, self.types, self.job_ids)

    def proportional_throughputs(self) -> np.ndarray:
        """Each job's throughput at its proportional share (Gavel's ``ProportionalPolicy``): time on each type in
        proportion to the type's GPUs, ``x[i, t] = gpus[t] / sum(gpus)``, whatever the job's scale factor."""
        total = self.gpus.sum()
        if total == 0:
            return np.zeros(self.num_jobs)
        return np.asarray(self.throughputs @ (self.gpus / total))

    def isolated_throughputs(self) -> np.ndarray:
        """Each job's throughput alone on a ``1/n`` share of the cluster (Gavel's ``IsolatedPolicy``):
        ``x[i, t] = gpus[t] / (n * scale_factors[i])``, scaled down so that a job's fractions sum to at most 1."""
        share = self.gpus[None, :] / (self.num_jobs * self.scale_factors[:, None])
        share = share / np.maximum(share.sum(axis=1), 1.0)[:, None]
        return np.asarray((self.throughputs * share).sum(axis=1))


def whole_counts(name: str, value: object, size: int, low: int) -> np.ndarray:
    """``value`` as ``size`` whole numbers >= ``low`` (an error naming ``name`` and the first bad entry)."""
    array = real_array(name, value, 1)
    if array.shape != (size,):
        raise InvalidInputError(name, value, f"must hold {size} whole numbers")
    bad = ~np.isfinite(array) | (array < low) | (array != np.round(array))
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise InvalidInputError(f"{name}[{index}]", array[index], f"must be a whole number >= {low}")
    return array.astype(np.int64)


def add_time_fractions(builder: ModelBuilder, problem: PolicyProblem, counts: np.ndarray | None = None,
                       rows: Sequence[int] | np.ndarray | None = None, objective: np.ndarray | float = 0.0) -> slice:
    """The variables ``x`` (row-major, job by type) and rows B1-B3; returns their column slice.

    ``rows`` picks the jobs that get variables (default all) and ``counts`` says how many identical jobs each
    stands for (B2 counts each ``counts[k]`` times: an exact aggregation, see formulations/policies.md);
    ``objective`` is the variables' objective coefficients.
    """
    picked = np.arange(problem.num_jobs) if rows is None else np.asarray(rows, dtype=np.int64)
    weight = np.ones(picked.size) if counts is None else np.asarray(counts, dtype=float)
    return add_fractions(builder, problem.throughputs[picked] > 0, problem.scale_factors[picked] * weight,
                         problem.gpus.astype(float), objective)


def add_fractions(builder: ModelBuilder, usable: np.ndarray, weights: np.ndarray, capacity: np.ndarray,
                  objective: np.ndarray | float = 0.0, shared: tuple[int, np.ndarray] | None = None) -> slice:
    """Rows B1-B3 on arrays: ``x[k, t]`` 0 where not ``usable``, ``sum_k weights[k] x[k, t] <= capacity[t]``
    (plus ``shared[1][t]`` times the column ``shared[0]``, when given), ``sum_t x[k, t] <= 1``."""
    jobs, types = usable.shape
    upper = np.where(usable, np.inf, 0.0).ravel()
    x = builder.add_vars("x", jobs * types, upper=upper, objective=objective)
    cols = x.start + np.arange(jobs * types)
    # B2: per type t, sum over jobs of scale * count * x[i, t] <= gpus[t].
    scale = np.asarray(weights, dtype=float)[:, None] * np.ones((1, types))
    row_ids, col_ids, values = np.tile(np.arange(types), jobs), cols, scale.ravel()
    if shared is not None:
        row_ids = np.concatenate([row_ids, np.arange(types)])
        col_ids = np.concatenate([col_ids, np.full(types, shared[0])])
        values = np.concatenate([values, shared[1]])
    builder.add_rows("capacity", row_ids, col_ids, values, upper=capacity, count=types)
    # B3: per job, sum over types of x[i, t] <= 1.
    builder.add_rows("time", np.repeat(np.arange(jobs), types), cols, np.ones(jobs * types), upper=1.0, count=jobs)
    return x


def job_classes(aggregate: bool, *columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Classes of jobs alike in every given per-job column (rows of 2-D arrays compared whole), or with
    ``aggregate`` False one class per job.

    Returns ``(representative, class_of, count)``: a job standing for each class, each job's class, and the
    class sizes. Solving one class per representative is exact for every policy here: each row is linear in
    ``x``, so averaging an optimum over a class keeps every row and the objective (formulations/policies.md).
    """
    jobs = len(columns[0])
    if not aggregate or jobs == 0:  # (no job: nothing to group; numpy cannot reshape an empty key)
        return np.arange(jobs), np.arange(jobs), np.ones(jobs, dtype=np.int64)
    keys = np.column_stack([np.asarray(c, dtype=float).reshape(len(c), -1) for c in columns])
    _, representative, class_of, count = np.unique(keys, axis=0, return_index=True, return_inverse=True,
                                                   return_counts=True)
    return representative, class_of.ravel(), count
