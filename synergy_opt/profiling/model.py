"""A job performance model: where a job's throughput matrix comes from (paper sections 2.1 and 3.1).

One GPU of a data-parallel training job runs an iteration (one batch of ``batch`` samples) in three
overlapped stages, so the iteration takes as long as the slowest of them:

- **GPU compute**: ``gpu_s`` seconds, whatever the CPU and memory given.
- **CPU pre-processing** (decode, augment) of the batch on ``c`` CPUs, by Amdahl's law:
  ``cpu_s * (serial_fraction + (1 - serial_fraction) / c)``, where ``cpu_s`` is the batch's time on one CPU.
- **Storage reads** of the samples the MinIO cache misses (Mohan et al., VLDB '21: a MinIO cache keeps a
  fixed subset of the dataset and never evicts, so every epoch hits exactly the cached part). With ``m`` GB
  per GPU, the cache is what is left beyond the process's own memory, ``m - process_mem_gb``; a fraction
  ``max(0, 1 - cache / dataset_gb)`` of each batch is read from storage at ``storage_mb_s``:
  ``batch * item_mb * miss / storage_mb_s`` seconds. Below ``process_mem_gb`` the job cannot run (0).

The quantities are per GPU: ``storage_mb_s`` is the GPU's share of its server's storage bandwidth (the
reference server's 500 MB/s over 8 GPUs by default), and ``dataset_gb`` is the data one GPU reads per epoch
(the whole dataset for a one-GPU job, as the built-in matrices are). A multi-GPU job has the same per-GPU
matrix, as the toolkit assumes throughout.

:meth:`JobModel.throughput` is normalised like the built-in matrices: 1.0 at the reference point, the
GPU-proportional share of the reference server (3 CPUs, 62.5 GB per GPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.instance import Profile
from synergy_opt.profile import profile_axis
from synergy_opt.profiles import reference_server
from synergy_opt.validation import Integer, Number, Optional, real_array, text

_SERVER = reference_server()
REFERENCE_CPU_PER_GPU = _SERVER["cpus"] / _SERVER["gpus"]
REFERENCE_MEM_GB_PER_GPU = _SERVER["mem_gb"] / _SERVER["gpus"]
STORAGE_MB_S_PER_GPU = _SERVER["storage_mb_s"] / _SERVER["gpus"]
# The paper (section 2.1): 20 GB is the memory GNMT's training process needs before any cache.
PROCESS_MEM_GB = 20.0
_FRACTION = Number(0, 1)
# The ranges of the model's quantities (docs/inputs.md): within them every stage time, iteration time,
# throughput and samples per second the model derives is finite (at most about 1e100), whatever the point.
MAX_BATCH = 2**31 - 1
MAX_QUANTITY = 1e30
BATCH = Integer(1, MAX_BATCH)
QUANTITY = Number(0, MAX_QUANTITY)  # seconds, GB, MB or MB/s
POSITIVE_QUANTITY = Number(1 / MAX_QUANTITY, MAX_QUANTITY)


@dataclass(frozen=True)
class MinIOCache:
    """The memory model: the storage reads of a job whose cache is a MinIO cache (section 3.1).

    The optimistic profiler measures a job only at full memory and fills every other memory value from this
    model: more memory only shortens the storage stage, so the throughput at ``m`` GB is the throughput
    measured at full memory, capped by what the storage stage alone allows at ``m``.
    """

    batch: int
    dataset_gb: float
    item_mb: float
    storage_mb_s: float = STORAGE_MB_S_PER_GPU
    process_mem_gb: float = PROCESS_MEM_GB

    def __post_init__(self) -> None:
        for key, rule in (("batch", BATCH), ("dataset_gb", POSITIVE_QUANTITY), ("item_mb", QUANTITY),
                          ("storage_mb_s", POSITIVE_QUANTITY), ("process_mem_gb", QUANTITY)):
            object.__setattr__(self, key, rule(key, getattr(self, key)))

    def miss_fraction(self, mem_gb_per_gpu: Any) -> np.ndarray:
        """The fraction of each batch read from storage with ``mem_gb_per_gpu`` GB (1 with no cache)."""
        cache = np.maximum(_point("mem_gb_per_gpu", mem_gb_per_gpu) - self.process_mem_gb, 0.0)
        return np.maximum(1.0 - cache / self.dataset_gb, 0.0)

    def read_time_s(self, mem_gb_per_gpu: Any) -> np.ndarray:
        """Seconds per iteration spent reading cache misses from storage."""
        return self.batch * self.item_mb * self.miss_fraction(mem_gb_per_gpu) / self.storage_mb_s

    def runs(self, mem_gb_per_gpu: Any) -> np.ndarray:
        """Whether the job fits at all: its process memory is given."""
        return _point("mem_gb_per_gpu", mem_gb_per_gpu) >= self.process_mem_gb * (1 - 1e-12)

    def throughput(self, at_full_memory: Any, mem_gb_per_gpu: Any) -> np.ndarray:
        """Samples per second with ``mem_gb_per_gpu`` GB, given ``at_full_memory`` measured at full memory.

        Exact for a job whose iteration time is the slowest of its stages: the storage stage is the only one
        memory changes, and it only grows as memory shrinks. ``at_full_memory`` is in samples per second too
        (``JobModel.samples_per_s``): the storage cap is, so a normalised throughput (``JobModel.throughput``,
        about 1) would never meet it and every memory value would read the full-memory throughput.
        """
        at_full_memory = _point("at_full_memory", at_full_memory)
        read = self.read_time_s(mem_gb_per_gpu)
        with np.errstate(divide="ignore"):
            storage_bound = np.where(read > 0, self.batch / np.where(read > 0, read, 1.0), np.inf)
        return np.where(self.runs(mem_gb_per_gpu), np.minimum(at_full_memory, storage_bound), 0.0)


@dataclass(frozen=True)
class JobModel:
    """A training job's per-GPU iteration time as the slowest of GPU, CPU and storage (module docstring).

    Parameters
    ----------
    batch
        Samples per iteration per GPU.
    gpu_s
        GPU compute seconds per iteration.
    cpu_s
        Seconds one CPU takes to pre-process one batch.
    serial_fraction
        The part of the pre-processing that does not parallelise over CPUs (Amdahl's law), in [0, 1].
    dataset_gb, item_mb
        Data read per epoch by one GPU, and the mean size of one sample as stored.
    storage_mb_s
        Storage bandwidth available to one GPU (default: the reference server's 500 MB/s over its 8 GPUs).
    process_mem_gb
        Memory the training process needs before any cache (default 20 GB, the paper's figure for GNMT).
    name
        The model's name (the built-in model it was fitted to, for instance); carried into its profiles.
    """

    batch: int
    gpu_s: float
    cpu_s: float
    serial_fraction: float
    dataset_gb: float
    item_mb: float
    storage_mb_s: float = STORAGE_MB_S_PER_GPU
    process_mem_gb: float = PROCESS_MEM_GB
    name: str | None = None

    def __post_init__(self) -> None:
        for key, rule in (("gpu_s", POSITIVE_QUANTITY), ("cpu_s", QUANTITY), ("serial_fraction", _FRACTION)):
            object.__setattr__(self, key, rule(key, getattr(self, key)))
        cache = self.memory_model  # validates batch, dataset_gb, item_mb, storage_mb_s, process_mem_gb
        for key in ("batch", "dataset_gb", "item_mb", "storage_mb_s", "process_mem_gb"):
            object.__setattr__(self, key, getattr(cache, key))
        if not cache.process_mem_gb < REFERENCE_MEM_GB_PER_GPU:
            raise InvalidInputError(
                "process_mem_gb", self.process_mem_gb,
                f"must be below the reference {REFERENCE_MEM_GB_PER_GPU} GB per GPU, where throughput is 1.0",
            )
        object.__setattr__(self, "name", Optional(text)("name", self.name))

    @property
    def memory_model(self) -> MinIOCache:
        """The job's storage stage as the memory model the optimistic profiler uses, in samples per second: pair
        it with ``measure=samples_per_s`` (not the normalised :meth:`throughput`, which its cap never meets), then
        normalise the profile (``synergy_opt.profiling.normalised``)."""
        return MinIOCache(self.batch, self.dataset_gb, self.item_mb, self.storage_mb_s, self.process_mem_gb)

    def stage_times_s(self, cpus_per_gpu: Any, mem_gb_per_gpu: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """GPU, CPU and storage seconds per iteration (broadcast over the two arguments)."""
        cpus, mem = _point("cpus_per_gpu", cpus_per_gpu, positive=True), _point("mem_gb_per_gpu", mem_gb_per_gpu)
        cpus, mem = np.broadcast_arrays(cpus, mem)
        gpu = np.full(cpus.shape, self.gpu_s)
        with np.errstate(over="ignore", divide="ignore"):  # a vanishing CPU share: an infinite CPU stage
            per_cpu = (1.0 - self.serial_fraction) / cpus
            cpu = self.cpu_s * (self.serial_fraction + per_cpu) if self.cpu_s else np.zeros(cpus.shape)
        return gpu, cpu, self.memory_model.read_time_s(mem)

    def iteration_time_s(self, cpus_per_gpu: Any, mem_gb_per_gpu: Any) -> np.ndarray:
        """Seconds per iteration: the slowest stage; infinite below the process memory."""
        gpu, cpu, read = self.stage_times_s(cpus_per_gpu, mem_gb_per_gpu)
        slowest = np.maximum(np.maximum(gpu, cpu), read)
        return np.where(self.memory_model.runs(mem_gb_per_gpu), slowest, np.inf)

    def samples_per_s(self, cpus_per_gpu: Any, mem_gb_per_gpu: Any) -> Any:
        """Training samples per second per GPU (0 below the process memory)."""
        value = self.batch / self.iteration_time_s(cpus_per_gpu, mem_gb_per_gpu)
        return float(value) if np.ndim(value) == 0 else value

    def throughput(self, cpus_per_gpu: Any, mem_gb_per_gpu: Any) -> Any:
        """Normalised throughput: 1.0 at the reference point (3 CPUs, 62.5 GB per GPU), like ``Profile.tput``."""
        reference = self.iteration_time_s(REFERENCE_CPU_PER_GPU, REFERENCE_MEM_GB_PER_GPU)
        value = reference / self.iteration_time_s(cpus_per_gpu, mem_gb_per_gpu)
        return float(value) if np.ndim(value) == 0 else value

    def profile(self, cpu_axis: Any, mem_axis: Any) -> Profile:
        """The job's exact sensitivity matrix on the grid ``cpu_axis x mem_axis`` (per GPU, increasing)."""
        cpu, mem = profile_axis("cpu_axis", cpu_axis), profile_axis("mem_axis", mem_axis)  # named as given
        return Profile(cpu, mem, self.throughput(cpu[:, None], mem[None, :]), name=self.name)


def _point(name: str, value: Any, *, positive: bool = False) -> np.ndarray:
    """CPUs or memory per GPU, a number or an array (strings and booleans are not numbers), as floats."""
    array = real_array(name, value, ndim=None)
    if not np.all(np.isfinite(array)) or np.any(array < 0) or (positive and np.any(array == 0)):
        raise InvalidInputError(name, value, f"must be finite and {'> 0' if positive else '>= 0'}")
    return array
