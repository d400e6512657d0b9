"""Misuse of the environment's API (issue 24): every misuse is a one-line error that names the call.

One test per class: calls before ``reset()``; calls after the episode has ended (terminated
and truncated); ``reset`` with ``options`` of a wrong type, unknown keys or bad values; ``reset``
with a ``seed`` of a wrong type; ``step`` with an action of a wrong type; ``level_of`` and
``workload_for_seed`` with bad arguments; render modes the environment does not have (also
through ``gym.make``, which would otherwise wrap ``"human"`` in a pygame window);
``class_split`` given as a string (read as three weights, like ``--split``) or as anything
but three numbers; other env kwargs of a wrong type; a ``config`` that is not a mapping.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym import ConfigError, SynergyGymError, UnknownNameError
from synergy_gym.env import SynergyEnv
from synergy_gym.env.calls import EnvCallError, ResetNeeded

TINY = {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 6, "max_rounds": 4000}
N_ACTIONS = 32 * 5 + 1


def one_line(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert message and "\n" not in message and len(message) < 400, message
    return message


def finish(env, action=None) -> tuple[bool, bool]:
    """Step until the end (the first valid action, or ``action``); (terminated, truncated)."""
    u = env.unwrapped
    while True:
        a = int(np.flatnonzero(u.action_masks())[0]) if action is None else action
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            return terminated, truncated


# -- 1. calls that need an episode, before reset() ------------------------------------------------


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda e: e.step(0), "Cannot call env.step() before calling env.reset()"),
        (lambda e: e.action_masks(), "Cannot call env.action_masks() before calling env.reset()"),
        (lambda e: e.episode_summary(), "Cannot call env.episode_summary() before calling env.reset()"),
        (lambda e: e.level_of(0), "Cannot call env.level_of() before calling env.reset()"),
        (lambda e: e.state, "Cannot access env.state before calling env.reset()"),
    ],
    ids=["step", "action_masks", "episode_summary", "level_of", "state"],
)
def test_calls_that_need_an_episode_before_reset_raise_reset_needed_naming_the_call(call, name):
    env = SynergyEnv(**TINY)
    with pytest.raises(ResetNeeded) as excinfo:
        call(env)
    assert one_line(excinfo) == name
    # Gymnasium's own error (what gym.make's order enforcing raises), and a RuntimeError as before.
    assert isinstance(excinfo.value, gym.error.ResetNeeded) and isinstance(excinfo.value, RuntimeError)
    env.reset(seed=0)  # and the environment works afterwards
    call(env)


def test_what_needs_no_episode_works_before_reset():
    env = SynergyEnv(**TINY, render_mode="ansi")
    assert env.sim is None and env.slot_jobs.size == 0
    assert env.render() == "(not reset)"
    assert SynergyEnv(**TINY).render() is None
    assert len(env.workload_for_seed(3).arrival_s) == TINY["num_jobs"]
    wrapped = gym.make("Synergy-small-v0", num_jobs=6)
    with pytest.raises(gym.error.ResetNeeded, match=r"^Cannot call env\.step\(\) before calling env\.reset\(\)$"):
        wrapped.step(0)
    with pytest.raises(ResetNeeded, match=r"env\.action_masks\(\)"):
        wrapped.unwrapped.action_masks()


# -- 2. after the episode has ended ------------------------------------------------------------------


@pytest.mark.parametrize("end", ["terminated", "truncated"])
def test_step_after_the_end_raises_and_the_rest_describes_the_final_state(end):
    env = gym.make("Synergy-small-v0", **{**TINY, "max_rounds": 4000 if end == "terminated" else 2})
    env.reset(seed=0)
    terminated, truncated = finish(env, action=None if end == "terminated" else N_ACTIONS - 1)
    assert (terminated, truncated) == (end == "terminated", end == "truncated")
    u = env.unwrapped
    for _ in range(2):  # again and again
        with pytest.raises(ResetNeeded) as excinfo:
            env.step(0)
        assert one_line(excinfo) == (
            "Cannot call env.step(): the episode has ended (terminated or truncated); call env.reset() to start a new one"
        )
    assert u.action_masks().tolist() == [False] * (N_ACTIONS - 1) + [True]  # only stop, as the final observation
    assert u.episode_summary()["jobs_total"] == TINY["num_jobs"] and u.slot_jobs.size == 0
    env.reset(seed=0)
    assert u.action_masks().any() and not u.state.ended


# -- 3. reset options of a wrong type, unknown keys, bad values ------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        ("str", "env.reset(): options must be None or a dict with the keys workload_seed, got 'str'"),
        ([1], "env.reset(): options must be None or a dict with the keys workload_seed, got [1]"),
        (("workload_seed", 1), "env.reset(): options must be None or a dict"),
        (5, "env.reset(): options must be None or a dict"),
        ({"foo": 1}, "env.reset(): unknown option 'foo'; valid: workload_seed"),
        ({1: 1, "foo": 2}, "env.reset(): unknown option 1; valid: workload_seed"),  # mixed key types
        ({"workload_seed": "x"}, "env.reset(): option workload_seed must be a non-negative integer, got 'x'"),
        ({"workload_seed": -1}, "env.reset(): option workload_seed must be a non-negative integer, got -1"),
        ({"workload_seed": 1.0}, "env.reset(): option workload_seed must be a non-negative integer, got 1.0"),
        ({"workload_seed": True}, "env.reset(): option workload_seed must be a non-negative integer, got True"),
        ({"workload_seed": None}, "env.reset(): option workload_seed must be a non-negative integer, got None"),
    ],
)
def test_bad_reset_options_are_one_line_errors_naming_reset_and_change_nothing(options, message):
    env = SynergyEnv(**TINY)
    first, _ = env.reset(seed=5)
    before = env.state
    with pytest.raises(EnvCallError) as excinfo:
        env.reset(seed=7, options=options)
    assert one_line(excinfo).startswith(message)
    assert isinstance(excinfo.value, SynergyGymError) and isinstance(excinfo.value, gym.error.Error)
    assert env.state is before  # the episode before the failed call goes on
    assert env.reset(options={"workload_seed": np.int64(3)})[0].keys() == first.keys()  # NumPy integers are integers


# -- 4. seeds of a wrong type ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", ["x", 1.5, 2.0, -1, True, [1], np.float64(3), np.array([1, 2])])
def test_a_seed_of_a_wrong_type_is_refused_naming_reset(seed):
    env = SynergyEnv(**TINY)
    with pytest.raises(EnvCallError) as excinfo:
        env.reset(seed=seed)
    assert one_line(excinfo).startswith("env.reset(): seed must be None or a non-negative integer, got ")


def test_a_numpy_integer_seed_is_the_same_seed():
    a, b = SynergyEnv(**TINY), SynergyEnv(**TINY)
    obs_a, _ = a.reset(seed=np.int64(4))
    obs_b, _ = b.reset(seed=4)
    for key in obs_a:
        np.testing.assert_array_equal(obs_a[key], obs_b[key])


# -- 5. actions of a wrong type ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "action, message",
    [
        ("x", "env.step(): action 'x' is not a single integer (the action space is 0..160)"),
        (None, "env.step(): action None is not a single integer"),
        (1.5, "env.step(): action 1.5 is not a single integer"),
        (float("nan"), "env.step(): action nan is not a single integer"),
        (True, "env.step(): action True is not a single integer"),
        ([1, 2], "env.step(): action [1, 2] is not a single integer"),
        ([1, [2]], "env.step(): action [1, [2]] is not a single integer"),  # ragged
        (np.arange(400).reshape(20, 20), "env.step(): action array([[ 0, 1, 2,"),  # a repr of many lines
        (-1, "env.step(): action -1 is out of range: the action space is 0..160"),
        (N_ACTIONS, f"env.step(): action {N_ACTIONS} is out of range: the action space is 0..160"),
        (10**300, "env.step(): action 1000000"),
    ],
    ids=["str", "none", "float", "nan", "bool", "pair", "ragged", "matrix", "negative", "n", "huge"],
)
def test_an_action_of_a_wrong_type_is_refused_naming_step_and_changes_nothing(action, message):
    env = SynergyEnv(**TINY)
    env.reset(seed=0)
    decisions = env.state.decisions
    with pytest.raises(EnvCallError) as excinfo:
        env.step(action)
    assert one_line(excinfo).startswith(message) and isinstance(excinfo.value, ValueError)
    assert env.state.decisions == decisions
    with pytest.raises(EnvCallError) as excinfo:  # decode's errors name decode
        env.decode(action)
    assert one_line(excinfo).startswith(message.replace("env.step()", "env.decode()"))
    for fine in (np.int64(N_ACTIONS - 1), np.array(N_ACTIONS - 1), float(N_ACTIONS - 1)):
        env.step(fine)


# -- 6. level_of and workload_for_seed with bad arguments ---------------------------------------------


@pytest.mark.parametrize("j", ["x", -1, TINY["num_jobs"], 2.0, None])
def test_level_of_a_job_that_is_not_there_names_the_call(j):
    env = SynergyEnv(**TINY)
    env.reset(seed=0)
    with pytest.raises(EnvCallError) as excinfo:
        env.level_of(j)
    assert one_line(excinfo).startswith("env.level_of(): j must be a job index in 0..5 (of sim.jobs), got ")
    assert env.level_of(np.int64(0)) == -1


@pytest.mark.parametrize("seed", ["x", -1, 1.5, None, True])
def test_workload_for_a_bad_seed_names_the_call(seed):
    with pytest.raises(EnvCallError) as excinfo:
        SynergyEnv(**TINY).workload_for_seed(seed)
    assert one_line(excinfo).startswith("env.workload_for_seed(): seed must be a non-negative integer, got ")


# -- 7. render modes it does not have ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["human", "rgb_array_list", "ANSI", ""])
@pytest.mark.parametrize("how", ["direct", "gym.make"])
def test_render_modes_it_does_not_have_are_refused_at_construction(mode, how):
    with pytest.raises(UnknownNameError) as excinfo:
        SynergyEnv(**TINY, render_mode=mode) if how == "direct" else gym.make("Synergy-v0", **TINY, render_mode=mode)
    assert one_line(excinfo) == f"unknown render_mode {mode!r}; valid: ansi, rgb_array"


@pytest.mark.parametrize("mode", [5, ["ansi"]])
def test_a_render_mode_that_is_not_a_string_is_refused_also_by_gym_make(mode):
    with pytest.raises(ConfigError) as excinfo:
        gym.make("Synergy-v0", **TINY, render_mode=mode)
    assert one_line(excinfo) == f"env kwarg render_mode must be None, 'ansi' or 'rgb_array', got {mode!r}"


def test_gym_make_keeps_the_render_modes_it_has():
    env = gym.make("Synergy-small-v0", num_jobs=6, render_mode="rgb_array")
    env.reset(seed=0)
    assert env.render().ndim == 3
    assert gym.spec("Synergy-v0").entry_point == "synergy_gym.env:make_synergy_env"
    env.close()


# -- 8. class_split as a string, or not three numbers ---------------------------------------------------


@pytest.mark.parametrize("text, split", [("20/70/10", (20, 70, 10)), ("60,20,20", (60, 20, 20)), (" 1 / 1 / 0 ", (1, 1, 0))])
def test_a_class_split_string_is_read_as_three_weights_like_split(text, split):
    from_text, from_numbers = SynergyEnv(**TINY, class_split=text), SynergyEnv(**TINY, class_split=split)
    assert from_text.cfg.class_split == tuple(float(w) for w in split)
    np.testing.assert_array_equal(from_text.workload_for_seed(1).model, from_numbers.workload_for_seed(1).model)
    assert gym.make("Synergy-v0", **TINY, class_split=text).unwrapped.cfg.class_split == from_text.cfg.class_split


@pytest.mark.parametrize(
    "split",
    ["20/70", "a/b/c", "", "20/70/10/0", "1/-1/1", "nan/1/1", 5, None, b"20/70/10", {"v": 1},
     (1, 2), (0, 0, 0), (-1, 1, 1), (True, False, True), ("1", "2", "3"), (float("inf"), 1, 1), np.ones((3, 3))],
)
def test_a_class_split_that_is_not_three_weights_is_refused_saying_so(split):
    with pytest.raises(ConfigError) as excinfo:
        SynergyEnv(**TINY, class_split=split)
    message = one_line(excinfo)
    assert message.startswith("env kwarg class_split") and "three" in message and "'20/70/10'" in message


# -- 9. other env kwargs of a wrong type, and a config that is not a mapping ---------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_queue": 10**9}, "env kwarg max_queue 1000000000 exceeds the maximum of 4,096"),
        ({"cluster": "nope"}, "env kwarg cluster 'nope' is neither a preset (default, small, large) nor a file"),
        ({"cluster": ""}, "env kwarg cluster '' is neither a preset"),
        ({"trace": 5}, "env kwarg trace must be the path of a trace file or folder, got 5"),
        ({"trace": ""}, "env kwarg trace must be the path of a trace file or folder, got ''"),  # was: "'.' is a folder"
        ({"workload": " "}, "env kwarg workload must be a replay CSV path, a Workload or a workload source, got ' '"),
        ({"levels": None}, "env kwarg levels must be a name (a string), got None"),
        ({"invalid_action": ["raise"]}, "env kwarg invalid_action must be a name (a string), got ['raise']"),
        ({"profile_noise": "x"}, "env kwarg profile_noise must be a number in [0, 1), got 'x'"),
        ({"profile_noise": 0.5}, "env kwarg profile_noise 0.5 needs sensitivity='profiled', got sensitivity='true'"),
        ({"max_rounds": 10**20}, "env kwarg max_rounds 100000000000000000000 exceeds the maximum of 1,000,000,000,000,000"),
        ({"max_rounds": 10**15 + 1}, "env kwarg max_rounds 1000000000000001 exceeds the maximum of 1,000,000,000,000,000"),
        ({"jobs_per_hour": 1e-20}, "env kwarg jobs_per_hour 1e-20 is below the minimum of 1e-06 jobs an hour"),
        ({"jobs_per_hour": 1e-300}, "env kwarg jobs_per_hour 1e-300 is below the minimum of 1e-06 jobs an hour"),
        # was: accepted, and the rewards came out as -inf
        ({"reward_scale": 1e-320}, "env kwarg reward_scale 1e-320 is below the minimum of 1e-06 (seconds a unit"),
        ({"multigpu": np.array([True, False])}, "env kwarg multigpu must be true or false, got array([ True, False])"),
    ],
)
def test_other_kwargs_of_a_wrong_type_are_one_line_config_errors(kwargs, message):
    with pytest.raises(ConfigError) as excinfo:
        SynergyEnv(**{**TINY, **kwargs})
    assert one_line(excinfo).startswith(message)


def test_profile_noise_with_another_sensitivity_is_refused_through_gym_make_and_allowed_when_profiled():
    with pytest.raises(ConfigError) as excinfo:
        gym.make("Synergy-small-scarce-v0", profile_noise=0.5)
    assert "profile_noise 0.5 needs sensitivity='profiled'" in one_line(excinfo)
    SynergyEnv(**TINY, profile_noise=0.0)  # the default, with any sensitivity
    assert SynergyEnv(**TINY, sensitivity="profiled", profile_noise=0.5).cfg.profile_noise == 0.5


@pytest.mark.parametrize("timing", ["round", "exact"])
def test_the_sparsest_arrivals_and_the_longest_max_rounds_run_to_the_end(timing):
    env = gym.make("Synergy-small-v0", num_jobs=5, jobs_per_hour=1e-6, max_rounds=10**15, timing=timing)
    env.reset(seed=0)
    assert finish(env, action=1) == (True, False)  # terminated: every job ran, nothing overflowed
    assert env.unwrapped.episode_summary()["jobs_finished"] == 5


@pytest.mark.parametrize("config", ["x", [("num_jobs", 5)], 5])
def test_a_config_that_is_not_a_mapping_is_refused(config):
    with pytest.raises(ConfigError) as excinfo:
        SynergyEnv(config)
    assert one_line(excinfo).startswith("SynergyEnv(config): config must be None or a mapping of env kwargs, got ")
