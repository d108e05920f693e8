"""The simulation loop on a heterogeneous cluster (issue 23): every rule of the one-type loop, per GPU type.

- **Unit of progress.** A job's work is counted in seconds at the proportional share of the cluster's reference
  type (its ``duration_s``); in a round it progresses at its throughput on the type and config it holds over
  its throughput there (its *floor*). Each job's matrix on each type: :mod:`synergy_opt.sim.type_profiles`.
- **Types.** The policy chooses each runnable job's type. Gavel's LP policies
  (:mod:`synergy_opt.sim.gavel_policies`) do so through their round mechanism; the greedy policies (FIFO, SRTF,
  LAS, FTF, a callable) take the jobs in their order and give each the type where it runs fastest at the
  proportional share among those with enough free GPUs (ties: the cluster's order); a job that fits no type is
  passed over (``backfill``) or ends the set; one with room only on types it cannot use is passed over (as
  Gavel's FIFO does).
- **Mechanisms per type.** The jobs on each type form that type's round (its servers, their matrices there),
  and the mechanism allocates it as on a one-type cluster: CPU and memory are shared on the chosen types.
  ``ideal-type-free`` instead takes the whole round at once: the type-free ideal ILP (issue 20) with every job
  free to take any type it can use, its floor its throughput at the chosen type's proportional share.
- **Use per round**, per type, in extra columns of ``SimResult.rounds`` (``gpu_util_pct.<type>``, ...).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.hetero import HeteroCluster, HeteroJob, HeteroRound, normalise
from synergy_opt.instance import Job, RoundInstance
from synergy_opt.profile import Profile
from synergy_opt.sim.allocators import RoundPlan, TypeFreeIdeal
from synergy_opt.sim.engine import RUNS, _Run, over_floor
from synergy_opt.sim.gavel_policies import GavelSelector
from synergy_opt.sim.policies import JobStates, Policy, ranking
from synergy_opt.sim.progress import Accounting
from synergy_opt.sim.result import ROUND_COLUMNS
from synergy_opt.sim.throughput import ThroughputTable
from synergy_opt.sim.trace import Trace, TraceJob
from synergy_opt.sim.type_profiles import trace_type_profiles

_USE = ("gpu_util_pct", "cpu_util_pct", "mem_util_pct")


class HeteroRun(_Run):
    """One simulation on a :class:`~synergy_opt.hetero.HeteroCluster` (see the module)."""

    def __init__(
        self, trace: Trace, cluster: HeteroCluster, policy: Policy, allocate: Callable[[RoundInstance], RoundPlan],
        round_s: float, overhead: float, window: tuple[int, int], record_job_rounds: bool, backfill: bool,
        selector: GavelSelector | None, accounting: Accounting | None = None,
    ) -> None:
        self.hetero = cluster
        self.names = cluster.names
        self.reference = cluster.index(str(cluster.reference))
        self.type_gpus = np.array([t.total_gpus for t in cluster.types], dtype=np.int64)
        self.type_jobs: dict[tuple[int, int], Job] = {}
        # Each type's round, by its jobs in order: (speedups, resources in use, fallback). The engine reuses a
        # round's allocation when the next round picks the same jobs; with several types a type's set of jobs
        # comes back in rounds that are not consecutive (Gavel's round mechanism rotates the others), and its
        # allocation is the mechanism's on the same instance, so it is kept for the run.
        self.type_rounds: dict[tuple[int, bytes], tuple[np.ndarray, np.ndarray, bool]] = {}
        self.types_of = np.empty(0, dtype=np.int64)
        self.unit_profiles: dict[int, dict[str, Profile]] = {}  # a job's matrices on its types, in the ILP's unit
        super().__init__(trace, cluster, policy, allocate, round_s, overhead, window,  # type: ignore[arg-type]
                         record_job_rounds, backfill, selector, accounting)

    def _capacity(self) -> np.ndarray:
        per_type = np.array([[t.total_gpus, t.servers * t.cpus_per_server, t.servers * t.mem_gb_per_server]
                             for t in self.hetero.types], dtype=float)
        return np.concatenate([per_type.sum(axis=0), per_type.ravel()])

    def _round_columns(self) -> tuple[str, ...]:
        extra = tuple(f"{column}.{name}" for name in self.names for column in _USE)
        cut = ROUND_COLUMNS.index("mem_util_pct") + 1
        return (*ROUND_COLUMNS[:cut], *extra, *ROUND_COLUMNS[cut:])

    @property
    def max_job_gpus(self) -> int:
        return int(self.type_gpus.max())

    @property
    def max_job_gpus_text(self) -> str:
        return f"the {self.max_job_gpus} GPUs of the cluster's largest GPU type (a job's GPUs are of one type)"

    def _floor_matrix(self, job: TraceJob) -> str:
        reference = self.names[self.reference]
        return f"profiles[{reference!r}] matrix" if job.profiles is not None else "profile"

    def _best_throughputs(self, positions: np.ndarray) -> np.ndarray:
        """Each job's most throughput on any type (its own ``profile`` may be another type's, in another unit)."""
        return np.array([max(float(matrix.tput.max()) for matrix in self.profiles[int(p)].values())
                         for p in positions])

    def _floors(self, trace: Trace, old: int) -> tuple[np.ndarray, tuple[float, float]]:
        self.profiles = trace_type_profiles(trace, self.hetero)
        self.type_tables = [ThroughputTable([job[name] for job in self.profiles]) for name in self.names]
        positions = np.arange(len(trace))
        at_share = np.column_stack([table.at(positions, t.cpu_per_gpu, t.mem_gb_per_gpu)
                                    for table, t in zip(self.type_tables, self.hetero.types, strict=True)])
        floors = at_share[:, self.reference]
        with np.errstate(divide="ignore", invalid="ignore"):
            self.speeds = np.where(floors[:, None] > 0, at_share / np.where(floors > 0, floors, 1.0)[:, None], 0.0)
        gpus = np.array([job.gpus for job in trace.jobs[old:]], dtype=np.int64)
        fits = (self.speeds[old:] > 0) & (self.type_gpus[None, :] >= gpus[:, None])
        stranded = np.flatnonzero(~fits.any(axis=1) & (floors[old:] > 0))
        if stranded.size:  # it would wait for ever: refused as a job larger than every type is
            j = old + int(stranded[0])
            usable = [f"{name} ({gpus_of} GPUs)" for name, gpus_of, speed
                      in zip(self.names, self.type_gpus, self.speeds[j], strict=True) if speed > 0]
            raise InvalidInputError(f"trace.jobs[{j}].gpus", int(gpus[stranded[0]]),
                                    f"job {trace.jobs[j].id!r} asks for more than any GPU type it can run on holds "
                                    f"({', '.join(usable)}): it could never run")
        if self.selector is not None:
            self.selector.speeds = self.speeds
        ref = self.hetero.reference_type
        return floors[old:], (ref.cpu_per_gpu, ref.mem_gb_per_gpu)

    def _select(self, active: np.ndarray, states: JobStates) -> tuple[np.ndarray, np.ndarray]:
        if self.selector is not None:
            runnable, types = self.selector.select(states)
        else:
            runnable, types = self._fastest_free_type(active[ranking(self.policy, states)])
        self.types_of = types
        return runnable, runnable * len(self.names) + types

    def _fastest_free_type(self, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The greedy policies' type rule: each job in order on its fastest type with room (module)."""
        free = self.type_gpus.copy()
        chosen: list[int] = []
        types: list[int] = []
        for position in order:
            need = self.state.gpus[position]
            speed = np.where((free >= need) & (self.speeds[position] > 0), self.speeds[position], -np.inf)
            best = int(np.argmax(speed))
            if speed[best] == -np.inf:
                # Without backfilling only a job no type has room for ends the set; one with room only on types
                # it cannot use is passed over (Gavel's FIFO: it drops a job whose best free type gives 0).
                if not self.backfill and not (free >= need).any():
                    break
                continue
            chosen.append(int(position))
            types.append(best)
            free[best] -= need
            if not free.any():
                break
        return np.array(chosen, dtype=np.int64), np.array(types, dtype=np.int64)

    def _type_job(self, position: int, t: int) -> Job:
        job = self.type_jobs.get((position, t))
        if job is None:
            spec = self.trace.jobs[position]
            # In the reference type's unit (the floor's), as the one-type loop's and the type-free ILP's jobs.
            profile = over_floor(self.profiles[position][self.names[t]], float(self.state.floor[position]))
            job = Job(spec.id, spec.gpus, profile, model=spec.model)
            self.type_jobs[(position, t)] = job
        return job

    def _allocate(self, runnable: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool, bool]:
        if isinstance(self.allocate, TypeFreeIdeal):
            return self._allocate_type_free(runnable)
        speedup = np.zeros(runnable.size)
        use = np.zeros(3 * (len(self.names) + 1))
        fallback = solved = False
        for t, server_type in enumerate(self.hetero.types):
            here = np.flatnonzero(self.types_of == t)
            if here.size == 0:
                continue
            positions = runnable[here]
            key = (t, positions.tobytes())
            known = self.type_rounds.get(key)
            if known is None:
                plan = self.allocate(RoundInstance(server_type.cluster,
                                                   tuple(self._type_job(int(p), t) for p in positions)))
                known = (*self._score(positions, plan, self.type_tables[t]), plan.fallback)
                self.type_rounds[key] = known
                solved = True
            speedup[here], used, was_fallback = known
            fallback = fallback or was_fallback
            use[:3] += used
            use[3 * (t + 1):3 * (t + 2)] = used
        return speedup, use, fallback, solved


    def _hetero_job(self, position: int, baseline: int) -> HeteroJob:
        """The job free to take every type it can use (speed > 0, GPUs enough for it), at baseline ``baseline``,
        its matrices in the reference type's unit (the type-free ILP sums throughputs across jobs and types, D5)."""
        profiles = self.unit_profiles.get(position)
        if profiles is None:
            fits = self.speeds[position] > 0
            fits &= self.type_gpus >= self.trace.jobs[position].gpus
            usable = {name: self.profiles[position][name] for t, name in enumerate(self.names) if fits[t]}
            profiles = normalise({**usable, self.names[self.reference]: self.profiles[position][
                self.names[self.reference]]}, self.hetero.reference_type)
            profiles = {name: profiles[name] for name in usable}
            self.unit_profiles[position] = profiles
        spec = self.trace.jobs[position]
        return HeteroJob(spec.id, spec.gpus, profiles, self.names[baseline], spec.model)

    def _allocate_type_free(self, runnable: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool, bool]:
        """The type-free ideal bound's round: each job's type and config from the type-free ILP (GPU-proportional
        on the policy's types if it ends without a solution), scored on the type it takes."""
        key = (-1, runnable.tobytes() + self.types_of.tobytes())
        known = self.type_rounds.get(key)
        if known is not None:
            return (*known, False)
        instance = HeteroRound(self.hetero, tuple(self._hetero_job(int(p), int(t))
                                                  for p, t in zip(runnable, self.types_of, strict=True)))
        solve = self.allocate
        assert isinstance(solve, TypeFreeIdeal)
        result = solve(instance)
        types, fallback = self.types_of, not result.has_solution
        if fallback:
            cpu, mem = self.hetero.share_per_gpu[:, types]
        else:
            types = np.array([self.hetero.index(kind) for kind in result.gpu_types], dtype=np.int64)
            cpu, mem = result.cpu_per_gpu, result.mem_gb_per_gpu
        speedup = np.zeros(runnable.size)
        use = np.zeros(3 * (len(self.names) + 1))
        for t in range(len(self.names)):
            here = np.flatnonzero(types == t)
            if here.size == 0:
                continue
            plan = RoundPlan(cpu_per_gpu=cpu[here], mem_gb_per_gpu=mem[here])
            speedup[here], used = self._score(runnable[here], plan, self.type_tables[t])
            use[:3] += used
            use[3 * (t + 1):3 * (t + 2)] = used
        self.type_rounds[key] = (speedup, use, fallback)
        return speedup, use, fallback, True


RUNS[HeteroCluster] = HeteroRun
