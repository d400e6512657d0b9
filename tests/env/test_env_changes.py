"""``preemptive=True`` deciding only what changes (``redecide="changes"``, the default with preemption).

Running jobs keep their GPUs and level at an event unless the agent preempts them; the agent
admits waiting jobs (after the running ones, or ahead of them), preempts a running row, or stops.
"""

import gymnasium as gym
import numpy as np
import pytest

from synergy_gym.baselines.env_heuristics import env_heuristics
from synergy_gym.env import SynergyEnv
from synergy_gym.env.calls import EnvCallError
from synergy_gym.env.observation import RUNNING_SLOT_FEATURES, SLOT_FEATURES, slot_arrays
from synergy_gym.env.observe_rows_kernel import ROW_WIDTH
from synergy_gym.errors import ConfigError, UnknownNameError

SMALL = {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 40, "max_rounds": 20_000, "preemptive": True}
SCARCE = {"cluster": {"num_servers": 4, "cpus_per_server": 16}, "class_split": (60, 20, 20), "jobs_per_hour": 3.0}
_WAS_RUNNING = SLOT_FEATURES.index("was_running")


def layout_of(env: SynergyEnv) -> tuple[int, int, int, int]:
    """(admissions, first ahead action, first preemption action, stop)."""
    lay = env.layout
    return lay.ahead, lay.ahead, lay.preempt, lay.stop


def first_decision_with_running_rows(env: SynergyEnv, seed: int = 0, heuristic: str = "fifo+tune"):
    """Step ``heuristic`` until an observation shows running rows and a waiting job; that observation."""
    policy = env_heuristics()[heuristic]
    obs, _ = env.reset(seed=seed)
    while not (obs["running_mask"].any() and env.state.n_waiting):
        obs, _, terminated, truncated, _ = env.step(int(policy.predict(obs)[0]))
        assert not (terminated or truncated), "no decision with running rows in the episode"
    return obs


def test_the_spaces_have_running_rows_ahead_admissions_and_slot_fits():
    env = SynergyEnv(**SMALL)
    q, n_levels, rows = env.cfg.max_queue, env.levels.n_levels, env.cfg.max_running
    assert env.action_space.n == 2 * q * n_levels + rows + 1
    space = env.observation_space
    assert space["running_slots"].shape == (rows * len(RUNNING_SLOT_FEATURES),)
    assert space["running_mask"].shape == (rows,)
    assert space["slot_fits"].shape == (q * n_levels,)
    # The old re-decision keeps the old spaces; the default mode has none of the new keys.
    for kwargs in ({**SMALL, "redecide": "every_event"}, {**SMALL, "preemptive": False}):
        other = SynergyEnv(**kwargs)
        assert other.action_space.n == q * n_levels + 1
        assert not {"running_slots", "running_mask", "slot_fits"} & set(other.observation_space.spaces)


def test_bad_mode_kwargs_get_one_line_errors():
    with pytest.raises(UnknownNameError, match="redecide .always.; valid: changes, every_event"):
        SynergyEnv(**SMALL, redecide="always")
    with pytest.raises(ConfigError, match="max_running"):
        SynergyEnv(**SMALL, max_running=0)
    with pytest.raises(ConfigError, match="fit_features"):
        SynergyEnv(**SMALL, fit_features="yes")


@pytest.mark.parametrize("seed", [0, 1])
def test_running_rows_are_the_running_jobs_and_the_mask_offers_each(seed):
    env = SynergyEnv(**SMALL)
    obs = first_decision_with_running_rows(env, seed)
    s = env.state
    rows = s.running_rows
    n = int(obs["running_mask"].sum())
    assert n == rows.size == min(s.n_kept, env.cfg.max_running) > 0
    assert set(rows.tolist()) <= set(env.sim.ledger.jobs.tolist())  # they hold GPUs now
    _, _, preempt, stop = layout_of(env)
    mask = env.action_masks()
    assert mask[preempt : preempt + n].all() and not mask[preempt + n : stop].any() and mask[stop]
    width = len(RUNNING_SLOT_FEATURES)
    assert width == ROW_WIDTH
    table = obs["running_slots"].reshape(-1, width)
    assert (table[n:] == 0).all() and (table[:n, RUNNING_SLOT_FEATURES.index("gpu_share")] > 0).all()
    col = {name: i for i, name in enumerate(RUNNING_SLOT_FEATURES)}
    ledger, jobs = env.sim.ledger, env.sim.jobs
    levels = slot_arrays({**obs, "slot_levels": obs["slot_levels"]})[1]
    for r, j in enumerate(rows):
        slot = int(np.flatnonzero(ledger.jobs == j)[0])
        c = env.cluster
        held = jobs.gpus[j] * np.array([ledger.cpu[slot] / c.total_cpus, ledger.mem[slot] / c.total_mem_gb])
        np.testing.assert_allclose(table[r, [col["frees_cpu"], col["frees_mem"]]], held, rtol=1e-5)
        left_h = (jobs.total_iters[j] - jobs.executed[j]) * jobs.iter_time_s[j] / ledger.tput[slot] / 3600.0
        assert table[r, col["runtime_now"]] == pytest.approx(left_h / (left_h + 10.0), rel=1e-5)
        level = s.level[j]
        expected = [s.level_cpu[j, level] / c.fair_cpus_per_gpu, s.level_mem[j, level] / c.fair_mem_gb_per_gpu,
                    s.level_tput[j, level] / jobs.tput_fair[j]]
        np.testing.assert_allclose(table[r, [col["level_cpu"], col["level_mem"], col["level_speedup"]]],
                                   np.minimum(expected, [16.0, 16.0, 8.0]), rtol=1e-5)
        assert table[r, col["age"]] == pytest.approx(obs_age(env, j), rel=1e-5)
    assert levels.shape[0] == env.cfg.max_queue


