"""The RLlib example builds and trains one iteration (needs the ray extra)."""

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")


@pytest.mark.slow
def test_rllib_ppo_with_action_masking_runs_one_iteration():
    from agents.rllib_ppo import build_algorithm, make_env

    env = make_env({"num_jobs": 10})
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"action_mask", "observations"} and env.observation_space.contains(obs)
    ray.init(ignore_reinit_error=True, include_dashboard=False, num_cpus=2, log_to_driver=False, logging_level="ERROR")
    algo = build_algorithm(0, {"num_jobs": 20}, train_batch_size=200, minibatch_size=50, num_epochs=1)
    try:
        result = algo.train()
    finally:
        algo.stop()
    runners = result["env_runners"]
    assert runners["num_env_steps_sampled"] >= 200 and runners["episode_return_mean"] < 0
