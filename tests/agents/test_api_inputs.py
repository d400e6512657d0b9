"""The Python API's inputs: ``evaluate``'s seeds, policy and env_id, ``run_cases``' policies, ``load_pretrained``'s device.

Each bad value is one line (:class:`synergy_gym.errors.ConfigError`) naming the argument and the value, raised at
entry – never a seed silently changed (a string split into digits, a float truncated) or an error from deep inside.
"""

from __future__ import annotations

import numpy as np
import pytest

from synergy_gym import evaluate
from synergy_gym.errors import ConfigError, SynergyGymError

ENV = "Synergy-small-v0"


@pytest.fixture(scope="module")
def heuristic():
    from synergy_gym.baselines.env_heuristics import env_heuristics

    return env_heuristics()["fifo+tune"]


@pytest.mark.parametrize("seeds, words", [
    ("1000000", ["seeds must be a non-empty list", "'1000000'"]),  # was: 7 episodes, seeds 1, 0, 0, …
    (3, ["seeds must be a non-empty list", "got 3", "give [3]"]),
    ([0.9, 2.5], ["seeds[0] must be a non-negative integer", "got 0.9"]),  # was: seeds 0 and 2
    ([1, 2.5], ["seeds[1]", "got 2.5"]),
    ([None], ["seeds[0]", "got None"]),
    ([], ["seeds must be a non-empty list", "an empty one"]),  # was: a frame without columns
    ([True], ["seeds[0]", "got True"]),
    ([4, -1], ["seeds[1] must be a non-negative integer", "got -1"]),
    (np.array([1.5]), ["seeds[0]", "1.5"]),
    ([float("nan")], ["seeds[0]", "nan"]),
    (np.int64(5), ["give [5]"]),
    (None, ["seeds must be a non-empty list", "got None"]),
])
def test_bad_seeds_are_one_line_naming_them(heuristic, seeds, words):
    with pytest.raises(ConfigError) as info:
        evaluate(heuristic, ENV, seeds, num_jobs=5)
    message = str(info.value)
    assert "\n" not in message and message.startswith("evaluate(): ")
    for word in words:
        assert word in message, (word, message)


def test_seeds_of_any_integer_kind_and_whole_floats_run_as_given(heuristic):
    frame = evaluate(heuristic, ENV, np.array([3, 1], dtype=np.uint32), num_jobs=5)
    assert frame["seed"].tolist() == [3, 1] and all(type(s) is int for s in frame["seed"].tolist())
    floats = evaluate(heuristic, ENV, np.array([3, 1], dtype=np.float64), num_jobs=5)  # as before the checks
    assert floats.drop(columns="wall_s").equals(frame.drop(columns="wall_s"))
    again = evaluate(heuristic, ENV, (s for s in range(3, 0, -2)), num_jobs=5)  # a generator, once
    assert again.drop(columns="wall_s").equals(frame.drop(columns="wall_s"))


@pytest.mark.parametrize("policy, env_id, words", [
    (object(), ENV, ["policy must have a predict", "<object object"]),
    ("fifo+tune", ENV, ["policy must have a predict", "'fifo+tune'"]),
    (None, 5, ["policy must have a predict"]),
])
def test_a_policy_without_predict_is_one_line(policy, env_id, words):
    with pytest.raises(ConfigError) as info:
        evaluate(policy, env_id, [0], num_jobs=5)
    for word in words:
        assert word in str(info.value)


def test_an_env_id_that_is_neither_an_id_nor_a_callable_is_one_line(heuristic):
    with pytest.raises(ConfigError, match=r"env_id must be an environment id .* got 5$"):
        evaluate(heuristic, 5, [0], num_jobs=5)


@pytest.mark.parametrize("kwargs, words", [
    ({"on_episode": 5}, "on_episode must be None or a function (done, total), got an int"),  # was: after episode 1
    ({"deterministic": "no"}, "deterministic must be True or False, got 'no'"),  # was: run as deterministic
    ({"keep_jcts": "yes"}, "keep_jcts must be True or False, got 'yes'"),
    ({"log_decisions": 1}, "log_decisions must be True or False, got 1"),
    ({"name": 5}, "name must be None or text (the rows' policy), got 5"),
])
def test_evaluates_options_are_checked_at_entry(heuristic, kwargs, words):
    with pytest.raises(ConfigError) as info:
        evaluate(heuristic, ENV, [0], num_jobs=5, **kwargs)
    assert str(info.value) == f"evaluate(): {words}"


def test_an_env_callable_that_makes_no_environment_is_one_line(heuristic):
    with pytest.raises(ConfigError, match=r"^evaluate\(\): env_id .* must make a gymnasium.Env, it returned 5$"):
        evaluate(heuristic, lambda **kwargs: 5, [0])  # was: AttributeError: 'int' object has no attribute 'unwrapped'


