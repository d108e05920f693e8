"""What the Synergy artifact's model files declare (msr-fiddle/synergy ``simulator/models-<ratio>/<model>_1.py``) and
the jobs' matrices and demands it runs by: :func:`artifact_profile` (a job's matrix: its model file's demand and
speed-up), :func:`artifact_demands` (the demand shares its DRF and TETRIS read). Read by the artifact's records
(:mod:`~synergy_opt.sim.artifact_trace`) and the simulator's artifact rules.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from synergy_opt.instance import Cluster, Job, Profile, RoundInstance
from synergy_opt.mechanisms.demand import best_case_demands
from synergy_opt.profiles import model_info

# The artifact's servers (its configs/default_cluster.ini): 8 GPUs, 8 x the CPU:GPU ratio CPUs, 500 GB.
ARTIFACT_SERVER_GPUS = 8
ARTIFACT_SERVER_MEM_GB = 500.0


# The demand per GPU the artifact's model files declare (``self.cpus``, ``self.mem`` in ``simulator/models-<ratio>/
# <model>_1.py``, msr-fiddle/synergy) is each built-in matrix's best case at every CPU:GPU ratio but these CPUs:
# at 6 CPUs a GPU AlexNet and ShuffleNet ask for 24 (speed-ups 2.18 and 2.59, "3.83/1.75" and "4.54/1.75" in the
# files' comments, points their matrices do not have: there 12 CPUs give 2.94 and 2.89, 1.68 and 1.65 times the
# share's 1.75).
ARTIFACT_DECLARED_CPUS = {6: {"alexnet": 24.0, "shufflenet": 24.0}}


def share_throughput(profile: Profile, cpu_per_gpu: int) -> float:
    """``profile``'s throughput at the artifact's proportional share at a CPU:GPU ratio (``cpu_per_gpu`` CPUs and
    its servers' memory over their GPUs), in the matrix's own unit."""
    return float(profile.throughput(float(cpu_per_gpu), ARTIFACT_SERVER_MEM_GB / ARTIFACT_SERVER_GPUS))


@cache
def artifact_profile(name: str, gpus: int, cpu_per_gpu: int = 3) -> Profile:
    """The matrix an artifact job of built-in model ``name`` on ``gpus`` GPUs runs by.

    The artifact grants a job one speed-up, its model file's (``self.speedup``; the built-in profiles'
    ``speedup_at_best`` at each CPU:GPU ratio), at the demand the file declares (its best case here, but for
    :data:`ARTIFACT_DECLARED_CPUS`), and nothing between the share and that point. At 3 CPUs a GPU the model's
    own matrix gives exactly that; at 4 and 5 the files round the speed-ups (MobileNet at 4: 1.2, its matrix
    1.1923), at 6 two models declare another point. A job of 2-8 GPUs whose best case (times its GPUs) exceeds a
    server's CPUs or memory is capped: the artifact (``jobs/workload.py``, ``add_synergy_profile``) caps its
    demand at one server's and makes its speedup a straight line in CPUs between the share (1) and its best
    case, ``1 + (s - 1) (c_cap - c_p) / (c_best - c_p)`` (a 4-GPU AlexNet: 6 CPUs and 125 GB a GPU at 1.6467; a
    3-GPU one: 8 CPUs at 2.078). So where the model's matrix does not already give it, the matrix here is the
    share's throughput at every config from the share up, that speed-up times it from the (capped) declared
    point up (the point put on the grid), and the model's below the share, all over the share's throughput (1
    at the share: at ratios 4-6 every job's matrix is in that unit, the model's own divided by it where nothing
    else changes); its best case
    (:func:`~synergy_opt.mechanisms.demand.best_case_demands`) is then that point. A job of more than 8 GPUs
    runs at the share at speedup 1 there, as the model's matrix already gives it with the server cap.

    Not modelled: M5 at 6 CPUs a GPU declares 6 CPUs and 187.5 GB at speed-up 1, so the artifact books 187.5 GB
    for no gain; here its best case is the share (a best case is the least config reaching the most throughput).
    """
    info = model_info(name, cpu_per_gpu)
    profile = info.profile
    share_cpu, share_mem = float(cpu_per_gpu), ARTIFACT_SERVER_MEM_GB / ARTIFACT_SERVER_GPUS
    server_cpus = ARTIFACT_SERVER_GPUS * cpu_per_gpu
    one = RoundInstance(Cluster(1, ARTIFACT_SERVER_GPUS, server_cpus, ARTIFACT_SERVER_MEM_GB), (Job("j", 1, profile),))
    best_cpu, best_mem = (float(v[0]) for v in best_case_demands(one))
    best_cpu = ARTIFACT_DECLARED_CPUS.get(cpu_per_gpu, {}).get(name, best_cpu)
    cap_cpu = min(best_cpu, server_cpus / gpus)
    cap_mem = min(best_mem, ARTIFACT_SERVER_MEM_GB / gpus)
    # Speedups are over the share's throughput: 1 at ratio 3, 1.15-1.75 in the matrices of other ratios (they keep
    # ratio 3's unit), so there every job's matrix is rebuilt in the share's unit, one unit for the whole record.
    floor = share_throughput(profile, cpu_per_gpu)
    speedup = info.speedup_at_best
    as_declared = profile.throughput(best_cpu, best_mem) / floor == speedup  # the speedup the simulator reads
    uncapped = (cap_cpu, cap_mem) == (best_cpu, best_mem)
    if floor == 1.0 and (gpus > ARTIFACT_SERVER_GPUS or (uncapped and as_declared)):
        return profile
    if gpus > ARTIFACT_SERVER_GPUS:  # at the share, speedup 1: the model's matrix with the server cap
        return Profile(profile.cpu_per_gpu, profile.mem_gb_per_gpu, profile.tput / floor, name=profile.name)
    if not uncapped and best_cpu > share_cpu:
        speedup = 1.0 + (speedup - 1.0) * (cap_cpu - share_cpu) / (best_cpu - share_cpu)  # the artifact's line
    cpu_axis = np.union1d(profile.cpu_per_gpu, [cap_cpu])
    mem_axis = np.union1d(profile.mem_gb_per_gpu, [cap_mem])
    cpu, mem = np.meshgrid(cpu_axis, mem_axis, indexing="ij")
    tput = np.asarray(profile.throughput(cpu, mem), dtype=float)  # new points read the grid below them
    # In units of the share's throughput, so that a speedup read off the matrix (over the share's) is the
    # artifact's number itself: its accounting takes whole iterations, floor(round_s / (iter_time / speedup)),
    # where one ulp can cost one (no float divided by 1.53 gives 1.92).
    tput = np.where((cpu >= share_cpu) & (mem >= share_mem), np.minimum(tput, floor), tput) / floor
    tput[(cpu >= cap_cpu) & (mem >= cap_mem)] = speedup
    ratio = "" if cpu_per_gpu == 3 else f"-r{cpu_per_gpu}"
    return Profile(cpu_axis, mem_axis, tput, name=f"{name}-x{gpus}{ratio}-artifact")


# Five of the artifact's models declare their least memory per GPU as ``int(62.5/3)`` (``models/gnmt_1.py``), 20 GB,
# where the built-in matrices' grid point is 20.83: a best case there is 20 GB in its DRF and TETRIS keys (bert and
# vae are not built-in models; listed as the artifact has them).
ARTIFACT_WHOLE_GB_MODELS = ("bert", "gnmt", "lstm", "transformer", "vae")
ARTIFACT_LEAST_MEM_GB = (20.83, 20.0)  # (the grid's point, what those models declare)


def artifact_demands(instance: RoundInstance, cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Each job's demand as the artifact's DRF and TETRIS read it, as shares of the cluster's GPUs, CPUs and GB
    (one row per job): its best case per GPU (``cpu``, ``mem``: ``best_case_demands``') times its GPUs, a total
    beyond one server's capped at the server's, or, for a job of more GPUs than a server, at its share
    (``jobs/workload.py``, ``add_synergy_profile``), memory per GPU as the artifact's models declare it. Exact
    for the jobs of an artifact record (``artifact_trace``: a best case already within a server's, as its
    capped matrices give); on other jobs the artifact capped its own best case, which may differ (a 4-GPU
    AlexNet of the built-in matrix: 24 CPUs and 250 GB here, 500 GB there)."""
    cluster = instance.cluster
    grid, declared = ARTIFACT_LEAST_MEM_GB
    whole = np.array([job.model in ARTIFACT_WHOLE_GB_MODELS for job in instance.jobs], dtype=bool)
    mem = np.where(whole & np.isclose(mem, grid, rtol=1e-9, atol=0.0), declared, mem)
    gpus = instance.gpus.astype(float)
    wide = gpus > cluster.gpus_per_server

    def capped(total: np.ndarray, server: float, share: float) -> np.ndarray:
        return np.where(total > server, np.where(wide, share * gpus, server), total)

    return np.column_stack([gpus / cluster.total_gpus,
                            capped(cpu * gpus, cluster.cpus_per_server, cluster.cpu_per_gpu) / cluster.total_cpus,
                            capped(mem * gpus, cluster.mem_gb_per_server, cluster.mem_gb_per_gpu)
                            / cluster.total_mem_gb])
