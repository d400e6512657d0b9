"""Settings of the wrong type are refused in one line instead of being used as something else."""

import dataclasses
import re

import numpy as np
import pytest

from synergy_gym import (
    FIFO,
    ConfigError,
    ModelZoo,
    SchedulingPolicy,
    SimulationConfig,
    SyntheticWorkload,
    Tune,
    WorkloadError,
    cluster_preset,
    load_cluster,
)
from synergy_gym.sim.profiling import ProfilerConfig


@pytest.mark.parametrize("window", [(2.7, 9.9), "59", (1, 5, 9), 5, (True, 5)])
def test_a_window_must_be_two_whole_positions(window):
    # Used to become (2, 9), (5, 9), (1, 5), a TypeError and (1, 5).
    with pytest.raises(WorkloadError, match=f"^window {re.escape(repr(window))} must be two whole job positions"):
        SyntheticWorkload(num_jobs=20, window=window)


def test_whole_number_windows_are_normalised():
    spec = SyntheticWorkload(num_jobs=20, window=[np.int64(2), 9.0])
    assert spec.window == (2, 9) and spec.resolved_window == (2, 9) and all(type(a) is int for a in spec.window)


@pytest.mark.parametrize("kwargs, message", [
    ({"multigpu": "no"}, "multigpu must be True or False, got 'no'"),
    ({"short_job_fraction": "0.8"}, "short_job_fraction must be in [0, 1], got '0.8'"),
])
def test_synthetic_workload_types(kwargs, message):
    with pytest.raises(WorkloadError, match=f"^{re.escape(message)}$"):
        SyntheticWorkload(num_jobs=20, **kwargs)
    assert SyntheticWorkload(num_jobs=20, multigpu=np.bool_(True)).multigpu is True


@pytest.mark.parametrize("kwargs, message", [
    ({"debug": "False"}, "debug must be True or False, got 'False'"),
    ({"record_rounds": "no"}, "record_rounds must be True or False, got 'no'"),
    ({"profiler": {"repeats": 3}}, "profiler must be a ProfilerConfig, got a dict; use ProfilerConfig(**settings)"),
])
def test_simulation_config_types(kwargs, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        SimulationConfig(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"saturation": "0.1"}, "saturation must be in [0, 1), got '0.1'"),
    ({"cpu_points": 3}, "cpu_points must be positive CPU counts, got 3"),
])
def test_profiler_config_types(kwargs, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        ProfilerConfig(**kwargs)


def test_scheduling_policy_names_the_expected_types():
    with pytest.raises(ConfigError) as caught:
        SchedulingPolicy("fifo", "tune")
    assert str(caught.value) == ("SchedulingPolicy ordering must be an ordering such as FIFO(), SRTF() or LAS(), got 'fifo'; "
                                 "a policy by name ('fifo+tune') is built by synergy_gym.baselines.make_policy")
    with pytest.raises(ConfigError, match="^SchedulingPolicy mechanism must be a mechanism .*got the class Tune"):
        SchedulingPolicy(FIFO(), Tune)


def test_cluster_names_and_sources():
    with pytest.raises(ConfigError, match=r"^cluster preset must be a name \(default, small, large\), got \['small'\]$"):
        cluster_preset(["small"])
    with pytest.raises(ConfigError, match="^cluster must be a preset name .* or a TOML file's path, got None$"):
        load_cluster(None)
    with pytest.raises(ConfigError, match=r"^cluster 'smal' is neither a preset \(default, small, large\) nor a file$"):
        load_cluster("smal")  # the Python API no longer speaks of a --cluster option
    with pytest.raises(ConfigError, match=r"^--cluster 'smal' is neither a preset"):
        load_cluster("smal", source="--cluster")


def test_model_zoo_errors_are_config_errors(zoo):
    m0 = zoo[0]
    for models, message in [
        ((), "a model zoo needs at least one model, got ()"),
        ((m0, m0), "model 'alexnet' appears more than once in the zoo"),
        ((m0, dataclasses.replace(m0, name="x", cpu_grid=[1.0, 2.0], mem_grid=[10.0, 20.0], tput=np.ones((2, 2)))),
         "model 'x' uses a different grid from 'alexnet'"),
    ]:
        with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
            ModelZoo(models)
    with pytest.raises(ConfigError, match=re.escape("model 'x': tput has shape (2, 2), expected (9, 5) (cpu levels × "
                                                    "memory levels of its grids)")):
        dataclasses.replace(m0, name="x", tput=np.zeros((2, 2)))  # the profile itself, before any zoo
