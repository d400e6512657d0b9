"""The RLlib example builds and trains one iteration, on the paper's small id and a scarce one (needs the ray extra);
bad options stop it before Ray starts."""

import sys

import pytest

import synergy_gym
from tests.agents.tiny_runs import usage_error


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    ray.init(ignore_reinit_error=True, include_dashboard=False, num_cpus=2, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()  # no Ray workers left to load the machine for the tests that follow


def test_the_rllib_env_regroups_observations():
    from synergy_gym.agents.rllib_ppo import make_env

    env = make_env({"num_jobs": 10})
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"action_mask", "observations"} and env.observation_space.contains(obs)


@pytest.mark.slow
# RLlib registers its own single-agent env id once per algorithm it builds; not ours to fix.
@pytest.mark.filterwarnings("ignore:.*Overriding environment rllib-single-agent-env-v0:UserWarning")
@pytest.mark.parametrize("config", [{"num_jobs": 20},
                                    {"env_id": "Synergy-small-scarce-v0", "num_jobs": 20, "max_rounds": 2500}],
                         ids=["small", "small-scarce"])
def test_rllib_ppo_with_action_masking_runs_one_iteration(ray_session, config):
    from synergy_gym.agents.rllib_ppo import build_algorithm

    algo = build_algorithm(0, config, train_batch_size=200, minibatch_size=50, num_epochs=1)
    try:
        result = algo.train()
    finally:
        algo.stop()
    runners = result["env_runners"]
    # Episodes of 20 jobs finish within 200 steps; their return is −Σ JCT (hours).
    assert runners["num_env_steps_sampled"] >= 200 and runners["episode_return_mean"] < 0


@pytest.mark.parametrize(("argv", "message"), [
    (["--env-id", "Synergy-bogus"], "--env-id: unknown env 'Synergy-bogus'; valid: " + ", ".join(synergy_gym.SCENARIOS)),
    (["--num-jobs", "0"], "--num-jobs must be a positive integer, got 0"),
    (["--iterations", "-2"], "--iterations must be a positive integer, got -2"),
    (["--num-env-runners", "-1"], "--num-env-runners must be 0 (sample in this process) or more, got -1"),
    (["--num-jobs", "10000000"], "--num-jobs 10000000 on Synergy-small-v0: env kwarg num_jobs 10000000 exceeds"),
])
def test_bad_options_stop_in_one_line_before_ray_starts(argv, message, monkeypatch, capsys):
    from synergy_gym.agents.rllib_ppo import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails: these must stop before it (needs no Ray)
    assert usage_error(lambda: main(argv), capsys).startswith(message)

