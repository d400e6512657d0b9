"""The RLlib example builds and trains one iteration, on the paper's small id and a scarce one (needs the ray extra)."""

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")


@pytest.fixture(scope="module")
def ray_session():
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
