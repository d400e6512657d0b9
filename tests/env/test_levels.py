"""Allocation levels: fair, demand, and the cheapest points that reach fractions of the demand's speed-up."""

import numpy as np
import pytest

from synergy_gym import ClusterSpec, ConfigError, ModelZoo, SyntheticWorkload, UnknownNameError
from synergy_gym.env.levels import (
    DEFAULT_FRACTIONS,
    DEMAND_LEVEL,
    FAIR_LEVEL,
    GridPoints,
    LevelTable,
    allocation_levels,
    honourable_points,
    level_count,
)
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.profiling import ProfilerConfig

ZOO = ModelZoo.default()
CLUSTERS = [ClusterSpec(), ClusterSpec(cpus_per_server=12), ClusterSpec(cpus_per_server=16, mem_gb_per_server=250)]


@pytest.mark.parametrize("cluster", CLUSTERS, ids=["24cpu", "12cpu", "16cpu-250gb"])
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_default_levels_are_fair_demand_and_the_cheapest_adequate_points(cluster, gpus):
    n_mem = len(ZOO.mem_grid)
    cpu = np.repeat(ZOO.cpu_grid, n_mem)
    mem = np.tile(ZOO.mem_grid, len(ZOO.cpu_grid))
    per_server = min(gpus, cluster.gpus_per_server)
    for model in range(len(ZOO)):
        levels = allocation_levels(ZOO, cluster, model, gpus)
        assert len(levels) == 2 + len(DEFAULT_FRACTIONS)
        fair, demand = levels[0], levels[1]
        f = ZOO.throughput_of(model, cluster.fair_cpus_per_gpu, cluster.fair_mem_gb_per_gpu)
        assert (fair.cpus_per_gpu, fair.mem_gb_per_gpu) == (cluster.fair_cpus_per_gpu, cluster.fair_mem_gb_per_gpu)
        assert fair.tput == f
        assert all(level.tput >= fair.tput - 1e-12 for level in levels)  # never below the fair share
        for level in levels:  # every level fits one server for the job's GPUs
            assert per_server * level.cpus_per_gpu <= cluster.cpus_per_server + 1e-9
            assert per_server * level.mem_gb_per_gpu <= cluster.mem_gb_per_server + 1e-9
        tput = ZOO.throughput_many(np.full(cpu.size, model), cpu, mem)
        models = np.full(cpu.size, model)
        capped = ZOO.throughput_many(models, np.minimum(cpu, fair.cpus_per_gpu), np.minimum(mem, fair.mem_gb_per_gpu))
        ok = (tput >= f - 1e-12) & (capped >= f - 1e-12) & (per_server * cpu <= cluster.cpus_per_server + 1e-9) & (
            per_server * mem <= cluster.mem_gb_per_server + 1e-9)
        cost = cpu / cluster.cpus_per_server + mem / cluster.mem_gb_per_server
        for p, level in zip(DEFAULT_FRACTIONS, levels[2:]):
            need = f + p * (max(demand.tput, f) - f)
            adequate = ok & (tput >= need - 1e-12)
            if not adequate.any():
                continue
            assert level.tput >= need - 1e-12
            level_cost = level.cpus_per_gpu / cluster.cpus_per_server + level.mem_gb_per_gpu / cluster.mem_gb_per_server
            assert level_cost == pytest.approx(cost[adequate].min())


def test_levels_grow_cheaper_as_the_fraction_falls():
    model = ZOO.index("alexnet")
    levels = allocation_levels(ZOO, ClusterSpec(), model, 1)
    costs = [lv.cpus_per_gpu / 24 + lv.mem_gb_per_gpu / 500 for lv in levels[2:]]
    assert costs == sorted(costs, reverse=True) and costs[0] > costs[-1]
    assert levels[4].tput < levels[1].tput  # p = 0.5 gives up speed for resources


