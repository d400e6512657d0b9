"""Optimistic profiling: the estimator and the 'profiled' sensitivity end to end."""

import json

import numpy as np
import pytest

from synergy_gym import ClusterSpec, ConfigError, SimulationConfig, Simulator
from synergy_gym.baselines import make_policy
from synergy_gym.sim.profiling import ProfilerConfig, model_estimate, profile_jobs, storage_bound

CLUSTER = ClusterSpec()


def _profile(zoo, model_name, config, job_id=0, gpus=1):
    m = zoo.index(model_name)
    p = profile_jobs(zoo, np.array([m]), np.array([gpus]), np.array([job_id]), CLUSTER, config)
    return p.matrices[0], p.demand_cpu[0], p.demand_mem[0], p.cost_gpu_min[0]


@pytest.mark.parametrize("model", ["alexnet", "res18", "res50", "mobilenet", "shufflenet", "gnmt", "lstm", "m5", "deepspeech"])
def test_noiseless_dense_profiling_recovers_the_matrix_where_the_model_holds(zoo, model):
    truth = zoo[zoo.index(model)].tput
    profile = zoo[zoo.index(model)]
    est, _, _, _ = _profile(zoo, model, ProfilerConfig())
    follows = np.abs(model_estimate(profile, truth[:, -1], CLUSTER) - truth) <= 0.02 * truth
    assert follows.mean() > 0.8  # the CPU/storage model describes most of every matrix
    np.testing.assert_allclose(est[follows], truth[follows], rtol=0.02)


def test_noisy_estimates_average_to_the_noiseless_one(zoo):
    clean, *_ = _profile(zoo, "alexnet", ProfilerConfig())
    noisy = np.mean([_profile(zoo, "alexnet", ProfilerConfig(noise=0.05, seed=s))[0] for s in range(50)], axis=0)
    np.testing.assert_allclose(noisy, clean, rtol=0.02)
    one, two = (_profile(zoo, "alexnet", ProfilerConfig(noise=0.05, seed=s))[0] for s in (1, 2))
    assert not np.array_equal(one, two)
    assert np.array_equal(one, _profile(zoo, "alexnet", ProfilerConfig(noise=0.05, seed=1))[0])  # seeded


def test_estimated_demand_and_cost(zoo):
    _, cpu, mem, cost = _profile(zoo, "alexnet", ProfilerConfig())
    assert (cpu, mem) == (12.0, 125.0)  # the measured best case
    _, cpu, mem, _ = _profile(zoo, "gnmt", ProfilerConfig())
    assert (cpu, mem) == (1.0, pytest.approx(20.83))
    _, cpu, mem, _ = _profile(zoo, "m5", ProfilerConfig())
    assert (cpu, mem) == (6.0, 125.0)  # the linear cache model under-estimates m5's memory need
    _, _, _, cost = _profile(zoo, "res18", ProfilerConfig(repeats=3, seconds_per_point=20, cpu_points=(1, 3, 6, 12)), gpus=2)
    assert cost == pytest.approx(4 * 3 * 20 * 2 / 60)


def test_storage_bound_follows_the_cache_hit_rate(zoo):
    alexnet = zoo[zoo.index("alexnet")]
    s = storage_bound(alexnet, np.array([0.0, 32.35, 64.7, 200.0]), CLUSTER)
    per_gpu_bw = 500 / 8
    assert s[0] == pytest.approx(per_gpu_bw / alexnet.read_mb_s_at_fair)
    assert s[1] == pytest.approx(2 * s[0])
    assert np.isinf(s[2]) and np.isinf(s[3])
    assert storage_bound(alexnet, np.array([0.0]), ClusterSpec(storage_mb_s_per_server=1000))[0] == pytest.approx(2 * s[0])


def test_bad_profiler_settings():
    with pytest.raises(ConfigError, match="profile noise must be in"):
        ProfilerConfig(noise=-0.1)
    with pytest.raises(ConfigError, match="profile repeats must be a positive integer"):
        ProfilerConfig(repeats=0)
    for seed in (-1, 1.5, "3"):  # numpy's own error came from inside the simulator's construction
        with pytest.raises(ConfigError, match="profile seed must be a non-negative integer"):
            ProfilerConfig(seed=seed)
    for points in ((float("nan"),), (True,), (), (1.0, -2.0)):  # NaN used to be accepted, and changed the results
        with pytest.raises(ConfigError, match="cpu_points must be positive CPU counts"):
            ProfilerConfig(cpu_points=points)
    assert ProfilerConfig(seed=3.0).seed == 3 and isinstance(ProfilerConfig(seed=3.0).seed, int)
    for points in (np.array([1, 2, 4]), (np.int64(2), np.float32(3.5)), (1, 2.5)):  # numpy's numbers are numbers
        assert ProfilerConfig(cpu_points=tuple(points)).cpu_points == tuple(points)