def obs_age(env: SynergyEnv, j: int) -> float:
    """Job ``j``'s age as observed (squashed hours)."""
    age_h = (env.sim.now - env.sim.jobs.arrival_s[j]) / 3600.0
    return age_h / (age_h + 10.0)


def test_preempting_a_row_puts_its_job_back_in_the_waiting_slots():
    env = SynergyEnv(**SMALL)
    obs = first_decision_with_running_rows(env)
    s = env.state
    _, _, preempt, _ = layout_of(env)
    r = int(obs["running_mask"].sum()) - 1
    job = int(s.running_rows[r])
    free_before = obs["cluster"][0]
    obs, _, _, _, info = env.step(preempt + r)
    assert not info["invalid_action"] and env.state.preemptions == 1
    assert job not in env.sim.ledger.jobs and job not in env.state.running_rows
    slot = int(np.flatnonzero(env.slot_jobs == job)[0])
    assert obs["slots"].reshape(-1, len(SLOT_FEATURES))[slot, _WAS_RUNNING] == 1.0
    assert obs["cluster"][0] > free_before  # its GPUs are free
    assert env.episode_summary()["preemptions"] == 1


def test_an_ahead_admission_is_placed_before_the_running_jobs():
    env = SynergyEnv(**SMALL)
    first_decision_with_running_rows(env)
    while not env.action_masks()[: env.layout.ahead].any():  # wait for a decision where a job fits
        _, _, preempt, _ = layout_of(env)
        env.step(preempt)  # make room: preempt row 0
    s = env.state
    kept = s.held_buf[: s.n_held].copy()
    mask = env.action_masks()
    a = int(np.flatnonzero(mask[: env.layout.ahead])[0])
    assert mask[env.layout.ahead + a]  # the same admission, ahead, is valid
    job = int(env.slot_jobs[a // env.levels.n_levels])
    env.step(env.layout.ahead + a)
    order = env.sim.ledger.jobs.tolist()
    assert order[0] == job and order[1 : 1 + kept.size] == kept.tolist()


def test_an_ahead_admission_with_nothing_running_falls_back_to_an_admission():
    env = SynergyEnv(**{**SMALL, "num_jobs": 5})
    env.reset(seed=0)
    assert env.state.n_kept == 0
    mask = env.action_masks()
    assert not mask[env.layout.ahead : env.layout.preempt].any()
    _, _, _, _, info = env.step(env.layout.ahead + 1)
    assert info["invalid_action"] and env.sim.ledger.n_slots == 1
    raising = SynergyEnv(**{**SMALL, "num_jobs": 5}, invalid_action="raise")
    raising.reset(seed=0)
    with pytest.raises(EnvCallError, match="ahead"):
        raising.step(raising.layout.ahead + 1)


def test_a_masked_preemption_falls_back_to_the_last_row_or_raises():
    env = SynergyEnv(**SMALL)
    obs = first_decision_with_running_rows(env)
    n = int(obs["running_mask"].sum())
    last = int(env.state.running_rows[n - 1])
    _, _, _, _, info = env.step(env.layout.stop - 1)  # the last row's action: empty unless all rows are filled
    if n < env.cfg.max_running:
        assert info["invalid_action"]
    assert last not in env.sim.ledger.jobs
    raising = SynergyEnv(**SMALL, invalid_action="raise")
    first_decision_with_running_rows(raising)
    with pytest.raises(EnvCallError, match="running row"):
        raising.step(raising.layout.stop - 1)


def test_a_preemption_with_nothing_running_is_counted_as_masked_even_where_its_admission_is_valid():
    # It falls back to the last slot's fair share; with one slot that admission is valid, and the
    # action was still masked (the fuzzer found the flag missing here).
    env = SynergyEnv(**{**SMALL, "max_queue": 1})
    env.reset(seed=0)
    mask = env.action_masks()
    assert env.state.n_preemptable == 0 and mask[0] and not mask[env.layout.preempt]
    _, _, _, _, info = env.step(env.layout.preempt)
    assert info["invalid_action"] and env.sim.ledger.n_slots == 1


def test_slot_fits_is_whether_the_servers_have_room_at_that_level():
    env = SynergyEnv(**{**SMALL, **SCARCE})
    obs = first_decision_with_running_rows(env, heuristic="tetris+greedy")
    s, ledger = env.state, env.sim.ledger
    fits = obs["slot_fits"].reshape(env.cfg.max_queue, -1)
    for q, j in enumerate(env.slot_jobs):
        for level in range(env.levels.n_levels):
            c, m = s.level_cpu[j, level], s.level_mem[j, level]
            room = sum(min(int(g), int((fc + 1e-9) // c), int((fm + 1e-9) // m))
                       for g, fc, fm in zip(ledger.free_gpu, ledger.free_cpu, ledger.free_mem))
            assert fits[q, level] == (room >= env.sim.jobs.gpus[j] and s.fits_buf[q]), (q, level)
    assert (fits[env.slot_jobs.size :] == 0).all()


@pytest.mark.parametrize("kwargs", [pytest.param({}, id="single-gpu"), pytest.param({"multigpu": True}, id="multi-gpu"),
                                    pytest.param({**SCARCE, "levels": "grid"}, id="scarce-grid")])
def test_every_action_of_the_space_is_accepted_and_episodes_end(kwargs):
    env = gym.make("Synergy-small-v0", **{**SMALL, **kwargs, "num_jobs": 25})
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=3)
    done, steps = False, 0
    while not done:
        a = int(rng.integers(env.action_space.n)) if steps % 2 else int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, _, terminated, truncated, _ = env.step(a)
        assert env.observation_space.contains(obs)
        done, steps = terminated or truncated, steps + 1
    assert terminated and env.unwrapped.episode_summary()["jobs_unfinished"] == 0


def test_a_job_admitted_in_an_event_cannot_be_preempted_in_it():
    # So an event takes at most (running + waiting) admissions and preemptions, and a stop.
    env = SynergyEnv(**SMALL)
    obs = first_decision_with_running_rows(env)
    s = env.state
    n_rows = int(obs["running_mask"].sum())
    while env.action_masks()[: env.layout.ahead].any():
        a = int(np.flatnonzero(env.action_masks()[: env.layout.ahead])[0])
        admitted = int(env.slot_jobs[a // env.levels.n_levels])
        now = env.sim.now
        obs, *_ = env.step(a)
        if env.sim.now != now:
            break
        assert admitted not in s.running_rows and int(obs["running_mask"].sum()) == n_rows


def documented_fallback(env: SynergyEnv, a: int) -> int:
    """The valid action that action ``a`` stands for now, by synergy_gym/env/masks.py's rules for this mode."""
    lay, s, mask = env.layout, env.state, env.action_masks()
    q, n_levels = env.cfg.max_queue, env.levels.n_levels
    if a == lay.stop or mask[a]:
        return a
    if a >= lay.preempt:
        if s.n_preemptable:
            return lay.preempt + s.n_preemptable - 1  # the last filled row
        ahead, base = False, (q - 1) * n_levels  # the last slot's fair share, a masked admission
    else:
        ahead = a >= lay.ahead
        base = a - lay.ahead if ahead else a
    slot, level = divmod(base, n_levels)
    filled = env.slot_jobs.size
    valid = mask[: q * n_levels].reshape(q, n_levels)[:filled]
    if not (slot < filled and valid[slot, level]):
        usable = np.flatnonzero(valid.any(axis=1))  # offered slots whose job fits (agent_orders=False: one)
        if usable.size == 0:
            return lay.stop
        near = min(slot, filled - 1)  # an empty slot: the last filled one; then the nearest offered slot
        slot = int(usable[np.lexsort((usable, np.abs(usable - near)))[0]])
        levels = np.flatnonzero(valid[slot])
        if env.cfg.levels == "grid":
            n_mem = len(env.zoo.mem_grid)
            steps = np.abs(levels // n_mem - level // n_mem) + np.abs(levels % n_mem - level % n_mem)
        else:
            steps = np.abs(levels - level)
        level = int(levels[np.argmin(steps)])
    return slot * n_levels + level + (lay.ahead if ahead and s.n_kept else 0)


@pytest.mark.parametrize("kwargs", [
    pytest.param({}, id="single-gpu"),
    pytest.param({**SCARCE, "multigpu": True, "max_queue": 3, "max_running": 4}, id="scarce-multigpu-few-rows"),
    pytest.param({"agent_orders": False, "levels": "grid", "max_queue": 6}, id="fifo-order-grid"),
])
def test_masked_actions_fall_back_as_documented(kwargs):
    """Env A takes raw actions (fallback); its twin B takes the documented valid action in "raise" mode."""
    a_env = SynergyEnv(**{**SMALL, **kwargs})
    b_env = SynergyEnv(**{**SMALL, **kwargs}, invalid_action="raise")
    rng = np.random.default_rng(0)
    kinds = {"admission": 0, "ahead": 0, "preemption": 0, "stop": 0}
    for seed in (0, 1):
        oa, _ = a_env.reset(seed=seed)
        b_env.reset(seed=seed)
        done, steps = False, 0
        while not done and steps < 1500:
            a = int(rng.integers(a_env.action_space.n))
            valid = documented_fallback(a_env, a)
            mask = a_env.action_masks()
            assert mask[valid]
            lay = a_env.layout
            if not mask[a]:
                kinds["stop" if valid == lay.stop else "preemption" if valid >= lay.preempt
                      else "ahead" if valid >= lay.ahead else "admission"] += 1
            oa, ra, ta, ua, ia = a_env.step(a)
            ob, rb, tb, ub, ib = b_env.step(valid)
            assert ia["invalid_action"] is (not mask[a]) and not ib["invalid_action"]
            assert (ra, ta, ua) == (rb, tb, ub)
            for key in oa:
                np.testing.assert_array_equal(oa[key], ob[key], err_msg=key)
            done, steps = ta or ua, steps + 1
    assert kinds["admission"] and kinds["ahead"] and kinds["preemption"] + kinds["stop"], kinds


def test_agent_orders_false_offers_the_earliest_job_that_fits_not_the_first_slot():
    """Every waiting job has a slot here; one that does not fit must not block a later one that does."""
    kwargs = {**SMALL, **SCARCE, "multigpu": True, "jobs_per_hour": 8.0}
    ordered, fifo = SynergyEnv(**kwargs), SynergyEnv(**kwargs, agent_orders=False)
    blocked = 0
    for seed in (0, 1):
        ordered.reset(seed=seed)
        fifo.reset(seed=seed)
        done = False
        while not done:
            s, mask = fifo.state, fifo.action_masks()
            fitting = np.flatnonzero(s.fits[: s.n_slots])
            offered = np.flatnonzero(mask[: fifo.layout.ahead].reshape(fifo.cfg.max_queue, -1).any(axis=1))
            assert offered.tolist() == fitting[:1].tolist()
            blocked += bool(fitting.size and fitting[0] > 0)
            # The first valid action (the earliest job that fits, at its lowest valid level; else a preemption
            # or stop) is the same decision whether or not the agent may pick the slot.
            action = int(np.flatnonzero(mask)[0])
            assert ordered.action_masks()[action]
            ordered.step(action)
            _, _, terminated, truncated, _ = fifo.step(action)
            done = terminated or truncated
        assert fifo.episode_summary()["mean_jct_h"] == ordered.episode_summary()["mean_jct_h"]
    assert blocked > 0  # a job that fits stood behind one that does not


def test_the_render_names_the_earliest_job_that_fits_or_none():
    env = SynergyEnv(**{**SMALL, **SCARCE, "multigpu": True, "jobs_per_hour": 8.0}, render_mode="ansi")
    env.reset(seed=0)
    seen = {"fits": 0, "none": 0}
    done = False
    while not done:
        s, text = env.state, env.render()
        fitting = np.flatnonzero(s.fits[: s.n_slots])
        if fitting.size:
            job = int(s.slots[fitting[0]])
            assert f"deciding job {env.sim.jobs.job_id[job]} " in text
        else:
            assert "deciding job" not in text  # nothing fits: the choice is to preempt or stop
        seen["fits" if fitting.size else "none"] += 1
        _, _, terminated, truncated, _ = env.step(int(np.flatnonzero(env.action_masks())[0]))
        done = terminated or truncated
    assert min(seen.values()) > 0
