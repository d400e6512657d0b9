"""The simulator and the environment reproduce the golden behaviour recorded in tests/data exactly.

The simulator's file was written by ``python tests/golden.py`` (now ``python -m
tests.support.golden``) before the round-planner refactor; its Synergy-OPT entries on the
time-compressed replays (``load9/x8/…``, ``multigpu_load4/x8/…``) were added later with that same
code (commit 70cb087), every earlier entry unchanged (see ``tests/support/golden.py``). The OPT
policies are checked on those compressed replays (about 20 s for the 12); on the uncompressed
2,000 jobs (about 2.5 min) only with ``pytest --long``. The environment's file was written by
``python tests/golden.py --env-only`` on top of commit 4525693 (the scheduling action space: slot
× level and stop; flat ``slots``/``slot_levels``, ``demand`` as x / (x + 1), settled mid-event
observations); it was written again on 2026-12-05 when a truncated episode's final observation
became the state at the limit instead of a blank one: only the last observation digest of the 8
truncated traces changed, every step count, return and finish time the same (``python -m
tests.support.golden --env-only``). A change of behaviour anywhere in the round loop (ordering,
admission, placement, reclaiming, progress, the environment's decision loop, fallbacks, observations
or rewards) fails here.
"""

import gzip
import json

import numpy as np
import pytest

from tests.support import golden

QUICK = {("load9", "fifo+tune"), ("multigpu_load4", "fifo+tune"), ("multigpu_load4", "srtf+greedy")}


def pytest_generate_tests(metafunc):
    # The OPT policies on the uncompressed replays only with --long (see golden.sim_cases).
    if metafunc.definition.name == "test_simulator_finish_times_match_the_golden_file":
        cases = golden.sim_cases(long=metafunc.config.getoption("--long"))
        metafunc.parametrize("key, policy", [
            pytest.param(key, policy, marks=() if (key, policy) in QUICK else (pytest.mark.slow,), id=f"{key}-{policy}")
            for key, policy in cases
        ])


@pytest.fixture(scope="module")
def sim_golden():
    with np.load(golden.SIM_FILE) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def replays(shared_dir):
    return {key: golden.replay(shared_dir, key) for key in golden.WORKLOAD_FIELDS}


def test_simulator_finish_times_match_the_golden_file(sim_golden, replays, key, policy):
    w = replays[key]
    for field in golden.WORKLOAD_FIELDS[key]:  # the workload is the one recorded
        assert np.array_equal(getattr(w, field), sim_golden[f"{key}/{field}"]), field
    got = golden.finish_rounds(w, policy)
    want = sim_golden[f"{key}/{policy}"]
    if not np.array_equal(got, want):
        i = int(np.flatnonzero(got != want)[0])
        pytest.fail(f"{policy} on {key}: job {w.job_id[i]} finishes in round {got[i]}, golden {want[i]}")


@pytest.fixture(scope="module")
def env_golden():
    with gzip.open(golden.ENV_FILE, "rt") as fh:
        data = json.load(fh)
    assert data["modes"] == {m: [i, k] for m, (i, k) in golden.ENV_MODES.items()}
    assert data["block"] == golden.BLOCK and data["max_steps"] == golden.MAX_STEPS
    return data["traces"]


QUICK_ENV = {("default", "random_any", 0), ("preemptive", "random_any", 0), ("multigpu", "random_valid", 1),
             ("changes", "random_any", 0), ("scarce-multigpu-changes", "random_valid", 0)}


def _env_cases():
    for mode in golden.ENV_MODES:
        for policy in golden.ENV_POLICIES:
            for seed in golden.ENV_SEEDS:
                quick = (mode, policy, seed) in QUICK_ENV or (mode in ("default", "multigpu", "scarce") and seed == 0)
                marks = () if quick else (pytest.mark.slow,)
                yield pytest.param(mode, policy, seed, marks=marks, id=golden.env_key(mode, policy, seed))


@pytest.mark.parametrize("mode, policy, seed", list(_env_cases()))
def test_env_observations_and_rewards_match_the_golden_file(env_golden, mode, policy, seed):
    want = env_golden[golden.env_key(mode, policy, seed)]
    got = golden.env_trace(policy, seed, mode)
    for block, (a, b) in enumerate(zip(got["digests"], want["digests"])):
        if a != b:
            steps = f"{block * golden.BLOCK}–{(block + 1) * golden.BLOCK}"
            pytest.fail(f"{mode} {policy} seed {seed}: first difference within steps {steps}")
    assert (got["steps"], got["ended"], got["invalid"]) == (want["steps"], want["ended"], want["invalid"])
    assert got["digests"] == want["digests"]
    assert got["finish"] == want["finish"]
    assert got["return"] == want["return"]


def test_env_golden_traces_are_discriminating(env_golden):
    # Every trace ran its episode to the end, the random-any policy exercised the fallbacks, and the
    # policies (and modes) produce different traces, so a change in any of them is visible.
    assert all(t["ended"] for t in env_golden.values())
    for mode in golden.ENV_MODES:
        for seed in golden.ENV_SEEDS:
            traces = [env_golden[golden.env_key(mode, p, seed)] for p in golden.ENV_POLICIES]
            assert len({t["digests"][-1] for t in traces}) == len(traces)
            assert traces[1]["invalid"] > 0 and traces[2]["invalid"] == 0
            # Action 1 is always valid but deciding only what changes: there the agent is also asked
            # when no waiting job fits (a preemption could make room), and action 1 falls back to stop.
            assert (traces[0]["invalid"] > 0) == mode.endswith("changes")
    for policy in golden.ENV_POLICIES:
        finals = {env_golden[golden.env_key(m, policy, 0)]["digests"][-1] for m in golden.ENV_MODES}
        assert len(finals) == len(golden.ENV_MODES)
    # Always action 1 is fifo+tune in either mode: the same finish times.
    for mode, other in (("default", "preemptive"), ("scarce", "scarce-preemptive")):
        for seed in golden.ENV_SEEDS:
            a, b = (env_golden[golden.env_key(m, "demand", seed)] for m in (mode, other))
            assert a["finish"] == b["finish"] and a["return"] == pytest.approx(b["return"], rel=1e-9)


def test_golden_finish_times_differ_between_policies(sim_golden):
    # The golden file is discriminating: the policies do not all finish jobs alike.
    distinct = {sim_golden[f"load9/{p}"].tobytes() for p in golden.POLICIES}
    assert len(distinct) >= 10
    # Every order's OPT finishes jobs differently on each compressed replay (which has all its entries).
    assert set(sim_golden) == {f"{k}/{p}" for k in golden.WORKLOAD_FIELDS for p in golden.WORKLOAD_FIELDS[k]} | {
        f"{k}/{p}" for k, p in golden.sim_cases(long=True)
    }
    for key in golden.REPLAYS:
        fast = [sim_golden[f"{key}/x{golden.COMPRESS}/{p}"] for p in golden.OPT_POLICIES]
        assert len({a.tobytes() for a in fast}) == len(golden.OPT_POLICIES)


def test_the_rewrite_command_refuses_a_mistyped_option_instead_of_rewriting_both_files(capsys):
    # Any argument but --env-only (--help, --env_only) started rewriting the simulator's goldens too.
    from tests.support.golden import parse_args

    assert parse_args([]).env_only is False and parse_args(["--env-only"]).env_only is True
    for argv, code in ((["--help"], 0), (["--env_only"], 2)):
        with pytest.raises(SystemExit) as exit_info:
            parse_args(argv)
        assert exit_info.value.code == code
    assert "unrecognized arguments: --env_only" in capsys.readouterr().err
