"""near-opt: a realizable allocation close to the joint optimum at scheduler speed (issue 11).

``run_mechanism(instance, "near-opt")``, or :func:`solve_near_opt` for the details. The steps, each in its
own module:

1. **Targets** (:mod:`~synergy_opt.mechanisms.configs`): the ideal ILP's configs per job, CPU and memory
   priced by the Lagrangian dual of its two coupling rows over the *placeable* columns (none a GPU cannot run
   beside its server's other GPUs); each job's best config at those prices (the ideal LP's choice), trimmed
   until the targets fit the cluster's CPUs and memory, then raised while they have room. The LP's ties are
   taken both ways (least and most priced use): the better is the targets.
2. **Placement** (:mod:`~synergy_opt.mechanisms.near_opt.assign`): jobs cut into chunks and assigned to
   servers in rounds of optimal assignments that keep room for the jobs still to come.
3. **Local search** (:mod:`~synergy_opt.mechanisms.near_opt.rebalance`): swaps between servers until the
   targets on each server fit, or no swap helps.
4. **Per-server optimum and exchanges** (:mod:`~synergy_opt.mechanisms.near_opt.server_dp`,
   :mod:`~synergy_opt.mechanisms.near_opt.splits`, :mod:`~synergy_opt.mechanisms.near_opt.exchange`): with the
   GPUs placed, a dynamic programme per server picks the whole jobs' configs exactly, the split jobs' configs
   are chosen against its tables, and swaps of jobs (or of GPUs of split jobs, or GPUs split off a whole job)
   judged exactly by those tables raise the total. On clusters of at most 32 servers steps 2-4 run from three
   targets (the priced ones, the ties taken the other way, the ideal ILP's optimum) and the best is kept; there
   *pinned raises* (:mod:`~synergy_opt.mechanisms.near_opt.pinned`) then hold one job at a time at its aim,
   repair the placement around it and keep what gains.
5. **Spare capacity** (:mod:`~synergy_opt.mechanisms.spare`, ``spend_spare=True``): what is still idle goes
   to the jobs that gain most.
6. **Never below TUNE** (:mod:`~synergy_opt.mechanisms.near_opt.tune_floor`): TUNE's total is bounded without
   running it; when no bound proves near-opt ahead, Synergy-TUNE runs on the same round (with the same
   ``spend_spare``) and its allocation is returned instead whenever its total is higher.
"""

from synergy_opt.mechanisms.near_opt.mechanism import NearOptResult, pack_near_opt, solve_near_opt

__all__ = ["NearOptResult", "pack_near_opt", "solve_near_opt"]