def test_grid_levels_and_unknown_kinds():
    grid = allocation_levels(ZOO, ClusterSpec(), 0, 1, kind="grid")
    assert len(grid) == len(ZOO.cpu_grid) * len(ZOO.mem_grid)
    assert (grid[7].cpus_per_gpu, grid[7].mem_gb_per_gpu) == (float(ZOO.cpu_grid[1]), float(ZOO.mem_grid[2]))
    with pytest.raises(UnknownNameError, match="unknown levels 'some'"):
        allocation_levels(ZOO, ClusterSpec(), 0, 1, kind="some")


# -- LevelTable: every job of an episode at once ------------------------------------------------

def _jobs(cluster, seed=0, n=120, profiler=None):
    w = SyntheticWorkload(jobs_per_hour=3, seed=seed, num_jobs=n, multigpu=True, max_gpus=cluster.total_gpus).build()
    return JobTable(cluster, w, profiler)


@pytest.mark.parametrize("cluster", CLUSTERS, ids=["24cpu", "12cpu", "16cpu-250gb"])
def test_level_table_rows_are_each_jobs_allocation_levels(cluster):
    jobs = _jobs(cluster)
    table = LevelTable(ZOO, cluster)
    cpu, mem, tput, valid = table.build(jobs)
    assert cpu.shape == mem.shape == tput.shape == valid.shape == (jobs.n, level_count(ZOO, "default")) == (jobs.n, 5)
    assert valid.all()  # default levels are always valid
    for j in range(jobs.n):
        levels = allocation_levels(ZOO, cluster, int(jobs.model[j]), int(jobs.gpus[j]))
        assert cpu[j].tolist() == [lv.cpus_per_gpu for lv in levels]
        assert mem[j].tolist() == [lv.mem_gb_per_gpu for lv in levels]
        assert tput[j].tolist() == pytest.approx([lv.tput for lv in levels], rel=1e-12)
    # The demand level is exactly what Tune asks for; the fair level is the fair share.
    np.testing.assert_array_equal(cpu[:, DEMAND_LEVEL], jobs.target_cpu)
    np.testing.assert_array_equal(mem[:, DEMAND_LEVEL], jobs.target_mem)
    np.testing.assert_array_equal(tput[:, DEMAND_LEVEL], jobs.tput_target)
    assert (cpu[:, FAIR_LEVEL] == cluster.fair_cpus_per_gpu).all()
    assert (mem[:, FAIR_LEVEL] == cluster.fair_mem_gb_per_gpu).all()
    np.testing.assert_array_equal(tput[:, FAIR_LEVEL], jobs.tput_fair)
    assert (tput >= jobs.tput_fair[:, None] - 1e-12).all()  # no level below the fair share
    # Built again (from the cache) it is the same.
    again = table.build(jobs)
    for a, b in zip((cpu, mem, tput, valid), again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cluster", CLUSTERS[:2], ids=["24cpu", "12cpu"])
def test_grid_level_table_marks_the_honourable_points(cluster):
    jobs = _jobs(cluster, seed=1)
    cpu, mem, tput, valid = LevelTable(ZOO, cluster, "grid").build(jobs)
    grid = GridPoints(ZOO)
    assert cpu.shape == (jobs.n, 45)
    for j in range(jobs.n):
        np.testing.assert_array_equal(cpu[j], grid.cpu)
        np.testing.assert_array_equal(mem[j], grid.mem)
        m = np.full(45, jobs.model[j])
        t = ZOO.throughput_many(m, grid.cpu, grid.mem)
        fair_cpu, fair_mem = cluster.fair_cpus_per_gpu, cluster.fair_mem_gb_per_gpu
        capped = ZOO.throughput_many(m, np.minimum(grid.cpu, fair_cpu), np.minimum(grid.mem, fair_mem))
        np.testing.assert_allclose(tput[j], t, rtol=1e-12)
        want = honourable_points(cluster, grid.cpu, grid.mem, t, capped, jobs.tput_fair[j], int(jobs.gpus[j]))
        np.testing.assert_array_equal(valid[j], want)
    assert (tput[valid] >= np.broadcast_to(jobs.tput_fair[:, None], tput.shape)[valid] - 1e-12).all()
    assert valid.any(axis=1).all() and not valid.all()


def test_profiled_level_tables_follow_each_jobs_estimate():
    cluster = CLUSTERS[1]
    jobs = _jobs(cluster, seed=2, n=60, profiler=ProfilerConfig(noise=0.2, seed=5))
    assert jobs.belief is not None
    for kind in ("default", "grid"):
        cpu, mem, tput, valid = LevelTable(ZOO, cluster, kind).build(jobs)
        for j in range(jobs.n):
            est = jobs.est_throughput_many(np.full(cpu.shape[1], j), cpu[j], mem[j])
            np.testing.assert_allclose(tput[j], est, rtol=1e-12)  # the belief, not the measured matrix
        assert (tput[valid] >= np.broadcast_to(jobs.tput_fair[:, None], tput.shape)[valid] - 1e-12).all()
        if kind == "default":
            np.testing.assert_array_equal(cpu[:, DEMAND_LEVEL], jobs.target_cpu)
            np.testing.assert_array_equal(tput[:, DEMAND_LEVEL], jobs.tput_target)
    # Two jobs of the same model and GPUs may get different levels from different estimates.
    cpu, _, _, _ = LevelTable(ZOO, cluster).build(jobs)
    same = {}
    differ = False
    for j in range(jobs.n):
        key = (int(jobs.model[j]), int(jobs.gpus[j]))
        if key in same and not np.array_equal(same[key], cpu[j]):
            differ = True
        same.setdefault(key, cpu[j])
    assert differ


def test_level_table_uses_the_targets_when_built():
    cluster = CLUSTERS[0]
    jobs = _jobs(cluster, n=10)
    jobs.set_target(0, 6.0, 125.0)
    cpu, mem, _, _ = LevelTable(ZOO, cluster).build(jobs)
    assert (cpu[0, DEMAND_LEVEL], mem[0, DEMAND_LEVEL]) == (6.0, 125.0)


def test_a_job_no_grid_level_fits_is_refused_when_the_env_is_made_not_left_waiting_forever(tmp_path):
    # 8 GPUs with 160 GB: 20 GB per GPU, below the grid's lowest memory point, so an 8-GPU job fits no grid
    # point on one server; on the grid it could never be admitted (the episode ran to max_rounds).
    import gymnasium as gym

    import synergy_gym  # noqa: F401  (registers the environments)
    from synergy_gym import ModelZoo, Workload
    from synergy_gym.env.source import FixedWorkload, GeneratedWorkloads

    cluster = {"num_servers": 2, "gpus_per_server": 8, "cpus_per_server": 24, "mem_gb_per_server": 160}
    kw = dict(cluster=cluster, num_jobs=20, multigpu=True)
    gym.make("Synergy-v0", levels="default", **kw).reset(seed=0, options={"workload_seed": 0})
    where = r"has no grid level .* one server \(24 CPUs, 160 GB\) for its 8 GPUs there; use levels='default'"
    with pytest.raises(ConfigError, match=rf"^env kwarg levels='grid': a job of 8 GPUs \(alexnet; the generator draws "
                                          rf"such jobs with multigpu=True\) {where}"):
        gym.make("Synergy-v0", levels="grid", **kw)
    with pytest.raises(ConfigError, match=r"a job of 8 GPUs \(gnmt; "):  # a model the split can draw
        gym.make("Synergy-v0", levels="grid", class_split=(0, 100, 0), **kw)
    zoo = ModelZoo.default()
    jobs = Workload.build(zoo, job_id=[7, 8, 9], model=[zoo.index("gnmt")] * 3, gpus=[1, 8, 8], arrival_s=[0, 10, 20],
                          total_iters=[1000] * 3, run_until="all")
    with pytest.raises(ConfigError, match=rf"^env kwarg levels='grid': job 8 \(gnmt, 8 GPUs\) {where}"):
        gym.make("Synergy-v0", levels="grid", cluster=cluster, workload=jobs)
    single = gym.make("Synergy-v0", levels="grid", **{**kw, "multigpu": False})  # one GPU a job fits
    single.reset(seed=0, options={"workload_seed": 0})
    assert single.unwrapped.state.level_valid.any(axis=1).all()

    # A source of its own is known only at each reset: there its jobs are checked.
    class Source:
        seeded = False

        def workload(self, seed):
            return jobs

    env = gym.make("Synergy-v0", levels="grid", cluster=cluster, workload=Source())
    assert not isinstance(env.unwrapped.source, (FixedWorkload, GeneratedWorkloads))
    with pytest.raises(ConfigError, match=rf"^env kwarg levels='grid': job 8 \(gnmt, 8 GPUs\) {where}"):
        env.reset(seed=0)


def test_a_demand_slower_than_the_fair_share_shows_as_what_tune_grants():
    # A trace's request below the fair share (0.5 CPUs per GPU): Tune never tries a target slower than its
    # fallback and grants the fair share, so the demand level shows the fair share (it showed 0.5 CPUs and
    # speed-up 0.1), and admitting at it grants exactly what it shows.
    from synergy_gym import Workload
    from synergy_gym.env import SynergyEnv
    from synergy_gym.env.observation import LEVEL_FEATURES, slot_arrays

    w = Workload.build(ZOO, job_id=[0, 1], model=[0, 0], gpus=[1, 1], arrival_s=[0, 0], total_iters=[10**5, 10**5],
                       cpu_demand_per_gpu=[0.5, np.nan], mem_demand_per_gpu=[10, np.nan], run_until="all")
    env = SynergyEnv(cluster="small", workload=w, max_queue=2)
    obs, _ = env.reset(seed=0)
    _, levels = slot_arrays(obs)
    speedup = LEVEL_FEATURES.index("speedup")
    assert levels[0, DEMAND_LEVEL].tolist() == levels[0, FAIR_LEVEL].tolist() == [1.0, 1.0, 1.0]
    assert (levels[0, :, speedup] >= 1.0 - 1e-9).all()  # no level slower than the fair share
    env.step(DEMAND_LEVEL)  # slot 0 at its demand level
    ledger, c = env.sim.ledger, env.sim.cluster
    slot = int(np.flatnonzero(np.asarray(ledger.jobs[: ledger.n_slots]) == 0)[0])
    assert (ledger.cpu[slot], ledger.mem[slot]) == (c.fair_cpus_per_gpu, c.fair_mem_gb_per_gpu)


def test_the_observations_demand_is_the_demand_level_also_for_a_request_slower_than_the_fair_share():
    # Job 0 asks 1 CPU and 10 GB per GPU, slower than the fair share it is granted: its runtime_demand and its part of
    # the demand features read what the demand level grants (the fair share), as job 1 at the fair share does. They
    # read the raw request before: runtime_demand 10× the run time at the fair share, which admitting it gives.
    from synergy_gym import Workload
    from synergy_gym.env import SynergyEnv
    from synergy_gym.env.observation import DEMAND_FEATURES, SLOT_FEATURES, hours, slot_arrays

    w = Workload.build(ZOO, job_id=[0, 1], model=[0, 0], gpus=[1, 1], arrival_s=[0, 0], total_iters=[36000, 36000],
                       cpu_demand_per_gpu=[1.0, 3.0], mem_demand_per_gpu=[10.0, 62.5], run_until="all")
    env = SynergyEnv(cluster="small", workload=w, max_queue=2)
    obs, _ = env.reset(seed=0)
    slots, _ = slot_arrays(obs)
    fair, demand = (SLOT_FEATURES.index(k) for k in ("runtime_fair", "runtime_demand"))
    assert hours(slots[0, demand]) == pytest.approx(hours(slots[0, fair]), rel=1e-5)
    assert slots[0].tolist() == slots[1].tolist()  # the same model and GPUs, granted the same
    wait_cpu, wait_mem = (DEMAND_FEATURES.index(k) for k in ("waiting_cpu", "waiting_mem"))
    c = env.sim.cluster
    share = 2 * c.fair_cpus_per_gpu / c.total_cpus, 2 * c.fair_mem_gb_per_gpu / c.total_mem_gb
    assert obs["demand"][[wait_cpu, wait_mem]] == pytest.approx([x / (x + 1) for x in share], rel=1e-5)
