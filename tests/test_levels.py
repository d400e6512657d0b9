"""Allocation levels: fair, demand, and the cheapest points that reach fractions of the demand's speed-up."""

import numpy as np
import pytest

from synergy_gym import ClusterSpec, ModelZoo, UnknownNameError
from synergy_gym.levels import DEFAULT_FRACTIONS, allocation_levels

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
        assert (fair.cpus_per_gpu, fair.mem_gb_per_gpu, fair.tput) == (cluster.fair_cpus_per_gpu, cluster.fair_mem_gb_per_gpu, f)
        assert all(level.tput >= fair.tput - 1e-12 for level in levels)  # never below the fair share
        for level in levels:  # every level fits one server for the job's GPUs
            assert per_server * level.cpus_per_gpu <= cluster.cpus_per_server + 1e-9
            assert per_server * level.mem_gb_per_gpu <= cluster.mem_gb_per_server + 1e-9
        tput = ZOO.throughput_many(np.full(cpu.size, model), cpu, mem)
        capped = ZOO.throughput_many(np.full(cpu.size, model), np.minimum(cpu, fair.cpus_per_gpu), np.minimum(mem, fair.mem_gb_per_gpu))
        ok = (tput >= f - 1e-12) & (capped >= f - 1e-12) & (per_server * cpu <= cluster.cpus_per_server + 1e-9) & (
            per_server * mem <= cluster.mem_gb_per_server + 1e-9)
        cost = cpu / cluster.cpus_per_server + mem / cluster.mem_gb_per_server
        for p, level in zip(DEFAULT_FRACTIONS, levels[2:]):
            need = f + p * (max(demand.tput, f) - f)
            adequate = ok & (tput >= need - 1e-12)
            if not adequate.any():
                continue
            assert level.tput >= need - 1e-12
            assert level.cpus_per_gpu / cluster.cpus_per_server + level.mem_gb_per_gpu / cluster.mem_gb_per_server == pytest.approx(cost[adequate].min())


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
