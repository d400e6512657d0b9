import csv

import numpy as np
import pytest

from synergy_gym import ClusterSpec, UnknownNameError
from synergy_gym.sim.profiles import TASKS, capped_demand_per_gpu, grid_level


def test_zoo_has_the_papers_ten_models(zoo):
    assert zoo.names == (
        "alexnet", "res18", "res50", "mobilenet", "shufflenet", "gnmt", "transformer", "lstm", "m5", "deepspeech",
    )
    assert {m.task for m in zoo.models} == set(TASKS)
    assert zoo.tput_tensor().shape == (10, 9, 5)
    with pytest.raises(UnknownNameError, match="unknown model 'vgg'"):
        zoo.index("vgg")


def test_every_model_runs_at_one_at_the_fair_share(zoo):
    for m in zoo.models:
        assert m.throughput(3, 62.5) == 1.0


@pytest.mark.parametrize(
    "name, speedup", [("alexnet", 2.94), ("res18", 2.4), ("res50", 1.15), ("mobilenet", 1.55),
                      ("shufflenet", 2.89), ("m5", 2.5), ("deepspeech", 1.0), ("gnmt", 1.0)],
)
def test_speedup_at_demand_matches_the_paper(zoo, name, speedup):
    assert zoo[zoo.index(name)].speedup == pytest.approx(speedup)


def test_profiles_match_the_shared_reference(zoo, shared_dir):
    with open(shared_dir / "synergy" / "models.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh)
                if r["profile_set"] == "models" and r["gpus"] == "1" and r["used_by_simulator"] == "True"]
    for r in rows:
        m = zoo[zoo.index(r["model"])]
        assert m.iter_time_s == float(r["iter_time"])
        assert (m.demand_cpus_per_gpu, m.demand_mem_gb_per_gpu) == (float(r["cpus"]), float(r["mem"]))
        assert m.speedup == pytest.approx(float(r["speedup"]))


def test_lookup_uses_the_largest_grid_point_not_above_the_allocation(zoo):
    alexnet = zoo[zoo.index("alexnet")]
    assert alexnet.throughput(11.9, 200) == alexnet.throughput(9, 187.5) == 2.0
    assert alexnet.throughput(12, 124.9) == 2.0  # not yet at the 125 GB level
    assert alexnet.throughput(12, 125) == 2.94
    assert alexnet.throughput(100, 1000) == 2.94  # beyond the grid: the top level
    assert alexnet.throughput(0.5, 10) == 0.1  # below the grid: the lowest level
    assert grid_level(zoo.cpu_grid, 500 / 24 * 0 + 2.999999999) == 2  # floating-point tolerance
    got = zoo.throughput_many(np.array([0, 8]), np.array([12.0, 6.0]), np.array([125.0, 187.5]))
    assert got.tolist() == [2.94, 2.5]


def test_multi_gpu_demand_is_capped_at_one_server():
    c = ClusterSpec()
    demand, gpus = np.array([12.0, 12.0, 12.0, 1.0]), np.array([1, 4, 16, 8])
    cpu = capped_demand_per_gpu(demand, gpus, c.fair_cpus_per_gpu, c.cpus_per_server)
    # 1 GPU: full demand; 4 GPUs: 24 CPUs over 4; 16 GPUs: more than a server, so the fair share; below fair: kept.
    assert cpu.tolist() == [12.0, 6.0, 3.0, 1.0]


def test_zoo_looks_models_up_by_index_or_name_and_names_what_it_has(zoo):
    assert zoo["gnmt"] is zoo[zoo.index("gnmt")] and zoo[-1] is zoo[len(zoo) - 1]
    assert [m.name for m in zoo] == list(zoo.names)
    assert zoo[0:2] == zoo.models[:2]
    with pytest.raises(UnknownNameError, match="unknown model 'resnet'; valid: alexnet"):
        zoo["resnet"]
    with pytest.raises(IndexError, match=r"no model 10: look a model up by its index \(0\.\.9\) or its name \(alexnet"):
        zoo[10]
    for bad in (1.5, True, None):
        with pytest.raises(TypeError, match=f"no model {bad!r}"):
            zoo[bad]
