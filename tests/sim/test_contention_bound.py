"""The contention bound: a time-indexed LP that no policy of the project beats, tighter than the no-waiting bound."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym import ClusterSpec, ConfigError, SimulationConfig, Simulator, SyntheticWorkload, Workload, WorkloadError
from synergy_gym.baselines import make_policy, policy_names
from synergy_gym.baselines.env_heuristics import NAMED_HEURISTICS, env_heuristic
from synergy_gym.experiments.evaluation import evaluate
from synergy_gym.sim.bounds import no_wait_jct_s
from synergy_gym.sim.contention_bound import TIME_LIMIT_S, ContentionBound, contention_bound, release_s
from synergy_gym.sim.contention_levels import hull_levels, job_levels, level_rates
from synergy_gym.sim.contention_lp import PeriodGrid, build_lp, dual_bound
from synergy_gym.sim.job_table import JobTable

REL = 1e-9  # floating tolerance on a mean JCT


def all_jobs_mean_s(sim: Simulator) -> float:
    finish = sim.jobs.finish_s
    assert not np.isnan(finish).any(), "every job must finish for its mean to be compared with the bound"
    return float(np.mean(finish - sim.jobs.arrival_s))


def boundary_s(k: int, round_s: float) -> float:
    """Round boundary ``k`` as the simulator's clock reaches it stepping one round at a time: a running sum."""
    t = 0.0
    for _ in range(k):
        t += round_s
    return t