@pytest.mark.parametrize("kwargs, words", [
    ({"preemptive": True}, "action: Discrete(161), the environment's Discrete(353)"),  # was: a reshape error in NumPy
    ({"max_queue": 8}, "action: Discrete(161), the environment's Discrete(41)"),  # was: a broadcast error
    ({"fit_features": True}, "observation key 'slot_fits', which the policy was not made for"),  # was: KeyError
])
def test_a_pretrained_policy_on_other_spaces_is_one_line_naming_the_difference(kwargs, words):
    from synergy_gym.agents import load_pretrained

    policy = load_pretrained("small", device="cpu")
    with pytest.raises(ConfigError) as info:
        evaluate(policy, ENV, [0], num_jobs=5, **kwargs)
    assert str(info.value) == (f"evaluate(): small was made for other spaces than this environment's ({words}); "
                               f"evaluate it with the env id and kwargs it was trained on")
    assert len(evaluate(policy, ENV, [0], num_jobs=5)) == 1  # its own spaces still run


def test_parts_difference_names_the_first_one_the_action_first():
    from gymnasium import spaces

    from synergy_gym.experiments.policy_spaces import parts_difference, spaces_parts

    box = spaces.Box(0, 1, (3,))

    def difference(policy_obs, policy_actions, env_obs, env_actions):
        return parts_difference(spaces_parts(policy_obs, spaces.Discrete(policy_actions)),
                                spaces_parts(env_obs, spaces.Discrete(env_actions)))

    assert difference(spaces.Dict({"a": box}), 4, spaces.Dict({"a": spaces.Box(-1, 2, (3,))}), 4) is None  # bounds
    assert difference(spaces.Dict({"a": box}), 4, spaces.Dict({"a": spaces.Box(0, 1, (4,))}), 5) == (
        "action: Discrete(4), the environment's Discrete(5)")
    assert difference(spaces.Dict({"a": box, "c": box}), 4, spaces.Dict({"a": box}), 4) == (
        "observation key 'c', which the environment's observations lack")
    assert difference(spaces.Dict({"a": box}), 4, spaces.Dict({"a": box, "b": box}), 4) == (
        "observation key 'b', which the policy was not made for")
    assert difference(spaces.Dict({"a": box}), 4, spaces.Dict({"a": spaces.Box(0, 1, (4,))}), 4) == (
        "a: Box(3,), the environment's Box(4,)")
    assert difference(box, 4, spaces.Discrete(3), 4) == "observation: Box(3,), the environment's Discrete(3)"


def test_run_cases_refuses_what_is_not_a_scheduling_policy():
    from synergy_gym import ClusterSpec, SyntheticWorkload, WorkloadCase, run_cases

    spec = SyntheticWorkload(jobs_per_hour=8.0, num_jobs=5, seed=1)
    case = WorkloadCase("s1", make=lambda: (spec.build(), None), seed=1)
    cluster = ClusterSpec(num_servers=2, cpus_per_server=16)
    with pytest.raises(ConfigError, match=r"policies\['fifo\+tune'\] must be a SchedulingPolicy .*got 'fifo\+tune'; "
                                          r"build a named policy with synergy_gym\.baselines\.make_policy\('fifo\+tune'\)"):
        run_cases([case], {"fifo+tune": "fifo+tune"}, cluster)
    with pytest.raises(ConfigError, match=r"policies\['x'\] must be a SchedulingPolicy .*got <object object"):
        run_cases([case], {"x": object()}, cluster)
    with pytest.raises(ConfigError, match=r"cases must be an iterable of WorkloadCase, got one WorkloadCase \('s1'\)"):
        run_cases(case, {}, cluster)
    with pytest.raises(ConfigError, match=r"cases\[1\] must be a WorkloadCase, got 3"):
        run_cases([case, 3], {}, cluster)
    with pytest.raises(ConfigError, match=r"cluster must be a ClusterSpec, got 'small'"):
        run_cases([case], {}, "small")


@pytest.mark.parametrize("device, words", [
    ("cuda:99", ["device cuda:99", "PyTorch sees"]),  # was: loaded on the CPU, as if asked for
    ("bogus", ["unknown device 'bogus'", "cpu"]),  # was: an error blaming the model file
])
def test_load_pretrained_checks_the_device(device, words):
    from synergy_gym.agents import load_pretrained

    with pytest.raises(SynergyGymError) as info:
        load_pretrained("small", device=device)
    message = str(info.value)
    assert "\n" not in message and "model" not in message
    for word in words:
        assert word in message, (word, message)


def test_load_pretrained_with_the_command_lines_prefix_says_to_drop_it():
    from synergy_gym.agents import load_pretrained
    from synergy_gym.agents.pretrained_policies import resolve_model_argument

    with pytest.raises(ConfigError, match=r"^pretrained policy 'pretrained:small': give the name without "
                                          r"'pretrained:' here, 'small' "):
        load_pretrained("pretrained:small")  # was: "unknown pretrained policy", with no hint
    with pytest.raises(ConfigError, match=r"^a model must be a path or 'pretrained:NAME', got 5$"):
        resolve_model_argument(5)  # was: Path('5')


def test_evaluates_docstring_names_every_shipped_policy():
    import importlib

    from synergy_gym.agents import pretrained_names

    evaluate_module = importlib.import_module("synergy_gym.agents.evaluate")

    assert pretrained_names()
    for name in pretrained_names():
        assert f"``{name}``" in evaluate_module.__doc__, name
