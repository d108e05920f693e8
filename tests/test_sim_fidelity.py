"""The Figure 9 fidelity experiment's plan, table and resumption, and the capacity bounds (issue 19).

The full experiment takes hours; here its runs are planned, tabled from hand-made rows, resumed from their
files without simulating, and one real run of it is made on a short window.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from synergy_opt import Cluster
from synergy_opt.cli.table import write_csv
from synergy_opt.sim import fidelity
from synergy_opt.sim.artifact_trace import fig9_trace
from synergy_opt.sim.capacity import (
    fluid_capacity,
    mean_duration_h,
    mean_gpus,
    model_shares,
    saturated_run,
    saturated_throughput,
    trace_mix,
)
from synergy_opt.sim.cli import main as sim_main
from synergy_opt.sim.fidelity import FIGURE_9, FidelityRun, Plan, Variant, fidelity_runs, fidelity_table, run_plan


def test_the_plan_switches_one_factor_at_a_time() -> None:
    runs = fidelity_runs(seeds=(0, 1))
    keys = [run.key for run in runs]
    assert len(set(keys)) == len(keys)
    figure_9 = [run for run in runs if run.block == FIGURE_9]
    # The artifact's own run: its trace, its accounting, every mechanism, one seed.
    own = [run for run in figure_9 if (run.trace, run.progress) == ("artifact", "artifact")]
    assert {run.variant.label for run in own} == {variant.label for variant in fidelity.VARIANTS}
    assert {run.seed for run in own} == {42}
    # The trace switched alone: generated seeds, the artifact's accounting, every mechanism on every seed.
    switched = [run for run in figure_9 if (run.trace, run.progress) == ("generated", "artifact")]
    assert {(run.variant.label, run.seed) for run in switched} == {
        (variant.label, seed) for variant in fidelity.VARIANTS for seed in (0, 1)}
    assert {run.variant.mechanism for run in runs if run.block != FIGURE_9} >= {"joint", "proportional"}
    assert all(run.block == FIGURE_9 for run in runs[: len(figure_9)])  # the short window's joint runs last


def rows_for(values: dict[tuple[str, str, str, int], float]) -> list[dict[str, object]]:
    return [{"block": FIGURE_9, "variant": variant, "trace": trace, "progress": progress, "seed": seed,
             "avg_jct_h": value} for (variant, trace, progress, seed), value in values.items()]


def test_the_table_gives_means_ranges_and_ratios_to_proportional() -> None:
    rows = rows_for({
        ("proportional", "generated", "exact", 0): 90.0, ("proportional", "generated", "exact", 1): 60.0,
        ("tune, spread", "generated", "exact", 0): 30.0, ("tune, spread", "generated", "exact", 1): 20.0,
        ("proportional", "artifact", "artifact", 42): 81.0886, ("tune-artifact", "artifact", "artifact", 42): 21.8766,
    })
    table = {(row["variant"], row["trace"]): row for row in fidelity_table(rows)}
    spread = table[("tune, spread", "generated")]
    assert spread["mean_avg_jct_h"] == 25.0 and (spread["min_avg_jct_h"], spread["max_avg_jct_h"]) == (20.0, 30.0)
    assert spread["proportional_ratio"] == pytest.approx(75.0 / 25.0)
    assert (spread["min_ratio"], spread["max_ratio"]) == (3.0, 3.0)
    own = table[("tune-artifact", "artifact")]
    assert own["artifact_avg_jct_h"] == pytest.approx(21.8766, abs=1e-4)  # the recorded figure beside ours
    printed, headers = fidelity.printed_rows(fidelity_table(rows))
    assert [key for key, _ in headers][:2] == ["block", "variant"]
    cell = next(row for row in printed if row["variant"] == "tune, spread")["generated/exact"]
    assert cell == "25.00 [20.0-30.0] (3.00x, 3.00-3.00)"


def test_a_recorded_run_is_not_run_again(tmp_path: Path) -> None:
    run = FidelityRun(FIGURE_9, Variant("proportional", "proportional"), "artifact", "artifact")
    folder = tmp_path / "runs"
    folder.mkdir()
    row = {"key": run.key, "block": run.block, "variant": "proportional", "trace": "artifact",
           "progress": "artifact", "seed": 42, "avg_jct_h": 81.0886}
    (folder / f"{run.key}.json").write_text(json.dumps(row))
    assert run_plan(Plan([run], tmp_path)) == [row]  # read back: a real run would take minutes


def test_a_recorded_runs_csv_restores_the_runs_files(tmp_path: Path) -> None:
    run = FidelityRun(FIGURE_9, Variant("proportional", "proportional"), "artifact", "artifact")
    row = {"key": run.key, "block": run.block, "variant": "proportional", "options": "", "trace": "artifact",
           "progress": "artifact", "seed": 42, "avg_jct_h": 81.0886}
    write_csv([row], tmp_path / "recorded.csv", list(row))
    assert fidelity.restore_runs(tmp_path / "recorded.csv", tmp_path / "out") == 1
    assert fidelity.restore_runs(tmp_path / "recorded.csv", tmp_path / "out") == 0  # a run's file is kept
    assert run_plan(Plan([run], tmp_path / "out")) == [row]


def test_a_run_on_a_short_window_writes_its_file_and_matches_simulate(tmp_path: Path) -> None:
    run = FidelityRun("test", Variant("tune, spread", "tune", (("sort", "demand"), ("fit", "spread"))), "artifact",
                      "exact", 42, (0, 3))
    rows = run_plan(Plan([run], tmp_path))
    assert (tmp_path / "runs" / f"{run.key}.json").is_file()
    from synergy_opt.sim import simulate

    direct = simulate(fig9_trace(), Cluster(16), mechanism="tune", monitor=(0, 3), sort="demand", fit="spread")
    assert rows[0]["avg_jct_h"] == pytest.approx(direct.summary["avg_jct_h"])


def test_the_command_line_takes_only_its_own_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert sim_main(["--experiment", "fig9-fidelity", "--load", "3"]) == 2
    assert "fixed setting" in capsys.readouterr().err
    assert sim_main(["--experiment", "list"]) == 0
    assert "fig9-fidelity" in capsys.readouterr().out


# -- capacity ----------------------------------------------------------------------------------------------
def test_proportional_capacity_is_the_gpus_over_the_mean_work() -> None:
    cluster = Cluster(16)
    assert fluid_capacity(cluster, configs="proportional") == pytest.approx(128 / mean_duration_h())
    assert fluid_capacity(cluster, multi_gpu=True, configs="proportional") == pytest.approx(
        128 / (mean_gpus(True) * mean_duration_h()))
    # The generator's mean duration, E[10^x] minutes for its two uniform exponents, derived by hand.
    by_hand = (0.8 * (10**3 - 10**1.5) / (1.5 * np.log(10)) + 0.2 * (10**4 - 10**3) / np.log(10)) / 60
    assert mean_duration_h() == pytest.approx(by_hand, rel=0.005)


def test_more_configs_never_lower_the_bound() -> None:
    cluster = Cluster(16)
    for split in ((20, 70, 10), (50, 0, 50), (0, 100, 0)):
        share, best, grid = (fluid_capacity(cluster, split, configs=c)
                             for c in ("proportional", "best-or-share", "grid"))
        assert share <= best + 1e-9 <= grid + 2e-9
    # Language jobs gain nothing from CPU or memory: an all-language workload runs at the share.
    assert fluid_capacity(cluster, (0, 100, 0), configs="grid") == pytest.approx(
        fluid_capacity(cluster, (0, 100, 0), configs="proportional"))


def test_the_bound_is_the_lp_optimum_checked_by_mixtures_and_by_dual_prices() -> None:
    """One model, one server: no pair of configs mixes to more, and every price vector bounds it (LP duality)."""
    from synergy_opt.profiles import model_info

    cluster = Cluster(1, 8, 24, 500)
    bound = fluid_capacity(cluster, configs="grid", shares={"res18": 1.0}, work_h=1.0)
    profile = model_info("res18").profile
    floor = float(profile.throughput(3, 62.5))
    columns = [(1.0, c, m, float(profile.throughput(c, m)) / floor) for c in profile.cpu_per_gpu
               for m in profile.mem_gb_per_gpu if profile.throughput(c, m) >= floor]
    capacity = np.array([8.0, 24.0, 500.0])
    use = np.array([[g / s, c / s, m / s] for g, c, m, s in columns])  # resource-hours per job at each config
    best_pair = 0.0
    for a in range(len(use)):
        for b in range(len(use)):
            for alpha in np.linspace(0, 1, 41):
                mix = alpha * use[a] + (1 - alpha) * use[b]
                best_pair = max(best_pair, float(np.min(capacity / mix)))
    assert bound >= best_pair - 1e-9
    rng = np.random.default_rng(0)
    for prices in rng.random((200, 3)):
        assert bound <= prices @ capacity / np.min(use @ prices) + 1e-9


def test_a_trace_mix_reads_its_models_work_and_rate() -> None:
    shares, work_h, rate = trace_mix(fig9_trace(), 0, 5000)
    assert shares["alexnet"] == pytest.approx(0.04) and sum(shares.values()) == pytest.approx(1.0)
    assert work_h == pytest.approx(16.357, abs=1e-3) and rate == pytest.approx(9.06, abs=0.01)
    assert model_shares((20, 70, 10))["gnmt"] == pytest.approx(0.7 / 3)


def test_a_saturated_run_finishes_jobs_at_about_the_bound() -> None:
    # Two servers of proportional jobs: the finishing rate under a persistent queue is close to 16 / E[D].
    cluster = Cluster(2)
    rate = saturated_throughput("proportional", cluster, seed=1, load=4.0, warmup_h=100.0, until_h=400.0)
    bound = fluid_capacity(cluster, configs="proportional")
    assert 0.75 * bound < rate < 1.25 * bound
    # Against the finished jobs' own mix the draw's noise is gone: the share runs at 16 GPUs / their work.
    run = saturated_run("proportional", cluster, seed=1, load=4.0, warmup_h=100.0, until_h=400.0)
    assert run.jobs_per_h == rate and sum(run.shares.values()) == pytest.approx(1.0)
    own = fluid_capacity(cluster, configs="proportional", shares=run.shares, work_h=run.work_h)
    assert own == pytest.approx(16 / run.work_h)
    assert 0.9 * own < rate < 1.1 * own
    with pytest.raises(RuntimeError, match="saturate"):
        saturated_throughput("proportional", cluster, seed=1, load=0.2, warmup_h=10.0, until_h=40.0)
