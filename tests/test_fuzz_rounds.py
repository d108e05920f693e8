"""Rounds from outside the toolkit's generators (issue s28's fuzzing): edge cases every backend must take."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

import synergy_opt as so
from synergy_opt.evaluation import CAPACITY_TOLERANCE
from synergy_opt.hetero import HeteroCluster, HeteroJob, HeteroRound, ServerType
from synergy_opt.joint.model import direct_params
from synergy_opt.placement.solve import placement_demands
from synergy_opt.solvers import SolverParams, Status, available_solvers
from synergy_opt.solvers.highs import PRESOLVE_MIN_SECONDS, short_limit_params


@pytest.mark.parametrize("solver", available_solvers())
def test_a_type_without_jobs_solves_under_every_backend(solver: str) -> None:
    """A type-fixed round whose second type has no job: that type's round is empty (no variables), an
    optimum of 0, not an error."""
    cluster = HeteroCluster((ServerType("x_1", 1, 2, 6.0, 100.0), ServerType("p100", 1, 1, 3.0, 50.0)))
    profile = so.Profile([1.0, 3.0], [50.0], [[0.5], [1.0]])
    instance = HeteroRound(cluster, (HeteroJob("j0", 2, {"x_1": profile}),))
    relaxations = (False,) if solver == "ortools-cpsat" else (False, True)
    for relax in relaxations:
        result = so.solve_ideal(instance, solver=solver, relax=relax)
        assert result.status is Status.OPTIMAL, (relax, result.message)
        assert result.objective == pytest.approx(1.0)
    assert so.solve_ideal(so.RoundInstance(so.Cluster(1), ()), solver=solver).objective == 0.0


def test_a_type_free_joint_whose_optimum_is_zero_is_proven() -> None:
    """No job can run above 0: j1's 16 GPUs need more memory than its type has at any grid point, j0's
    memory point fits one GPU a server on t4 and its p100 matrix is 0 below 4 CPUs and 112 GB."""
    cluster = HeteroCluster((ServerType("t4", 2, 4, 15.76, 351.0), ServerType("p100", 2, 8, 30.62, 402.6)))
    j0 = HeteroJob("j0", 3, {
        "t4": so.Profile([2.41, 3.94, 6.958], [200.9], [[0.654188807], [0.917307533], [0.917307533]]),
        "p100": so.Profile([1.679, 3.72, 4.0], [20.2, 104.0, 112.0],
                           [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.165359669]])}, "t4")
    j1 = HeteroJob("j1", 16, {"p100": so.Profile([3.8275, 6.709], [77.0, 82.0],
                                                 [[0.30099224, 0.438667807], [0.30099224, 0.438667807]])})
    result = so.solve_joint(HeteroRound(cluster, (j0, j1)))
    assert result.objective == 0.0
    assert result.status is Status.OPTIMAL, (result.status, result.bound)


def test_the_ideal_lp_bounds_allocations_that_starve_a_job_of_floor_zero() -> None:
    cluster = so.Cluster(1, 2, 4.0, 100.0)
    a = so.Job("A", 1, so.Profile([1.0, 3.9], [10.0], [[0.1], [2.0]]))
    b = so.Job("B", 1, so.Profile([3.0], [10.0], [[1.0]]))  # 2 CPUs a GPU is below its grid: floor 0
    instance = so.RoundInstance(cluster, (a, b))
    starved = so.evaluate(instance, {"jobs": {"A": [{"server": 0, "gpus": 1, "cpus": 3.9, "mem_gb": 50}],
                                              "B": [{"server": 0, "gpus": 1, "cpus": 0.1, "mem_gb": 50}]}})
    assert starved.valid and not starved.floors_violated and starved.objective == pytest.approx(2.0)
    assert so.solve_ideal(instance, relax=True).objective >= starved.objective
    # By hand: B at its grid (3 CPUs, 1.0) leaves A 1 CPU (0.1), 1.1 in all; B starved of everything (its floor
    # is 0) leaves A its 3.9 CPUs (2.0). Every model offers B no CPUs and no memory now (ideal.model.with_zero_config;
    # the ideal ILP and the joint found 1.1, below greedy's and tetris's 2.0).
    for method in ("direct", "core"):
        assert so.solve_ideal(instance, method=method).objective == pytest.approx(2.0)
    for method in ("direct", "decomposition"):
        joint = so.solve_joint(instance, method=method)
        assert joint.objective == pytest.approx(2.0) and so.evaluate(instance, joint.allocation).objective == \
            pytest.approx(2.0)
    for name in ("greedy", "tetris", "near-opt"):
        assert so.evaluate(instance, so.run_mechanism(instance, name)).objective == pytest.approx(2.0)
    # A job of positive floor is never offered the config: the same round with B's grid at its share.
    fed = so.RoundInstance(cluster, (a, so.Job("B", 1, so.Profile([2.0], [10.0], [[1.0]]))))
    assert so.solve_ideal(fed).objective == pytest.approx(1.1)
    # The same on a type-free round (each type's columns, config_columns): a small k80 that A may not take (worth
    # 0.05 at its share, below A's floor 0.1: H0), B starved on the v100 again, 2.0.
    cluster_types = HeteroCluster((ServerType("v100", 1, 2, 4.0, 100.0), ServerType("k80", 1, 1, 0.5, 10.0)), "v100")
    hetero = HeteroRound(cluster_types, (
        HeteroJob("A", 1, {"v100": a.profile, "k80": so.Profile([0.5], [10.0], [[0.05]])}, "v100"),
        HeteroJob("B", 1, {"v100": b.profile}, "v100")))
    assert not hetero.type_fixed
    for method in ("direct", "auto"):
        assert so.solve_ideal(hetero, method=method).objective == pytest.approx(2.0)
    for method in ("direct", "decomposition"):
        assert so.solve_joint(hetero, method=method).objective == pytest.approx(2.0)


def test_the_joint_under_a_time_limit_has_an_allocation() -> None:
    cluster = so.Cluster(1, 16, 61.8, 1809.5)
    jobs = (
        so.Job("j2", 1, so.Profile([1.82], [113.09375, 124.8, 144.4, 145.59],
                                   [[0.564444524, 0.594277058, 0.594277058, 0.594277058]])),
        so.Job("j3", 2, so.Profile([2.28], [201.536, 253.4], [[0.642191262, 0.642191262]])),
        so.Job("j4", 13, so.Profile([3.41, 3.8625, 3.99, 9.0], [257.44, 281.0],
                                    [[0.37868906, 0.475302352], [0.37868906, 0.508838966],
                                     [0.549530124, 0.549530124], [0.549530124, 0.549530124]])),
    )
    result = so.solve_joint(so.RoundInstance(cluster, jobs), time_limit=1.0)
    assert result.status.has_solution, result.message


# Saved fuzzed rounds whose joint overran a time limit: (file, limit, most seconds allowed, a solution expected).
# - fuzz_slow_pricing_round: the list pricing of its 16-GPU p100 servers (per-GPU CPUs and memory off any integer
#   grid) took 0.4-4.5 s a call and did not look at the deadline: time_limit=1 returned after 10-16 s. It now stops
#   between levels.
# - fuzz_core_no_incumbent_round: one level of the list pricing held 2.8 million states, 2.8 s to prune after the
#   last deadline check: time_limit=3 returned after 7.6 s. A level is not begun when pruning it would end past
#   the deadline.
# - fuzz_slow_presolve_round: each type's direct joint model (16 rows, 7,939 integer columns) sat 2-3.6 s in
#   HiGHS's MIP presolve against a 0.2 s limit: time_limit=0.5 returned after 2.2 s. Under a limit below a second
#   the joint's direct models now run without it (test_short_limits_turn_presolve_off_on_the_joint_only).
# - fuzz_slow_dive_pricing_round: the residual dive that places the ideal ILP's configs on a type of 16-GPU servers
#   priced loads without a deadline (8 s in two calls): time_limit=2 returned NO_SOLUTION after 8-9 s. Its pricing
#   now stops at the dive's deadline (FEASIBLE in 1-1.4 s).
OVERRUN_ROUNDS = [
    ("fuzz_slow_pricing_round.json", 1.0, 3.0, False),
    ("fuzz_core_no_incumbent_round.json", 3.0, 5.0, True),
    ("fuzz_slow_presolve_round.json", 0.5, 1.5, True),
    ("fuzz_slow_dive_pricing_round.json", 2.0, 5.0, False),
]


@pytest.mark.parametrize(("name", "limit", "most", "solution"), OVERRUN_ROUNDS)
def test_the_joint_keeps_its_time_limit(name: str, limit: float, most: float, solution: bool) -> None:
    instance = so.load_instance(Path(__file__).parent / "data" / name)
    start, cpu = time.perf_counter(), time.process_time()
    result = so.solve_joint(instance, time_limit=limit)
    assert time.perf_counter() - start < most
    # A solution is owed only when the solve had the CPU its limit stands for: on a shared machine under load a
    # 0.5 s limit can pass with a fifth of it (the time limit itself holds regardless, above).
    starved = time.perf_counter() - start >= 0.9 * limit and time.process_time() - cpu < limit / 2
    assert result.status.has_solution or not solution or starved, result.message


def test_short_limits_turn_presolve_off_on_the_joint_only() -> None:
    # The rule lives with the joint's direct models: the ideal ILP keeps presolve under short limits (on 512 GPUs
    # it takes 0.75 s without, 0.15 s with), and options that set presolve win.
    short = SolverParams(time_limit=PRESOLVE_MIN_SECONDS / 2)
    assert short_limit_params(short).options == {"presolve": "off"}
    assert short_limit_params(SolverParams(time_limit=PRESOLVE_MIN_SECONDS)).options == {}
    assert short_limit_params(SolverParams()).options == {}
    assert short_limit_params(replace(short, options={"presolve": "on"})).options == {"presolve": "on"}
    assert direct_params("highs", short).options == {"presolve": "off"}
    assert direct_params("pyomo-highs", short) is short
    # The patterns model goes without presolve at any limit (its presolve ignored limits and once called a wrong
    # optimum); the caller's setting wins there too, and the other formulations keep the short-limit rule.
    for params in (SolverParams(), SolverParams(time_limit=60.0)):
        assert direct_params("highs", params, patterns=True).options == {"presolve": "off"}
        assert direct_params("highs", params).options == {}
    assert direct_params("highs", SolverParams(options={"presolve": "on"}), patterns=True).options == {"presolve": "on"}
    assert direct_params("pyomo-highs", SolverParams(), patterns=True).options == {}


def test_a_time_limit_the_first_incumbent_uses_up_is_a_status() -> None:
    # auto's first incumbent before a direct solve may take the whole limit: the direct model was then handed
    # time_limit=0.0, which SolverParams rejects (an InvalidInputError naming an argument the caller never gave).
    instance = so.member_round("multi", 128, seed=2, profile_noise=0.0)  # alike jobs: auto goes direct
    result = so.solve_joint(instance, consolidate=False, time_limit=1e-3)
    assert result.status in (Status.FEASIBLE, Status.NO_SOLUTION, Status.OPTIMAL), result.status
    assert result.status is Status.NO_SOLUTION or (result.evaluation is not None and result.evaluation.valid)


def test_a_looser_gap_does_not_lose_the_type_free_ideal_optimum() -> None:
    """16 jobs of 1-96 GPUs over four types of 1- and 16-GPU servers, throughputs near 1e5: at the default gap
    the core search proves the optimum in 0.2 s; at the joint's 1e-4 its first threshold (the gap allowed, 98)
    was past the exact search's state limit, the beams found nothing, and it ended NO_SOLUTION after 34-48 s
    (time limit 10 s) and 6 GB in a last unbounded search."""
    instance = so.load_instance(Path(__file__).parent / "data" / "fuzz_loose_gap_round.json")
    exact = so.solve_ideal(instance)
    assert exact.status is Status.OPTIMAL
    start = time.perf_counter()
    loose = so.solve_ideal(instance, mip_gap=1e-4, time_limit=10)
    assert time.perf_counter() - start < 5
    assert loose.status is Status.OPTIMAL, loose.message
    assert loose.objective >= exact.objective * (1 - 1e-4)


def test_the_type_free_ideal_finds_the_optimum_where_the_core_search_finds_no_incumbent() -> None:
    """18 jobs over four types (one of 96 GPUs, its whole type): the core search's beams found no solution up to
    the worst threshold, and its last exact search, unbounded, ran 3x past a 10 s limit (NO_SOLUTION) or,
    without a limit, past 5 GB (MemoryError); HiGHS on the whole model proves the optimum in 0.1 s."""
    instance = so.load_instance(Path(__file__).parent / "data" / "fuzz_core_no_incumbent_round.json")
    direct = so.solve_ideal(instance, method="direct")
    assert direct.status is Status.OPTIMAL
    start = time.perf_counter()
    result = so.solve_ideal(instance, time_limit=10)
    assert time.perf_counter() - start < 15
    assert result.status is Status.OPTIMAL, result.message
    assert result.objective == pytest.approx(direct.objective, rel=1e-6)


@pytest.mark.parametrize("big", [1e15, 1e20, 1e300])
def test_a_grid_point_no_cluster_can_afford_is_never_a_column(big: float) -> None:
    # A blind checker's round: CPU axis points of 1e15 and more are valid input (finite, positive) that no
    # cluster here can give. As coefficients they broke every solver: HiGHS called 2.5 (14 of 12 CPUs) or 0.0
    # OPTIMAL, Pyomo's HiGHS 12.8, CBC INFEASIBLE, SCIP raised. Optimum by hand: a (2 GPUs) needs its floor 1.0,
    # only at 3 CPUs and 50 GB a GPU (6 CPUs); b (floor 0.6 at 1 CPU, 50 GB, its share being below its 4-CPU
    # point) gets the 6 CPUs left: 1 CPU a GPU, 0.6. Total 1.6; the LP mixes b's 4-CPU config in: 2.2.
    cluster = so.Cluster(2, 2, 6.0, 100.0)
    a = so.Job("a", 2, so.Profile([1.0, 3.0, big], [1.0, 50.0], [[0.1, 0.5], [0.2, 1.0], [0.3, 9.0]]))
    b = so.Job("b", 2, so.Profile([1.0, 4.0], [10.0, 50.0], [[0.5, 0.6], [0.7, 1.5]]))
    instance = so.RoundInstance(cluster, (a, b))
    for solver in available_solvers():
        result = so.solve_ideal(instance, solver=solver)
        assert result.status is Status.OPTIMAL and result.objective == pytest.approx(1.6), (solver, result.message)
    assert so.solve_ideal(instance, method="direct").objective == pytest.approx(1.6)
    assert so.solve_ideal(instance, relax=True).objective == pytest.approx(2.2)
    assert so.solve_opt(instance).objective == pytest.approx(1.6)
    assert so.solve_joint(instance).objective == pytest.approx(1.6)
    # Across types alike: the same jobs, type-free, beside a small second type whose share (1 CPU, 10 GB a GPU)
    # keeps neither floor (0.1 and 0.5), so both stay on the first: 1.6 again.
    hetero = HeteroCluster((ServerType("v100", 2, 2, 6.0, 100.0), ServerType("k80", 1, 2, 2.0, 20.0)))
    jobs = tuple(HeteroJob(job.id, job.gpus, {"v100": job.profile, "k80": job.profile}, "v100") for job in (a, b))
    free = HeteroRound(hetero, jobs)
    for method in ("auto", "direct"):
        assert so.solve_ideal(free, method=method).objective == pytest.approx(1.6), method
    assert so.solve_joint(free).objective == pytest.approx(1.6)


# A fuzzed round (session 37): 2 servers x 2 GPUs of 494.4 GB, four 1-GPU jobs; j0's only memory point is the
# share plus 2e-9 (worth 0.002), the others sit at the share (worth 0.001 since session 51: positive floors, so
# none may be given less than its share, with_zero_config). No exactly feasible allocation gives j0 its point;
# HiGHS's ILP once did, within its MIP feasibility tolerance (988.8000005 GB of 988.8), and the exact placement LP
# of those configs was then infeasible (solve_opt raised "no placement exists").
OVER_BY_A_HAIR = {
    "format": "synergy-round/1",
    "cluster": {"servers": 2, "gpus_per_server": 2, "cpus_per_server": 29.91, "mem_gb_per_server": 494.4},
    "jobs": [{"id": "j0", "gpus": 1, "profile": {"cpu_per_gpu": [0.523], "mem_gb_per_gpu": [247.20000049439997],
                                                 "tput": [[0.002]]}}]
    + [{"id": f"j{i}", "gpus": 1, "profile": {"cpu_per_gpu": [0.523], "mem_gb_per_gpu": [247.2], "tput": [[0.001]]}}
       for i in (1, 2, 3)],
}
# The others' 0.001 a job, the exact optimum; and that with j0's point placed within the packing's slack.
EXACT, SLACK = 0.003, 0.005


@pytest.mark.parametrize("placement", ["lp", "milp", "milp-integral"])
def test_the_ilp_and_opt_keep_capacities_exactly(placement: str) -> None:
    instance = so.load_instance(OVER_BY_A_HAIR)
    ideal = so.solve_ideal(instance)
    assert ideal.objective == pytest.approx(EXACT, abs=1e-12)
    assert ideal.objective <= so.solve_ideal(instance, relax=True).objective + 1e-9
    assert "solved again" in ideal.solve.message  # HiGHS's first point passed the memory row
    result = so.solve_opt(instance, placement=placement)
    evaluation = so.evaluate(instance, result.allocation)
    assert evaluation.valid and set(result.allocation.jobs) == {"j0", "j1", "j2", "j3"}
    assert evaluation.objective == pytest.approx(EXACT, abs=1e-12)


def test_placement_demands_past_the_totals_by_a_solvers_tolerance_are_scaled_to_them() -> None:
    # Another backend's ILP may still pass the totals by its tolerance: its demands are placed scaled to them.
    instance = so.load_instance(OVER_BY_A_HAIR)
    demands = placement_demands(instance)
    hair = replace(demands, mem_gb=demands.mem_gb * (1 + 5e-10)).within_totals(CAPACITY_TOLERANCE)
    assert hair.mem_gb.sum() == pytest.approx(988.8, rel=1e-15) and hair.mem_gb.sum() <= 988.8
    assert hair.cpus.tolist() == demands.cpus.tolist()
    far = replace(demands, mem_gb=demands.mem_gb * (1 + 1e-6))  # past the evaluator's tolerance: left as it is
    assert far.within_totals(CAPACITY_TOLERANCE).mem_gb.tolist() == far.mem_gb.tolist()


@pytest.mark.parametrize("formulation", ["patterns", "servers", "literal"])
def test_every_joint_formulation_keeps_capacities_exactly(formulation: str) -> None:
    # One 2-GPU job on two 1-GPU servers of 7.32 CPUs; its only CPU point is float32(7.32), 2.3e-8 above: no
    # allocation reaches it. The literal formulation once returned 0.002 as OPTIMAL (7.32000017 CPUs a server,
    # within HiGHS's tolerance), above the ideal ILP's 0.
    instance = so.RoundInstance(so.Cluster(2, 1, 7.32, 1000.0), (so.Job("j0", 2, so.Profile(
        [7.320000171661377], [285.4209899902344], [[0.002]])),))
    result = so.solve_joint(instance, method="direct", formulation=formulation, mip_gap=0.0)
    assert result.status is Status.OPTIMAL and result.objective == 0.0


# Three jobs on three 2-GPU servers of 5 CPUs: a server holding a piece of j2 (2.500000005 CPUs) and j3
# (2.500000002625) is 1.525e-9 (relative) over, past the 1e-9 every pattern routine allows a server and short of
# the 2e-9 the direct patterns model once allowed. (j3's point is just off the share's grid tolerance: a point
# within it is read, and asked, as the share itself.)
AT_THE_SLACK = {"format": "synergy-round/1", "cluster": {"servers": 3, "gpus_per_server": 2, "cpus_per_server": 5.0,
                                                          "mem_gb_per_server": 500.0}, "jobs": [
    {"id": "j0", "gpus": 1, "profile": {"cpu_per_gpu": [3.812], "mem_gb_per_gpu": [12.232], "tput": [[0.01]]}},
    {"id": "j2", "gpus": 2, "profile": {"cpu_per_gpu": [2.500000005], "mem_gb_per_gpu": [250.0000005],
                                        "tput": [[0.002]]}},
    {"id": "j3", "gpus": 1, "profile": {"cpu_per_gpu": [2.500000002625], "mem_gb_per_gpu": [240.74],
                                        "tput": [[2.4]]}}]}


@pytest.mark.parametrize(("method", "formulation"), [("decomposition", None), ("direct", "patterns"),
                                                     ("direct", "servers"), ("direct", "literal")])
def test_the_joints_methods_agree_on_a_server_filled_at_the_slack(method: str, formulation: str | None) -> None:
    # The direct patterns model listed that server's load (its enumeration allowed a further 1e-9 of an item)
    # and proved 2.412; the decomposition's pricing, the other formulations and TUNE keep it out: 2.41.
    options = {} if formulation is None else {"formulation": formulation}
    result = so.solve_joint(so.load_instance(AT_THE_SLACK), method=method, mip_gap=0.0, **options)
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(2.41, abs=1e-12)


def test_near_opt_is_never_below_tune_when_tune_uses_its_packing_slack() -> None:
    # near-opt skipped TUNE because its bound on TUNE (exact capacities, the point not placeable) was 0; TUNE
    # places j0's point within its packing's 1e-9 of a server and gets 0.002 more. The bound now allows that slack.
    # (TUNE is then above the exact ILP: the packing's slack, the modelling choice the xfails below name.)
    instance = so.load_instance(OVER_BY_A_HAIR)
    tune = so.evaluate(instance, so.run_mechanism(instance, "tune")).objective
    assert tune == pytest.approx(SLACK, abs=1e-12)
    assert so.evaluate(instance, so.run_mechanism(instance, "near-opt")).objective >= tune


@pytest.mark.parametrize("cpus", [1e20, 1e300])
def test_servers_of_astronomic_capacity_take_every_job(cpus: float) -> None:
    # The packing's GPUs-that-fit count was cast to int64 before it was capped: 1e20 CPUs over a demand of a few
    # overflowed, and greedy, TUNE, DRF and Tetris placed no job at all (a fuzzed round).
    instance = so.RoundInstance(so.Cluster(2, 4, cpus, 100.0), (so.Job("a", 2, so.builtin_profile("res18")),
                                                                 so.Job("b", 1, so.builtin_profile("transformer"))))
    for name in ("greedy", "tune", "drf", "tetris"):
        evaluation = so.evaluate(instance, so.run_mechanism(instance, name))
        assert evaluation.valid and not evaluation.unplaced, name


@pytest.mark.xfail(strict=True, reason="SPEC 4 (ideal ILP >= joint >= every mechanism's total) fails on a round "
                   "whose grid point sits within the packing's FIT_TOLERANCE (1e-9 of a server) above the share: the "
                   "ILP on the whole model (HiGHS, the default on this round) keeps capacities exactly (0.003), TUNE's "
                   "packing (and the joint's server patterns and the ILP's core search, the same 1e-9) place the "
                   "point (0.005 in all) and the evaluator, at 1e-7, accepts it. Aligning them is a modelling choice "
                   "(every model's rows at the packing's slack, or an exact packing), not made here")
def test_the_exact_ilp_bounds_tune_within_the_packings_slack() -> None:
    instance = so.load_instance(OVER_BY_A_HAIR)
    assert so.evaluate(instance, so.run_mechanism(instance, "tune")).objective <= so.solve_ideal(instance).objective


@pytest.mark.xfail(strict=True, reason="the same slack in the joint's server patterns (the xfail above): 0.005 "
                   "above the exact ILP's 0.003 on the same round")
def test_the_exact_ilp_bounds_the_joint_within_the_packings_slack() -> None:
    instance = so.load_instance(OVER_BY_A_HAIR)
    assert so.solve_joint(instance, mip_gap=0.0).objective <= so.solve_ideal(instance).objective


@pytest.mark.xfail(strict=True, reason="the same slack in the ideal ILP's core search (1e-9 of a row): on this round "
                   "it finds 0.005 where HiGHS on the whole model finds 0.003 (tried at 1e-12 this session: the core "
                   "search then fell below the joint on other rounds)")
def test_the_ideal_ilps_methods_agree_within_the_packings_slack() -> None:
    instance = so.load_instance(OVER_BY_A_HAIR)
    core, direct = (so.solve_ideal(instance, method=method).objective for method in ("core", "direct"))
    assert core == pytest.approx(direct, abs=1e-12)


@pytest.mark.parametrize("name", ["fuzz_cpsat_patterns_round.json", "hand_hetero_6_jobs_round.json"])
def test_cpsat_proves_the_joints_patterns_model_of_small_rounds(name: str) -> None:
    # With CP-SAT's default linearization (1), on a 2-core machine, neither was solved in 5 s (the hand-made round
    # found no solution in 30 s) while HiGHS proves both at once; the backend now sets linearization_level 2.
    if "ortools-cpsat" not in so.available_solvers():
        pytest.skip("ortools-cpsat is not installed")
    instance = so.load_instance(Path(__file__).parent / "data" / name)
    reference = so.solve_joint(instance, mip_gap=0.0)
    result = so.solve_joint(instance, solver="ortools-cpsat", method="direct", time_limit=5, mip_gap=0.0)
    assert result.status is Status.OPTIMAL, result.message
    assert result.objective == pytest.approx(reference.objective, rel=1e-9)


def _one_server_round(gpus: int, cpus: float, mem: float, cpu_axis: list[float], mem_axis: list[float],
                      tput: list[list[float]]) -> so.RoundInstance:
    return so.load_instance({"format": "synergy-round/1", "cluster": {
        "servers": 1, "gpus_per_server": gpus, "cpus_per_server": cpus, "mem_gb_per_server": mem}, "jobs": [
        {"id": "a", "gpus": gpus, "profile": {"cpu_per_gpu": cpu_axis, "mem_gb_per_gpu": mem_axis, "tput": tput}}]})


@pytest.mark.parametrize("instance", [
    # The share (6 CPUs) reads the point 6(1 + 1e-9) above it, worth 1.0: the ILP asked that point's CPUs of a
    # 6-CPU server (INFEASIBLE), TUNE asked them too (DemotionError), greedy placed nothing.
    _one_server_round(1, 6, 500, [5.999999994, 6.0000000060000005], [500], [[0.5], [1.0]]),
    # The share (37 GB) reads the point 37.0000000185 above it: near-opt left that column out as unplaceable,
    # and with it the job's only column (IndexError from the Lagrangian dual).
    _one_server_round(2, 11, 74, [5.5], [37.0000000185], [[3.0]])], ids=["cpu", "mem"])
def test_a_grid_point_a_hair_above_the_share_is_asked_as_the_share(instance: so.RoundInstance) -> None:
    floor = float(instance.floors[0])
    cpu, mem = so.best_case_demands(instance)  # the share, not the hair above it
    assert (cpu[0], mem[0]) == (instance.cluster.cpu_per_gpu, instance.cluster.mem_gb_per_gpu)
    ideal = so.solve_ideal(instance)
    assert ideal.status is Status.OPTIMAL and ideal.objective == floor
    assert so.solve_joint(instance, time_limit=30).objective == floor
    for name in ("proportional", "greedy", "tune", "drf", "tetris", "opt", "near-opt"):
        evaluation = so.evaluate(instance, so.run_mechanism(instance, name))
        assert evaluation.valid and evaluation.objective == floor, name


def test_grid_points_that_read_as_one_are_refused() -> None:
    # 62.5(1 - 5e-10) reads as 62.5(1 + 5e-10): the ILP offered the first point's 2.0, which no allocation gets.
    with pytest.raises(so.InvalidInputError, match=r"mem_gb_per_gpu=.*62\.49999996875 and 62\.50000003125 are "
                       r"within the grid's reading tolerance"):
        so.Profile([3.0], [62.49999996875, 62.50000003125, 125.0], [[2.0, 1.8, 1.6]])
    assert so.Profile([3.0], [62.5, 62.5 * (1 + 3e-9)], [[1.0, 2.0]]).tput.shape == (1, 2)


def test_throughputs_whose_sums_overflow_are_refused() -> None:
    # Two jobs at 1e308 made every total inf and the ideal ILP OPTIMAL at inf.
    with pytest.raises(so.InvalidInputError, match=r"tput\[0\]\[0\]=1e\+308: throughput must be finite, 0 or in "
                       r"\[1e-300, 1e\+100\]"):
        so.Profile([3.0], [62.5], [[1e308]])
    instance = _one_server_round(2, 6, 500, [3.0], [250.0], [[1e100]])
    assert so.solve_ideal(instance).objective == so.evaluate(instance, so.run_mechanism(instance, "tune")).objective


def test_the_joint_proves_no_round_of_tiny_throughputs_optimal_at_zero() -> None:
    # Throughputs near 1e-9: the branch-and-price's cut-off had an absolute 1e-9 of slack, so greedy's 0 met the
    # bound 7.3e-10 and was OPTIMAL (under a time limit, which takes the decomposition's first incumbent).
    instance = so.load_instance({"format": "synergy-round/1", "cluster": {
        "servers": 3, "gpus_per_server": 3, "cpus_per_server": 3, "mem_gb_per_server": 111.0}, "jobs": [
        {"id": "j0", "gpus": 6, "profile": {"cpu_per_gpu": [0.5, 1.0], "mem_gb_per_gpu": [111.0],
                                            "tput": [[5.493629600516507e-10], [8.266281817044265e-10]]}},
        {"id": "j1", "gpus": 3, "profile": {"cpu_per_gpu": [1.2, 3.0], "mem_gb_per_gpu": [9.25, 37.0, 55.5, 74.0],
                                            "tput": [[5.217085917726892e-10, 7.305443486721901e-10,
                                                      9.45650552661895e-10, 1.148330318388538e-09],
                                                     [8.238504888276359e-10, 1.043265496388582e-09,
                                                      1.213024615519598e-09, 1.440251391350651e-09]]}}]})
    exact = so.solve_ideal(instance).objective
    for limit in (None, 30.0):
        result = so.solve_joint(instance, time_limit=limit)
        assert result.status is Status.OPTIMAL and result.objective == pytest.approx(exact, rel=1e-6), limit
