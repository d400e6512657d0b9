"""The compiled kernels: one implementation, numba's, with the same code as plain Python without numba.

The golden files (tests/test_golden.py) pin the compiled path. Here a process in which numba
cannot be imported runs environment episodes and simulations through the plain-Python kernels
and must give exactly what the compiled kernels give in this process. The ``kernels`` setting
that chose between the kernels and a numpy copy of them is gone, with a one-line error. Compiled
code is cached outside the package (a per-user folder), or not at all.
"""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym import ClusterSpec, ConfigError, SimulationConfig, Simulator, SyntheticWorkload, Workload
from synergy_gym.baselines.registry import make_policy
from synergy_gym.sim import kernels
from synergy_gym.sim.compiled import CACHE_ENV
from tests.support import REPO, golden

#: Environment cases that take every kernel's path: slots of jobs that never ran (default) and of
#: jobs that may have run (preemptive), multi-GPU re-placement, scarce CPUs.
ENV_CASES = [("default", "random_valid", 0), ("preemptive", "random_any", 1), ("multigpu", "random_valid", 2),
             ("scarce-preemptive", "random_valid", 0), ("scarce-multigpu-changes", "random_valid", 1)]
ENV_STEPS = 600
#: Simulator cases: a skipping (static) ordering, a dynamic one, and exact timing.
SIM_CASES = [("fifo+tune", "round"), ("srtf+tune", "round"), ("fifo+fair", "exact")]


def small_workload() -> Workload:
    return SyntheticWorkload(jobs_per_hour=3.0, seed=3, num_jobs=120, multigpu=True, max_gpus=32).build()


def finish_times(policy: str, timing: str) -> list[float]:
    sim = Simulator(ClusterSpec(num_servers=4), small_workload(), make_policy(policy), SimulationConfig(timing=timing))
    sim.run()
    return sim.jobs.finish_s.tolist()


def results() -> dict:
    """Every case's result, as JSON-able values (run in this process and in one without numba)."""
    return {
        "env": [golden.env_trace(policy, seed, mode, max_steps=ENV_STEPS) for mode, policy, seed in ENV_CASES],
        "sim": [finish_times(policy, timing) for policy, timing in SIM_CASES],
    }


#: A process in which ``import numba`` fails; it prints :func:`results` as JSON.
WITHOUT_NUMBA = """
import json, sys
sys.modules["numba"] = None  # import numba now raises ImportError
from synergy_gym.sim import kernels
from synergy_gym.sim.compiled import CACHE_ENV
assert not hasattr(kernels.run_rounds, "py_func"), "the kernels were compiled"
from tests.sim.test_kernels import results
print(json.dumps(results()))
"""


@pytest.mark.slow
def test_without_numba_the_kernels_run_as_plain_python_with_identical_results():
    assert hasattr(kernels.run_rounds, "py_func")  # compiled in this process
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_NUMBA], capture_output=True, text=True, cwd=REPO, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    plain = json.loads(done.stdout)
    compiled = results()
    assert all(trace["steps"] == ENV_STEPS or trace["ended"] for trace in compiled["env"])
    for case, want, got in zip(ENV_CASES, compiled["env"], plain["env"]):
        assert got == want, f"environment {case}: plain-Python kernels differ from the compiled ones"
    for case, want, got in zip(SIM_CASES, compiled["sim"], plain["sim"]):
        np.testing.assert_array_equal(np.array(got), np.array(want), err_msg=f"simulator {case}")
        assert not np.isnan(want).any()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), max_size=400))
def test_pairwise_sum_is_numpys_sum_to_the_bit(values):
    a = np.array(values, dtype=float)
    assert kernels.pairwise_sum(a) == np.add.reduce(a)
    assert kernels.pairwise_sum.py_func(a) == np.add.reduce(a)


def test_the_removed_kernels_setting_says_so_in_one_line():
    for make in (lambda: SimulationConfig(kernels="numpy"), lambda: gym.make("Synergy-small-v0", kernels="numba")):
        with pytest.raises(ConfigError, match=r"kernels.* was removed: the compiled kernels are always used") as info:
            make()
        assert "\n" not in str(info.value)
    assert "kernels" not in [f.name for f in dataclasses.fields(SimulationConfig)]


def _compiled_files(folder) -> dict[str, int]:
    """numba's cache files under ``folder``, with their modification times."""
    return {str(p): p.stat().st_mtime_ns for pattern in ("*.nbi", "*.nbc") for p in folder.rglob(pattern)}


#: A process that compiles a kernel and prints where numba cached it (None: not cached).
COMPILE_ONE = (
    "import numpy as np\n"
    "from synergy_gym.sim import kernels\n"
    "kernels.pairwise_sum(np.arange(12.0))\n"
    "print(kernels.pairwise_sum.stats.cache_path)\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["folder", "off"])
def test_compiled_kernels_are_cached_outside_the_package(tmp_path, setting):
    package = Path(kernels.__file__).resolve().parents[1]
    before = _compiled_files(package)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR")}
    env[CACHE_ENV] = str(tmp_path / "cache") if setting == "folder" else ""
    done = subprocess.run([sys.executable, "-c", COMPILE_ONE], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _compiled_files(package) == before  # nothing written inside the package
    where = done.stdout.strip()
    if setting == "folder":
        assert Path(where).is_relative_to(tmp_path / "cache" / "numba")
        assert _compiled_files(tmp_path / "cache")
    else:
        assert where == "None" and not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_a_truncated_cache_file_is_compiled_again_not_a_traceback_in_every_later_process(tmp_path):
    # A process killed while numba wrote its cache (or a full disk) left a truncated file: every later process failed
    # with "pickle data was truncated" until the user found and emptied the cache folder.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR")}
    env[CACHE_ENV] = str(tmp_path / "cache")
    runs = []
    for truncate in (None, "*.nbc", "*.nbi", None):
        for path in (tmp_path / "cache").rglob(truncate) if truncate else ():
            path.write_bytes(path.read_bytes()[:40])
        done = subprocess.run([sys.executable, "-c", COMPILE_ONE], capture_output=True, text=True, cwd=tmp_path,
                              env=env)
        assert done.returncode == 0, (truncate, done.stderr[-2000:])
        runs.append(done.stdout.strip())
    assert len(set(runs)) == 1 and Path(runs[0]).is_relative_to(tmp_path / "cache")
    assert all(Path(path).stat().st_size > 40 for path in _compiled_files(tmp_path / "cache"))  # written anew
