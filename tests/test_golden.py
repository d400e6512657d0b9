"""The simulator and the environment reproduce the golden behaviour recorded in tests/data exactly.

The files were written by ``python tests/golden.py`` before the round-planner refactor; a
change of behaviour anywhere in the round loop (ordering, admission, placement, reclaiming,
progress, the environment's decision loop, observations or rewards) fails here.
"""

import gzip
import json

import numpy as np
import pytest

import golden

QUICK = {("load9", "fifo+tune"), ("multigpu_load4", "fifo+tune"), ("multigpu_load4", "srtf+greedy")}


def _sim_cases():
    for key in golden.REPLAYS:
        for policy in golden.POLICIES:
            marks = () if (key, policy) in QUICK else (pytest.mark.slow,)
            yield pytest.param(key, policy, marks=marks, id=f"{key}-{policy}")


@pytest.fixture(scope="module")
def sim_golden():
    with np.load(golden.SIM_FILE) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def replays(shared_dir):
    return {key: golden.replay(shared_dir, key) for key in golden.REPLAYS}


@pytest.mark.parametrize("key, policy", list(_sim_cases()))
def test_simulator_finish_times_match_the_golden_file(sim_golden, replays, key, policy):
    w = replays[key]
    assert w.job_id.tolist() == sim_golden[f"{key}/job_id"].tolist()
    got = golden.finish_rounds(w, policy)
    want = sim_golden[f"{key}/{policy}"]
    if not np.array_equal(got, want):
        i = int(np.flatnonzero(got != want)[0])
        pytest.fail(f"{policy} on {key}: job {w.job_id[i]} finishes in round {got[i]}, golden {want[i]}")


@pytest.fixture(scope="module")
def env_golden():
    with gzip.open(golden.ENV_FILE, "rt") as fh:
        data = json.load(fh)
    assert data["env_id"] == golden.ENV_ID and data["kwargs"] == golden.ENV_KWARGS
    assert data["block"] == golden.BLOCK
    return data["traces"]


def _env_cases():
    for policy in golden.ENV_POLICIES:
        for seed in golden.ENV_SEEDS:
            marks = () if (policy, seed) == ("defer", 0) else (pytest.mark.slow,)
            yield pytest.param(policy, seed, marks=marks, id=f"{policy}-{seed}")


@pytest.mark.parametrize("policy, seed", list(_env_cases()))
def test_env_observations_and_rewards_match_the_golden_file(env_golden, policy, seed):
    want = env_golden[f"{policy}/{seed}"]
    got = golden.env_trace(policy, seed)
    assert got["steps"] == want["steps"]
    for block, (a, b) in enumerate(zip(got["digests"], want["digests"])):
        if a != b:
            pytest.fail(f"{policy} seed {seed}: first difference within steps {block * golden.BLOCK}–{(block + 1) * golden.BLOCK}")
    assert got["return"] == want["return"]


def test_golden_finish_times_differ_between_policies(sim_golden):
    # The golden file is discriminating: the policies do not all finish jobs alike.
    distinct = {sim_golden[f"load9/{p}"].tobytes() for p in golden.POLICIES}
    assert len(distinct) >= 10