@st.composite
def small_cases(draw):
    gpus_per_server = draw(st.sampled_from([2, 4, 8]))
    # Under 1 CPU and 20.83 GB a GPU the fair share is below the grid's lowest level (the bound's level-0 floor).
    cluster = ClusterSpec(
        num_servers=draw(st.integers(1, 2)),
        gpus_per_server=gpus_per_server,
        cpus_per_server=gpus_per_server * draw(st.sampled_from([0.5, 0.75, 1.5, 2.0, 3.0, 4.0])),
        mem_gb_per_server=gpus_per_server * draw(st.sampled_from([12.5, 20.0, 31.25, 62.5, 125.0])),
    )
    multigpu = draw(st.booleans())
    workload = SyntheticWorkload(
        jobs_per_hour=draw(st.sampled_from([1.0, 3.0, 8.0])), seed=draw(st.integers(0, 10_000)),
        num_jobs=draw(st.integers(2, 12)), multigpu=multigpu, max_gpus=cluster.total_gpus,
        short_job_fraction=1.0, class_split=draw(st.sampled_from([(20.0, 70.0, 10.0), (60.0, 20.0, 20.0)])),
    ).build()
    timing = draw(st.sampled_from(["round", "exact"]))
    round_s = draw(st.sampled_from([300.0, 437.1, 617.3]))
    # Some arrivals moved onto a round boundary as a float: a running sum of rounds (3 · 123.4 / 123.4 > 3) or a product.
    on_boundary = draw(st.lists(st.sampled_from(["keep", "sum", "product"]), min_size=len(workload),
                                max_size=len(workload)))
    arrival = [a if how == "keep" else boundary_s(int(a // round_s), round_s) if how == "sum"
               else int(a // round_s) * round_s for a, how in zip(workload.arrival_s.tolist(), on_boundary)]
    workload = Workload.build(workload.zoo, job_id=workload.job_id, model=workload.model, gpus=workload.gpus,
                              arrival_s=arrival, total_iters=workload.total_iters, iter_time_s=workload.iter_time_s,
                              run_until="all")
    return cluster, workload, timing, round_s, draw(st.sampled_from(policy_names()))


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # starved clusters run longer
@given(small_cases())
def test_no_simulator_policy_beats_the_bound(case):
    cluster, workload, timing, round_s, policy = case
    bound = contention_bound(workload, cluster, round_s=round_s, timing=timing)
    config = SimulationConfig(round_s=round_s, timing=timing, record_rounds=False)
    sim = Simulator(cluster, workload, make_policy(policy), config)
    sim.run()
    assert all_jobs_mean_s(sim) >= bound.mean_jct_s * (1 - REL), (policy, timing, round_s)
    if timing == "round":
        assert bound.mean_jct_s >= float(no_wait_jct_s(workload, cluster, round_s=round_s).mean()) * (1 - REL)


def gang_workload(gpus: list[int], seed: int = 5, jobs_per_hour: float = 6.0) -> Workload:
    """A synthetic workload's jobs with the given GPU counts."""
    w = SyntheticWorkload(jobs_per_hour=jobs_per_hour, seed=seed, num_jobs=len(gpus), short_job_fraction=1.0).build()
    return Workload.build(w.zoo, job_id=w.job_id, model=w.model, gpus=gpus, arrival_s=w.arrival_s,
                          total_iters=w.total_iters, iter_time_s=w.iter_time_s, run_until="all")


@pytest.mark.parametrize("timing", ["round", "exact"])
def test_a_few_policies_on_a_busy_multi_gpu_workload(timing):
    # The quick subset's share of the property above: a contended cluster, jobs of 1 to 8 GPUs.
    cluster = ClusterSpec(num_servers=2, gpus_per_server=4, cpus_per_server=8.0, mem_gb_per_server=250.0)
    workload = gang_workload([1, 2, 4, 1, 8, 1, 2, 1, 1, 4, 1, 2, 1, 1])
    bound = contention_bound(workload, cluster, timing=timing)
    assert bound.mean_jct_s > float(no_wait_jct_s(workload, cluster).mean())
    for policy in ("fifo+tune", "srtf+greedy", "las+fair", "ftf+tune", "tetris+opt_lp"):
        sim = Simulator(cluster, workload, make_policy(policy), SimulationConfig(timing=timing, record_rounds=False))
        sim.run()
        assert all_jobs_mean_s(sim) >= bound.mean_jct_s * (1 - REL), policy


ENV_MODES = [{}, {"preemptive": True, "redecide": "changes"}, {"preemptive": True, "redecide": "every_event"}]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ENV_MODES, ids=["default", "changes", "every_event"])
def test_no_env_heuristic_beats_the_bound(mode):
    kwargs = {"num_jobs": 30, **mode}
    env = gym.make("Synergy-small-scarce-v0", **kwargs)
    base = env.unwrapped
    seeds = [3, 11]
    bounds = {}
    for seed in seeds:
        workload = base.workload_for_seed(seed)  # the jobs of reset(options={"workload_seed": seed})
        bounds[seed] = contention_bound(workload, base.cluster, round_s=base.sim_config.round_s,
                                        timing=base.sim_config.timing).mean_jct_h
    env.close()
    for name in NAMED_HEURISTICS:
        rows = evaluate(env_heuristic(name, 0), "Synergy-small-scarce-v0", seeds, name=name, **kwargs)
        for row in rows.itertuples():
            assert row.terminated, (name, row.seed)  # a truncated episode's mean is not a JCT
            assert row.mean_jct_h >= bounds[row.seed] * (1 - REL), (name, row.seed, mode)


@pytest.mark.slow
def test_env_episodes_with_exact_timing_do_not_beat_the_bound():
    kwargs = {"num_jobs": 20, "timing": "exact", "preemptive": True}
    env = gym.make("Synergy-small-scarce-v0", **kwargs)
    base = env.unwrapped
    bound = contention_bound(base.workload_for_seed(5), base.cluster, timing="exact")
    env.close()
    for name in ("srtf+tune", "tetris+greedy", "tetris+greedy+readmit", "srtf+price"):
        row = evaluate(env_heuristic(name, 0), "Synergy-small-scarce-v0", [5], name=name, **kwargs).iloc[0]
        assert row["terminated"] and row["mean_jct_h"] >= bound.mean_jct_h * (1 - REL), name


def test_the_bound_counts_contention():
    # A busy cluster short of CPUs: jobs must wait or run slower, which the no-waiting bound ignores.
    cluster = ClusterSpec(num_servers=1, gpus_per_server=8, cpus_per_server=12.0)
    workload = SyntheticWorkload(jobs_per_hour=8.0, seed=1, num_jobs=40, class_split=(60.0, 20.0, 20.0)).build()
    bound = contention_bound(workload, cluster)
    no_wait = float(no_wait_jct_s(workload, cluster).mean())
    assert isinstance(bound, ContentionBound)
    assert bound.mean_jct_s > 1.1 * no_wait
    assert bound.mean_jct_h == pytest.approx(bound.mean_jct_s / 3600.0)
    assert bound.tail_share == pytest.approx(0.0, abs=1e-6)  # the default horizon does not bind here
    assert bound.solve_s > 0 and 1 <= bound.periods <= 120 and bound.period_s % 300.0 == 0
    best = min(all_jobs_mean_s(_run(cluster, workload, p)) for p in ("srtf+tune", "tetris+greedy", "las+fair"))
    assert no_wait < bound.mean_jct_s <= best * (1 + REL)


def _run(cluster: ClusterSpec, workload, policy: str) -> Simulator:
    sim = Simulator(cluster, workload, make_policy(policy), SimulationConfig(record_rounds=False))
    sim.run()
    return sim


def test_a_lone_job_is_bounded_by_its_run_alone(make_workload):
    w = make_workload(["alexnet"], arrivals=[100.0], iters=[10_000])
    bound = contention_bound(w, ClusterSpec())
    # As the no-waiting bound: from the boundary at 300 s, ceil(10,000 / 1,470) rounds at its demand.
    assert bound.mean_jct_s == pytest.approx(float(no_wait_jct_s(w, ClusterSpec())[0]), rel=1e-9)


def test_shorter_periods_and_longer_horizons_stay_bounds():
    cluster = ClusterSpec(num_servers=1, gpus_per_server=4, cpus_per_server=8.0)
    workload = SyntheticWorkload(jobs_per_hour=4.0, seed=2, num_jobs=20, short_job_fraction=1.0).build()
    best = all_jobs_mean_s(_run(cluster, workload, "srtf+tune"))
    coarse = contention_bound(workload, cluster, max_periods=4)
    fine = contention_bound(workload, cluster, period_s=1800.0)
    short = contention_bound(workload, cluster, horizon_s=3600.0)  # most work in the tail: valid, loose
    assert fine.period_s == 1800.0 and coarse.periods <= 4
    assert short.tail_share > 0.5
    for b in (coarse, fine, short):
        assert b.mean_jct_s <= best * (1 + REL)
    assert fine.mean_jct_s >= coarse.mean_jct_s - 1.0  # finer periods are (almost always) tighter


def test_the_dual_bound_is_the_lp_optimum():
    # HiGHS's duals, turned into a Lagrangian bound, give the LP's optimum (so no tightness is lost to it).
    cluster = ClusterSpec(num_servers=1, gpus_per_server=4, cpus_per_server=8.0)
    workload = SyntheticWorkload(jobs_per_hour=6.0, seed=4, num_jobs=15, multigpu=True, max_gpus=4).build()
    jobs = JobTable(cluster, workload)
    levels = job_levels(jobs, cluster, 300.0, "round")
    release = release_s(jobs.arrival_s, 300.0, "round")
    alone = release + 300.0  # any valid lower bounds will do here
    grid = PeriodGrid(np.arange(release.min(), release.max() + 40 * 3600.0, 3 * 3600.0))
    lp = build_lp(levels, cluster, jobs.gpus, jobs.total_iters, release, alone, grid)
    res = linprog(lp.cost, A_ub=lp.a_ub, b_ub=lp.b_ub, A_eq=lp.a_eq, b_eq=lp.b_eq, bounds=lp.bounds, method="highs")
    assert res.status == 0
    bound = dual_bound(lp, -res.ineqlin.marginals, -res.eqlin.marginals)
    assert bound == pytest.approx(res.fun, rel=1e-7)
    assert bound <= res.fun + 1e-9 * abs(res.fun)
    # Any multipliers give a bound; zero ones the variables' lower bounds alone.
    zero = dual_bound(lp, np.zeros(lp.b_ub.size), np.zeros(lp.b_eq.size))
    assert zero == pytest.approx(float(np.sum(alone)) / 3600.0) and zero < bound


def test_round_rates_are_the_simulators_credits():
    # lstm: 0.011 s an iteration at throughput 1 → floor(300 / 0.011) = 27,272 iterations a round.
    assert level_rates(np.array([1.0, 0.0]), 0.011, 300.0, "round").tolist() == [27_272 / 300.0, 0.0]
    assert level_rates(np.array([2.0]), 0.5, 300.0, "exact").tolist() == [4.0]


def test_dominated_levels_are_dropped_and_the_hull_kept():
    rate = np.array([1.0, 2.0, 1.5, 1.0, 2.0])
    cpu = np.array([1.0, 3.0, 2.0, 1.0, 4.0])
    mem = np.array([1.0, 1.0, 1.0, 2.0, 1.0])
    kept = hull_levels(rate, cpu, mem)
    # (1.5, 2 CPUs) is the mean of (1, 1) and (2, 3); (1, 1 CPU, 2 GB) and (2, 4 CPUs) are beaten outright.
    assert [tuple(map(float, k)) for k in zip(*kept)] == [(1.0, 1.0, 1.0), (2.0, 3.0, 1.0)]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"round_s": 0}, ConfigError, "round_s must be a positive number of seconds, got 0"),
        ({"timing": "fast"}, ConfigError, "timing must be one of round, exact, got 'fast'"),
        ({"period_s": -5.0}, ConfigError, "period_s must be a positive number of seconds, got -5.0"),
        ({"horizon_s": float("nan")}, ConfigError, "horizon_s must be a positive number of seconds, got nan"),
        ({"max_periods": 2.5}, ConfigError, "max_periods must be a positive integer, got 2.5"),
        ({"max_periods": 20_000}, ConfigError, "max_periods must be at most 10,000, got 20000"),
        ({"period_s": 0.001}, ConfigError, "period_s=0.001 gives more than 10,000 periods over the"),
        # Beyond TIME_LIMIT_S HiGHS failed (1e9: status 4 on some workloads, 1e12 on: "Model error"): a ConfigError.
        ({"horizon_s": 1e9}, ConfigError, "horizon_s must be at most 1e+08 seconds (about 3.2 years; HiGHS cannot "
                                          "solve the LP reliably beyond), got 1e+09"),
        ({"horizon_s": 1e12}, ConfigError, "horizon_s must be at most 1e+08 seconds"),
        ({"period_s": 1e18}, ConfigError, "period_s must be at most 1e+08 seconds (about 3.2 years; HiGHS cannot "
                                          "solve the LP reliably beyond), got 1e+18"),
    ],
)
def test_bad_settings_are_one_line_errors(make_workload, kwargs, error, message):
    w = make_workload(["gnmt"], arrivals=[0.0], iters=[100_000])
    with pytest.raises(error, match=re.escape(message)) as info:
        contention_bound(w, ClusterSpec(), **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("model", ["alexnet", "gnmt"])
def test_the_longest_horizon_and_period_solve_for_a_job_of_one_iteration(make_workload, model):
    # HiGHS's default run ended without an answer (status 4) on these at TIME_LIMIT_S; without presolve it solves them.
    w = make_workload([model], arrivals=[839.86], iters=[1])
    alone = float(no_wait_jct_s(w, ClusterSpec())[0])  # from the boundary at 900 s, one round: 360.14 s
    for kwargs in ({"horizon_s": TIME_LIMIT_S}, {"period_s": TIME_LIMIT_S}, {"horizon_s": TIME_LIMIT_S, "period_s": 1e5}):
        bound = contention_bound(w, ClusterSpec(), **kwargs)
        assert bound.mean_jct_s == pytest.approx(alone, rel=1e-9), kwargs


def test_bad_inputs_are_one_line_errors(make_workload):
    w = make_workload(["gnmt"], arrivals=[0.0], iters=[10], gpus=[16])
    with pytest.raises(WorkloadError, match="16"):
        contention_bound(w, ClusterSpec(num_servers=1))  # 16 GPUs on an 8-GPU cluster
    with pytest.raises(WorkloadError, match="workload must be a Workload, got list"):
        contention_bound([1, 2], ClusterSpec())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cluster must be a ClusterSpec, got str"):
        contention_bound(make_workload(["gnmt"], arrivals=[0.0], iters=[10]), "small")  # type: ignore[arg-type]
    slow = make_workload(["gnmt"], arrivals=[0.0], iters=[10], iter_time_s=[400.0])
    with pytest.raises(WorkloadError, match="iter_time_s=400 is too long to finish an iteration in a 300 s round"):
        contention_bound(slow, ClusterSpec())
    assert contention_bound(slow, ClusterSpec(), timing="exact").mean_jct_s == pytest.approx(10 * 400.0, rel=1e-9)
