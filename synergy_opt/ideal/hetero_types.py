"""A fast type choice on a type-free heterogeneous round (near-opt's; a candidate of the joint decomposition).

The types of the type-free ideal ILP's LP relaxation (:mod:`synergy_opt.ideal.hetero_model`, HiGHS's dual
simplex): a vertex of it splits at most as many job classes between types or configs as the model has
coupling rows (three per type), so it is the ideal ILP's choice but for a few jobs, at the cost of one LP
instead of a proof. Each class's jobs take its types in proportion to the LP's counts (whole parts first); the
fractional rest goes, largest jobs first, to the type of most share with room for its GPUs. When the LP does
not solve or the rest finds no room, the baseline types (which hold every job) are returned.
"""

from __future__ import annotations

import numpy as np

from synergy_opt.hetero import HeteroRound
from synergy_opt.ideal.hetero_model import build_hetero_ideal


def lp_types(instance: HeteroRound) -> list[str]:
    """A type per job (job order), from the type-free ideal LP (module docstring)."""
    import highspy  # imported on use, as the backends are: importing the package loads no solver

    from synergy_opt.solvers.highs import run, to_highs  # highspy on first solve

    cluster = instance.cluster
    baseline = list(instance.baselines)
    ideal = build_hetero_ideal(instance)
    lp = to_highs(ideal.model.relaxed())
    lp.setOptionValue("solver", "simplex")
    run(lp, 1)
    if lp.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return baseline
    y = np.array(lp.getSolution().col_value)
    kinds = len(cluster.types)
    mass = np.zeros((ideal.num_classes, kinds))
    np.add.at(mass, (ideal.col_class, ideal.col_type), y)
    whole = np.floor(mass + 1e-6).astype(np.int64)
    gpus = instance.gpus
    class_gpus = gpus[ideal.class_jobs[np.concatenate([[0], np.cumsum(ideal.class_count)[:-1]])]]
    room = np.array([t.total_gpus for t in cluster.types], dtype=np.int64) - class_gpus @ whole
    rest = ideal.class_count - whole.sum(axis=1)
    extra = np.zeros_like(whole)
    for q in np.flatnonzero(rest > 0)[np.argsort(-class_gpus[rest > 0], kind="stable")]:
        fraction = mass[q] - whole[q]
        for _ in range(int(rest[q])):
            for k in np.argsort(-fraction, kind="stable"):
                if fraction[k] > 1e-9 and room[k] >= class_gpus[q]:
                    extra[q, k] += 1
                    fraction[k] -= 1
                    room[k] -= class_gpus[q]
                    break
            else:
                return baseline
    counts = whole + extra
    types = np.empty(len(instance.jobs), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(ideal.class_count)])
    for q in range(ideal.num_classes):
        types[ideal.class_jobs[offsets[q]:offsets[q + 1]]] = np.repeat(np.arange(kinds), counts[q])
    return [cluster.names[int(k)] for k in types]
