"""Sampled futures: the jobs that have arrived kept, the jobs to come drawn from the scenario's generator, and the
rollout over them (``rollout_bound --future sampled``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.baselines.base_episode import base_action
from synergy_gym.baselines.rollout_bound import RolloutPolicy, main
from synergy_gym.baselines.sampled_futures import draw_seeds, future_models, sampled_workload
from synergy_gym.errors import ConfigError

#: How the module's one-line errors start (as its argument parser's own).
ERROR = "python -m synergy_gym.baselines.rollout_bound: error: "

ENV = "Synergy-small-scarce-v0"


def _midway(num_jobs: int = 30, seed: int = 5, steps: int = 12):
    """A preemptive episode after ``steps`` tetris+greedy actions: (env, observation, actions taken)."""
    env = gym.make(ENV, preemptive=True, num_jobs=num_jobs)
    base = RolloutPolicy("tetris+greedy").base
    obs, _ = env.reset(seed=seed, options={"workload_seed": seed})
    history: list[int] = []
    for _ in range(steps):
        a = base_action(base, env, obs)
        history.append(a)
        obs, *_ = env.step(a)
    return env, obs, history


def test_a_sampled_workload_keeps_the_arrived_jobs_and_shifts_the_drawn_gaps_to_start_now():
    env = gym.make(ENV, num_jobs=40)
    past, drawn = env.unwrapped.workload_for_seed(1), env.unwrapped.workload_for_seed(2)
    arrived, now = 10, float(past.arrival_s[9]) + 500.0
    w = sampled_workload(past, drawn, arrived, now)
    assert len(w) == len(past)
    for name in ("job_id", "model", "gpus", "arrival_s", "total_iters", "measured"):
        assert np.array_equal(getattr(w, name)[:arrived], getattr(past, name)[:arrived]), name
    for name in ("model", "gpus", "total_iters", "measured"):
        assert np.array_equal(getattr(w, name)[arrived:], getattr(drawn, name)[arrived:]), name
    assert w.arrival_s[arrived] == now + drawn.arrival_s[arrived] - drawn.arrival_s[arrived - 1] > now
    assert np.array_equal(np.diff(w.arrival_s[arrived:]), np.diff(drawn.arrival_s[arrived:]))  # the gaps kept
    assert not np.array_equal(w.total_iters[arrived:], past.total_iters[arrived:])  # another future than the episode's
    assert np.array_equal(w.job_id[arrived:], np.arange(40, 70))  # never the episode's ids (their profiling noise)
    assert np.array_equal(sampled_workload(past, drawn, arrived, now, first_id=100).job_id[arrived:], np.arange(100, 130))
    with pytest.raises(ConfigError, match=r"first_id must be above the episode's job ids \(up to 39\), got 39"):
        sampled_workload(past, drawn, arrived, now, first_id=39)
    first = sampled_workload(past, drawn, 0, 0.0)  # nothing arrived: the drawn workload as it is
    assert np.array_equal(first.arrival_s, drawn.arrival_s) and np.array_equal(first.total_iters, drawn.total_iters)


def test_a_sampled_workload_refuses_what_cannot_be_a_future():
    env = gym.make(ENV, num_jobs=20)
    past, short = env.unwrapped.workload_for_seed(1), gym.make(ENV, num_jobs=10).unwrapped.workload_for_seed(2)
    with pytest.raises(ConfigError, match="arrived must be between 0 and the workload's 20 jobs, got 21"):
        sampled_workload(past, past, 21, 1e9)
    with pytest.raises(ConfigError, match="the drawn workload has 10 jobs, fewer than the episode's 20"):
        sampled_workload(past, short, 5, 1e9)
    with pytest.raises(ConfigError, match=r"job 4 of the episode arrives at \d+ s, after the current time 0 s"):
        sampled_workload(past, past, 5, 0.0)


def test_draw_seeds_are_repeatable_and_differ_between_decisions():
    assert draw_seeds(3, 7, 4) == draw_seeds(3, 7, 4)
    assert len(set(draw_seeds(3, 7, 4))) == 4
    assert set(draw_seeds(3, 7, 2)).isdisjoint(draw_seeds(3, 8, 2))
    assert all(0 <= s < 2**31 for s in draw_seeds(3, 7, 4))


def test_future_models_are_in_the_episode_state_with_other_jobs_to_come():
    env, obs, history = _midway()
    u = env.unwrapped
    now = u.sim.now
    arrived = int((u.sim.jobs.arrival_s <= now).sum())
    assert 0 < arrived < 30
    models = future_models(env, 5, history, 2)
    assert len(models) == 2
    for m in models:
        assert m.sim.now == now
        assert np.array_equal(m.action_masks(), u.action_masks())
        mobs = m._observation(m._state)
        for key, value in obs.items():  # the agent sees the same state
            assert np.array_equal(mobs[key], value), key
        assert np.array_equal(m.sim.jobs.arrival_s[:arrived], u.sim.jobs.arrival_s[:arrived])
        assert (m.sim.jobs.arrival_s[arrived:] > now).all()
        assert not np.array_equal(m.sim.jobs.arrival_s[arrived:], u.sim.jobs.arrival_s[arrived:])
    assert not np.array_equal(models[0].sim.jobs.arrival_s, models[1].sim.jobs.arrival_s)  # two futures
    again = future_models(env, 5, history, 2)
    assert all(np.array_equal(a.sim.jobs.arrival_s, b.sim.jobs.arrival_s) for a, b in zip(models, again))  # repeatable


def test_future_models_check_the_replay_reaches_the_episode_state():
    env, _, history = _midway()
    with pytest.raises(AssertionError, match="replayed 11 actions"):
        future_models(env, 5, history[:-1], 1)  # one action short of the episode's state
    with pytest.raises(AssertionError, match="replayed 12 actions"):
        future_models(env, 6, history, 1)  # another episode's past


def test_future_models_catch_a_replay_at_another_level_in_the_same_event():
    env, _, history = _midway(steps=3)
    u = env.unwrapped
    wrong = next(
        (i, a - a % u.layout.n_levels + k) for i, a in enumerate(history) if u.layout.kind(a) == "admit"
        for k in range(u.layout.n_levels) if k != a % u.layout.n_levels
    )
    replay = list(history)
    replay[wrong[0]] = wrong[1]  # the same job admitted at another level: masks and time may still agree
    with pytest.raises(AssertionError, match="replayed 3 actions"):
        future_models(env, 5, replay, 1)


def test_future_models_do_not_share_the_real_future_jobs_profiling_noise():
    env = gym.make(ENV, preemptive=True, num_jobs=20, sensitivity="profiled", profile_noise=0.3)
    base = RolloutPolicy("tetris+greedy").base
    obs, _ = env.reset(seed=5, options={"workload_seed": 5})
    history = []
    for _ in range(8):
        history.append(base_action(base, env, obs))
        obs, *_ = env.step(history[-1])
    u = env.unwrapped
    arrived = int((u.sim.jobs.arrival_s <= u.sim.now).sum())
    models = future_models(env, 5, history, 2)
    for m in models:
        assert np.array_equal(m.sim.jobs.belief[:arrived], u.sim.jobs.belief[:arrived])  # the same past estimates
        assert np.array_equal(m.sim.jobs.model[arrived:], u.sim.jobs.model[arrived:])  # (models rotate by position)
        assert not np.array_equal(m.sim.jobs.belief[arrived:], u.sim.jobs.belief[arrived:])  # not the real future's
        assert m.sim.jobs.job_id[arrived:].min() >= 20
    assert not np.array_equal(models[0].sim.jobs.belief[arrived:], models[1].sim.jobs.belief[arrived:])


def test_future_models_need_a_generated_workload():
    jobs = gym.make(ENV, num_jobs=10).unwrapped.workload_for_seed(1)
    env = gym.make(ENV, preemptive=True, workload=jobs)
    env.reset(seed=1)
    with pytest.raises(ConfigError, match="sampled futures need a generated workload"):
        future_models(env, 1, [], 1)


def test_a_sampled_future_rollout_averages_every_candidate_over_the_same_futures():
    env, obs, history = _midway()
    policy = RolloutPolicy("tetris+greedy", future="sampled", futures=3)
    d = policy.decide(env, obs, seed=5, history=history)
    assert d.rollouts == 3 * d.candidates  # the base candidate too: no value carries over
    models = future_models(env, 5, history, 3)
    known = RolloutPolicy("tetris+greedy")
    expected = np.mean([known.value(m, d.action) for m in models])
    assert d.value_s == pytest.approx(expected, rel=1e-12)
    assert d.value_s <= d.base_value_s
    with pytest.raises(ConfigError, match="needs the episode's workload seed"):
        policy.decide(env, obs)


def test_a_sampled_future_episode_is_repeatable_and_samples_every_kth_decision():
    policy = RolloutPolicy("tetris+greedy", future="sampled", futures=2, every=3)
    first = policy.run_episode(gym.make(ENV, preemptive=True, num_jobs=14), 4)
    again = policy.run_episode(gym.make(ENV, preemptive=True, num_jobs=14), 4)
    assert first.actions == again.actions and first.total_jct_s == again.total_jct_s
    assert first.sampled == -(-first.decisions // 3)
    assert first.rollouts == round(2 * first.mean_candidates * first.sampled)


@pytest.mark.parametrize("futures", [0, -2, True, 2.5])
def test_futures_must_be_a_whole_number_of_at_least_one(futures, capsys):
    with pytest.raises(ConfigError, match=f"--futures must be a whole number of at least 1, got {futures!r}"):
        RolloutPolicy(future="sampled", futures=futures)
    if isinstance(futures, int) and not isinstance(futures, bool):
        assert main(["--future", "sampled", "--futures", str(futures), "--seeds", "1"]) == 2
        assert capsys.readouterr().err == ERROR + f"--futures must be a whole number of at least 1, got {futures}\n"


def test_futures_is_refused_without_sampled_futures(capsys):
    assert main(["--futures", "3", "--seeds", "1"]) == 2
    assert capsys.readouterr().err == ERROR + "--futures applies only with --future sampled, not --future known\n"