def test_profiled_sensitivity_runs_end_to_end_with_true_progress(make_workload):
    w = make_workload(["alexnet", "gnmt", "m5", "res18"] * 6, arrivals=np.arange(24) * 900.0, iters=[20000] * 24)
    cluster = ClusterSpec(num_servers=1)
    true = Simulator(cluster, w, make_policy("fifo+tune")).run()
    cfg = SimulationConfig(sensitivity="profiled", profiler=ProfilerConfig(noise=0.05, seed=3))
    sim = Simulator(cluster, w, make_policy("fifo+tune"), cfg)
    seen = []
    sim.observer = lambda s, placed, tput: seen.append(
        np.allclose(tput, s.jobs.true_throughput_many(placed, np.array(s.ledger.cpu), np.array(s.ledger.mem))))
    profiled = sim.run()
    assert profiled.jobs["finish_s"].notna().all() and all(seen)
    assert profiled.summary.sensitivity == "profiled" and profiled.summary.profiling_gpu_min_per_job > 0
    assert true.summary.profiling_gpu_min_per_job == 0
    m5 = sim.jobs.model == sim.jobs.zoo.index("m5")
    assert np.all(sim.jobs.target_mem[m5] == 125.0)  # policies see the estimate …
    assert not profiled.jobs["jct_s"].equals(true.jobs["jct_s"])  # … and it changes the schedule


def test_compare_reports_true_and_profiled_side_by_side(tmp_path):
    from synergy_gym.cli import main

    js = tmp_path / "r.json"
    assert main(["compare", "--quiet", "--jobs", "60", "--load", "30", "--policies", "fifo+tune,fifo+opt",
                 "--sensitivity", "true,profiled", "--profile-noise", "0.05", "--out", str(tmp_path / "o"),
                 "--json", str(js)]) == 0
    rows = json.loads(js.read_text())["results"]
    assert {(r["policy"], r["sensitivity"]) for r in rows} == {
        (p, s) for p in ("fifo+tune", "fifo+opt") for s in ("true", "profiled")
    }
    assert all((r["profiling_gpu_min_per_job"] > 0) == (r["sensitivity"] == "profiled") for r in rows)


def test_a_model_storage_bound_at_every_memory_level_asks_for_the_fastest(zoo):
    # Nothing reached 95 % of the CPU-bound throughput: argmax of all-False chose the lowest (slowest) memory level.
    import dataclasses

    from synergy_gym import ModelZoo

    big = dataclasses.replace(zoo["res50"], name="bigdata", dataset_gb_per_gpu=400.0)
    custom = ModelZoo((*zoo.models, big))
    profiles = profile_jobs(custom, np.array([len(custom) - 1]), np.array([1]), np.array([0]), ClusterSpec(),
                            ProfilerConfig())
    row = profiles.matrices[0][list(custom.cpu_grid).index(profiles.demand_cpu[0])]
    assert profiles.demand_mem[0] == custom.mem_grid[int(np.argmax(row))] == custom.mem_grid[-1]


def test_a_job_that_could_never_progress_at_what_profiling_asks_for_is_refused(zoo):
    # Believed fine at 20.83 GB (its dataset fits), truly at throughput 0 there: a ZeroDivisionError deep inside.
    import dataclasses

    from synergy_gym import ModelZoo, WorkloadError
    from synergy_gym.sim.workload import Workload

    tput = zoo["gnmt"].tput.copy()
    tput[:, 0] = 0.0
    custom = ModelZoo((*zoo.models, dataclasses.replace(zoo["gnmt"], name="needs_mem", tput=tput,
                                                        demand_mem_gb_per_gpu=62.5)))
    w = Workload.build(custom, job_id=[0], model=[len(custom) - 1], gpus=[1], arrival_s=[0], total_iters=[3000])
    assert Simulator(ClusterSpec(), w, make_policy("fifo+tune")).run().summary.mean_jct_h > 0  # true: it runs
    with pytest.raises(WorkloadError, match="job 0: model 'needs_mem' has throughput 0 at its slowest allocation"):
        Simulator(ClusterSpec(), w, make_policy("fifo+tune"), SimulationConfig(sensitivity="profiled"))
