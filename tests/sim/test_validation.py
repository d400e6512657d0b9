"""The shared check for positive numbers and counts, and the settings dataclasses that use it."""

import math
import re

import numpy as np
import pytest

from synergy_gym import ClusterSpec, ConfigError, SyntheticWorkload, WorkloadError
from synergy_gym.agents.config import TrainConfig
from synergy_gym.sim.profiling import ProfilerConfig
from synergy_gym.sim.validation import check_positive


@pytest.mark.parametrize("value", [True, False, np.bool_(True), "3", None, math.nan, math.inf, -math.inf, 0, -1, [1]])
def test_refuses_bools_strings_nan_inf_and_non_positive_values(value):
    with pytest.raises(ConfigError, match=f"^{re.escape(f'size must be a positive number, got {value!r}')}$"):
        check_positive("size", value)


def test_integers_allow_zero_none_unit_and_error_class():
    assert check_positive("n", 3.0, integer=True) == 3 and type(check_positive("n", 3.0, integer=True)) is int
    assert type(check_positive("n", np.int64(4), integer=True)) is int
    assert check_positive("x", np.float32(0.5)) == 0.5 and type(check_positive("x", 2)) is float
    assert check_positive("n", 10**30, integer=True) == 10**30  # no overflow through float()
    with pytest.raises(ConfigError, match="^round_s must be a positive number, got 1000"):
        check_positive("round_s", 10**400)  # as a float it is not finite (it was an OverflowError)
    assert check_positive("x", 10**300) == 1e300
    with pytest.raises(ConfigError, match=r"^n must be a positive integer, got 1\.5$"):
        check_positive("n", 1.5, integer=True)
    assert check_positive("seed", 0, integer=True, allow_zero=True) == 0
    with pytest.raises(ConfigError, match=r"^seed must be a non-negative integer, got -1$"):
        check_positive("seed", -1, integer=True, allow_zero=True)
    assert check_positive("every", None, allow_none=True) is None
    with pytest.raises(ConfigError, match=r"^round_s must be a positive number of seconds, got 0$"):
        check_positive("round_s", 0, unit="seconds")
    with pytest.raises(WorkloadError, match=r"^max_gpus must be a positive integer, got 0$"):
        check_positive("max_gpus", 0, integer=True, error=WorkloadError)


def test_settings_dataclasses_share_the_check():
    with pytest.raises(ConfigError, match="cpus_per_server must be a positive number, got nan"):
        ClusterSpec(cpus_per_server=math.nan)
    with pytest.raises(ConfigError, match="num_servers must be a positive integer, got True"):
        ClusterSpec(num_servers=True)
    assert type(ClusterSpec(num_servers=np.int64(2)).num_servers) is int
    assert ProfilerConfig(repeats=3.0).repeats == 3
    with pytest.raises(ConfigError, match="seconds_per_point must be a non-negative number, got inf"):
        ProfilerConfig(seconds_per_point=math.inf)
    with pytest.raises(WorkloadError, match="jobs_per_hour must be a positive number, got True"):
        SyntheticWorkload(jobs_per_hour=True)
    with pytest.raises(WorkloadError, match="jobs_per_hour 1e-07 is below the minimum of 1e-06 jobs an hour"):
        SyntheticWorkload(jobs_per_hour=1e-7)  # arrivals past float64's exact seconds
    assert SyntheticWorkload(jobs_per_hour=1e-6).jobs_per_hour == 1e-6
    with pytest.raises(WorkloadError, match="num_jobs 1000000000000 exceeds the maximum of 1,000,000"):
        SyntheticWorkload(num_jobs=10**12)  # was: accepted, and build() asked NumPy for 7 TiB
    with pytest.raises(WorkloadError, match="window 0:1000001 ends past the most jobs a workload may have, 1,000,000"):
        SyntheticWorkload(window=(0, 10**6 + 1))
    with pytest.raises(WorkloadError, match="seed must be a non-negative integer, got -3"):
        SyntheticWorkload(seed=-3)
    assert SyntheticWorkload(num_jobs=40.0, seed=np.int64(5)) == SyntheticWorkload(num_jobs=40, seed=5)
    with pytest.raises(ConfigError, match="learning_rate must be a positive number, got inf"):
        TrainConfig(learning_rate=math.inf)
    with pytest.raises(ConfigError, match="ent_coef must be a non-negative number, got -0.1"):
        TrainConfig(ent_coef=-0.1)
    assert TrainConfig(n_envs=2.0).n_envs == 2
    with pytest.raises(ConfigError, match=r"^config: settings must be a mapping of setting names to values, got 5$"):
        TrainConfig.from_mapping(5)  # was: TypeError: 'int' object is not iterable
