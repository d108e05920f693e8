"""Each trace job's matrix on each GPU type of a heterogeneous cluster, in the reference type's unit.

- A job read from a Gavel trace: its built-in model's matrix with the GPU stage at the speed Gavel measured
  for *its own* job type and scale factor on that type over the reference type
  (:func:`synergy_opt.profiling.gpu_types.builtin_type_matrix`, issue 20's rule); 0 where Gavel measured 0
  (the job cannot use that type).
- A job of a built-in model with the built-in matrix, or of an artifact record or a generated trace of job kind
  ``"artifact"`` (whose matrices are the artifact's, for its homogeneous servers): the model's matrix on that type
  (:func:`synergy_opt.profiles.builtin_type_profile`, Gavel's speed ratio of its nearest job type).
- A job with its own matrices per type (a trace job's ``profiles``): those, 0 on the cluster's other types (it
  cannot use them); the reference type's is needed, as its duration is counted there.
- Any other job (its own matrix): the same matrix on every type (nothing says how a type changes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from synergy_opt.errors import InvalidInputError
from synergy_opt.hetero import HeteroCluster
from synergy_opt.profile import Profile
from synergy_opt.profiles import REFERENCE_GPU_TYPE, builtin_type_profile, gavel_gpu_types, model_info, model_names
from synergy_opt.profiling.gpu_types import builtin_type_matrix
from synergy_opt.sim.artifact_profiles import artifact_profile
from synergy_opt.sim.artifact_trace import is_artifact_record
from synergy_opt.sim.trace import Trace


def trace_type_profiles(trace: Trace, cluster: HeteroCluster) -> list[dict[str, Profile]]:
    """Per job of ``trace``, its matrix on each type of ``cluster`` (see the module)."""
    found = trace.metadata.get("gavel")
    gavel: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    duration_type = trace.metadata.get("gpu_type", cluster.reference)
    if gavel and duration_type != cluster.reference:
        raise InvalidInputError("trace.metadata.gpu_type", duration_type, f"a Gavel trace's durations are run times "
                                f"on this type; the simulator counts work at the cluster's reference type "
                                f"({cluster.reference}): read the trace with gpu_type={cluster.reference!r}")
    ratio = int(trace.metadata.get("cpu_per_gpu", 3)) if isinstance(trace.metadata.get("cpu_per_gpu"), int) else 3
    reference = str(cluster.reference)
    # An artifact record's jobs, and a generated trace's of job kind "artifact", carry the matrices of the artifact's
    # homogeneous servers (artifact_profile): on GPU types they take their models' built-in matrices.
    from_record = is_artifact_record(trace)
    artifact_kind = trace.metadata.get("job_kind") == "artifact"
    out = []
    for index, job in enumerate(trace.jobs):
        record = gavel["jobs"].get(job.id) if gavel else None
        if record is not None:
            out.append(_gavel_job(index, job.model, record, gavel["steps_per_s"], cluster, reference))
        elif job.profiles is not None:
            out.append(_own_types(index, job.profiles, cluster, reference))
        elif job.model in model_names() and (from_record or job.profile == model_info(job.model, ratio).profile
                                             or (artifact_kind and job.profile == artifact_profile(job.model, job.gpus,
                                                                                                   ratio))):
            out.append({name: _builtin(index, job.model, name, ratio) for name in cluster.names})
        else:
            out.append(dict.fromkeys(cluster.names, job.profile))
    return out


def _own_types(index: int, profiles: Mapping[str, Profile], cluster: HeteroCluster, reference: str
               ) -> dict[str, Profile]:
    """A job's own matrices per type: each of the cluster's types it has one for, 0 on the others (it cannot
    use them); the reference type's is needed (its duration is counted there). Types the cluster lacks are
    left out."""
    if reference not in profiles:
        raise InvalidInputError(f"trace.jobs[{index}].profiles", sorted(profiles), f"no matrix on the cluster's "
                                f"reference type {reference!r}, where the job's duration_s is counted")
    unused = profiles[reference]
    idle = Profile(unused.cpu_per_gpu, unused.mem_gb_per_gpu, np.zeros_like(unused.tput), unused.name)
    return {name: profiles.get(name, idle) for name in cluster.names}


def _builtin(index: int, model: str, gpu_type: str, ratio: int) -> Profile:
    if gpu_type not in gavel_gpu_types():
        raise InvalidInputError(f"trace.jobs[{index}].model", model, f"a built-in model has matrices on "
                                f"{', '.join(gavel_gpu_types())} only, not {gpu_type!r}: give the job its own matrix")
    return builtin_type_profile(model, gpu_type, ratio)


def _gavel_job(index: int, model: str | None, record: Mapping[str, Any], rates: Mapping[str, Any],
               cluster: HeteroCluster, reference: str) -> dict[str, Profile]:
    job_type, scale = record["job_type"], str(record["scale_factor"])
    missing = [name for name in (*cluster.names, reference) if name not in rates]
    if missing or model is None:
        raise InvalidInputError(f"trace.jobs[{index}]", job_type, f"the Gavel trace has no throughputs on "
                                f"{missing[0] if missing else 'its types'} (read it with types= covering the cluster)")
    if not rates[reference][job_type][scale] > 0:
        raise InvalidInputError(f"trace.metadata.gavel.steps_per_s.{reference}", job_type,
                                f"is 0 on {scale} GPUs: the job cannot run on the cluster's reference type, whose "
                                "run time is its duration (read the trace with gpu_type set to that type)")
    # builtin_type_matrix's speed is over a v100's, the built-in matrices' type; without v100 throughputs, over
    # the reference type's.
    anchor = REFERENCE_GPU_TYPE if rates.get(REFERENCE_GPU_TYPE, {}).get(job_type, {}).get(scale, 0) > 0 else reference
    base = model_info(model).profile
    profiles = {}
    for name in cluster.names:
        speed = rates[name][job_type][scale] / rates[anchor][job_type][scale]
        tput = builtin_type_matrix(model, speed) if speed > 0 else np.zeros_like(base.tput)
        profiles[name] = Profile(base.cpu_per_gpu, base.mem_gb_per_gpu, tput, name=model)
    return profiles
