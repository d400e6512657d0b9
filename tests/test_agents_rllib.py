"""The RLlib example trains on a scarce scenario too (needs the ray extra)."""

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")


@pytest.mark.slow
def test_rllib_ppo_trains_one_iteration_on_a_scarce_scenario():
    from agents.rllib_ppo import build_algorithm

    ray.init(ignore_reinit_error=True, include_dashboard=False, num_cpus=2, log_to_driver=False, logging_level="ERROR")
    config = {"env_id": "Synergy-small-scarce-v0", "num_jobs": 20, "max_rounds": 2500}
    algo = build_algorithm(0, config, train_batch_size=200, minibatch_size=50, num_epochs=1)
    try:
        result = algo.train()
    finally:
        algo.stop()
    runners = result["env_runners"]
    # Episodes of 20 jobs finish within 200 steps; their return is −Σ JCT (hours).
    assert runners["num_env_steps_sampled"] >= 200 and runners["episode_return_mean"] < 0
