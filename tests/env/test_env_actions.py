"""Every action of the ``Discrete`` space is accepted: masked ones fall back (or raise), as documented.

The rules (``synergy_gym/env/masks.py``'s docstring): an empty slot → the last filled slot; a slot
other than the first with ``agent_orders=False`` → the first slot; at the chosen level, or where
that level can never be honoured for the slot's job, the nearest valid level (default levels: the
nearest index, the lower first; grid levels: the fewest steps in CPUs and memory, the lower index
first). So a masked action always admits a job; only *stop* stops.
"""

import numpy as np
import pytest

from synergy_gym import ClusterSpec, ModelZoo
from synergy_gym.env import ActionLayout, SynergyEnv
from synergy_gym.env.decision_kernels import offer
from synergy_gym.env.levels import GridPoints, honourable_points

SMALL = {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 40, "max_rounds": 20_000}
SCARCE = {"cluster": {"num_servers": 4, "cpus_per_server": 12}, "class_split": (60, 20, 20)}
ZOO = ModelZoo.default()
GRID = GridPoints(ZOO)
N_MEM = len(ZOO.mem_grid)

#: Preemptive, every job decided again at every event (the actions of the default mode); deciding
#: only what changes adds ahead admissions and preemptions: tests/env/test_env_changes.py.
EVERY_EVENT = {"preemptive": True, "redecide": "every_event"}
CASES = [
    pytest.param({}, id="default"),
    pytest.param(EVERY_EVENT, id="preemptive"),
    pytest.param({"agent_orders": False, "jobs_per_hour": 6.0}, id="fifo-order"),
    pytest.param({"agent_orders": False, **EVERY_EVENT, "levels": "grid"}, id="fifo-order-grid-preemptive"),
    pytest.param({"levels": "grid", "multigpu": True, "jobs_per_hour": 4.0}, id="grid-multigpu"),
    pytest.param({**SCARCE, "levels": "grid", "max_queue": 4, "jobs_per_hour": 4.0}, id="grid-scarce"),
    pytest.param({**SCARCE, "multigpu": True, **EVERY_EVENT, "max_queue": 3}, id="scarce-multigpu-preemptive"),
]


def documented_fallback(env, a: int) -> tuple[int, int, int]:
    """(valid action, slot, level) that action ``a`` stands for at the current decision, from the docstring's rules.

    slot −1: stop.
    """
    n_levels = (env.action_space.n - 1) // env.cfg.max_queue
    stop = env.action_space.n - 1
    mask = env.action_masks()
    filled = env.slot_jobs.size
    if a == stop:
        return stop, -1, -1
    slot, level = divmod(a, n_levels)
    if mask[a]:
        return a, slot, level
    slot = min(slot, filled - 1) if env.cfg.agent_orders else 0
    row = mask[slot * n_levels : (slot + 1) * n_levels]
    valid = np.flatnonzero(row)
    assert valid.size, "the fair share is always valid"
    if env.cfg.levels == "grid":
        ci, mi = divmod(level, N_MEM)
        steps = np.abs(valid // N_MEM - ci) + np.abs(valid % N_MEM - mi)
    else:
        steps = np.abs(valid - level)
    k = int(valid[np.argmin(steps)])  # argmin: the lower index among the nearest
    return slot * n_levels + k, slot, k


def draw(env, rng) -> int:
    """Half uniformly over the space, half a filled slot (or just past them) at a random level."""
    n_levels = (env.action_space.n - 1) // env.cfg.max_queue
    if rng.random() < 0.5:
        return int(rng.integers(env.action_space.n))
    slot = int(rng.integers(min(env.slot_jobs.size + 1, env.cfg.max_queue)))
    return slot * n_levels + int(rng.integers(n_levels))


@pytest.mark.parametrize("kwargs", CASES)
def test_fallback_accepts_every_action_and_follows_the_documented_rules(kwargs):
    """Env A takes raw actions (fallback); its twin B takes the documented valid action in "raise" mode."""
    a_env = SynergyEnv(**{**SMALL, **kwargs})
    b_env = SynergyEnv(**{**SMALL, **kwargs}, invalid_action="raise")
    rng = np.random.default_rng(0)
    for seed in (0, 1):
        oa, _ = a_env.reset(seed=seed)
        ob, _ = b_env.reset(seed=seed)
        flagged = admitted = steps = 0
        fell_back = {"last slot": 0, "slot 0": 0, "level": 0}
        done = False
        while not done and steps < 1500:
            a = draw(a_env, rng)
            mask = a_env.action_masks()
            slots = a_env.slot_jobs
            valid_a, slot, level = documented_fallback(a_env, a)
            assert mask[valid_a]
            if not mask[a]:
                assert slot >= 0  # a masked action admits a job
                raw_slot = a // ((a_env.action_space.n - 1) // a_env.cfg.max_queue)
                kind = "level" if raw_slot == slot else "slot 0" if slot == 0 and raw_slot < slots.size else "last slot"
                fell_back[kind] += 1
            oa, ra, ta, ua, ia = a_env.step(a)
            ob, rb, tb, ub, ib = b_env.step(valid_a)
            assert ia["invalid_action"] is (not mask[a])  # flagged exactly when the action was masked
            assert not ib["invalid_action"]
            assert (ra, ta, ua) == (rb, tb, ub)
            for key in oa:
                np.testing.assert_array_equal(oa[key], ob[key], err_msg=key)
            if slot >= 0:
                assert a_env.level_of(int(slots[slot])) == level  # the slot's job was admitted at that level
                admitted += 1
            flagged += ia["invalid_action"]
            steps += 1
            done = ta or ua
        assert flagged > 0 and admitted > 0
        if done:
            assert ia["invalid_actions"] == flagged
    # Each rule that applies to this configuration was exercised.
    assert fell_back["last slot"] > 0
    if not kwargs.get("agent_orders", True):
        assert fell_back["slot 0"] > 0
    if kwargs.get("levels") == "grid":
        assert fell_back["level"] > 0


def test_fallback_on_the_sample_of_the_action_space_never_raises():
    env = SynergyEnv(**SMALL, preemptive=True, levels="grid", max_queue=8)
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(3000):
        _, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert np.isfinite(reward) and isinstance(info["invalid_action"], bool)
        if terminated or truncated:
            env.reset()


@pytest.mark.parametrize(
    "cluster", [ClusterSpec(), ClusterSpec(cpus_per_server=12), ClusterSpec(cpus_per_server=16, mem_gb_per_server=250)],
    ids=["24cpu", "12cpu", "16cpu-250gb"],
)
def test_grid_fallback_is_the_nearest_valid_point_for_every_model(cluster):
    layout = ActionLayout(1, len(GRID.cpu), True, "fallback", (len(ZOO.cpu_grid), N_MEM))
    checked = 0
    for model in range(len(ZOO)):
        tput = ZOO.throughput_many(np.full(GRID.cpu.size, model), GRID.cpu, GRID.mem)
        capped = ZOO.throughput_many(
            np.full(GRID.cpu.size, model),
            np.minimum(GRID.cpu, cluster.fair_cpus_per_gpu),
            np.minimum(GRID.mem, cluster.fair_mem_gb_per_gpu),
        )
        fair = ZOO.throughput_of(model, cluster.fair_cpus_per_gpu, cluster.fair_mem_gb_per_gpu)
        for gpus in (1, 2, 4, 8, 16):
            row = honourable_points(cluster, GRID.cpu, GRID.mem, tput, capped, fair, gpus)
            valid = np.flatnonzero(row)
            for level in range(GRID.cpu.size):
                slot, got, invalid = layout.resolve(level, row[None, :])
                assert slot == 0 and invalid is (not row[level]) and row[got]
                if row[level]:
                    assert got == level
                    continue
                ci, mi = divmod(level, N_MEM)
                steps = np.abs(valid // N_MEM - ci) + np.abs(valid % N_MEM - mi)
                assert got == valid[np.argmin(steps)]  # the nearest; among equals the lower index
                checked += 1
    assert checked > 100


def test_layout_rules_on_small_cases():
    valid = np.array([[True, True, True, True, True], [True, False, False, False, True]])
    layout = ActionLayout(3, 5, True, "fallback", None)
    assert layout.n == 16 and layout.stop == 15
    assert layout.resolve(15, valid) == (-1, -1, False)  # stop
    assert layout.resolve(12, valid) == (1, 0, True)  # slot 2 is empty → slot 1; level 2 → 0 (the lower of 0, 4)
    assert layout.resolve(13, valid) == (1, 4, True)  # level 3 → 4
    assert layout.resolve(11, valid) == (1, 0, True)  # slot 2 empty → slot 1, level 1 masked → 0
    assert layout.resolve(6, valid) == (1, 0, True)  # slot 1, level 1 is masked → the nearest valid level
    assert layout.resolve(8, valid) == (1, 4, True)  # level 3 → 4
    assert layout.resolve(4, valid) == (0, 4, False)
    # An empty slot is the last filled slot at the chosen level, where that level is valid there.
    assert layout.resolve(14, valid) == (1, 4, True)
    assert layout.resolve(10, valid) == (1, 0, True)
    wide = ActionLayout(6, 5, True, "fallback", None)
    for empty_slot in range(2, 6):  # every empty slot, not just the next one, goes to the last filled slot
        for level in range(5):
            expected_level = level if valid[1, level] else (0 if level < 3 else 4)  # nearest valid, the lower first
            assert wide.resolve(empty_slot * 5 + level, valid) == (1, expected_level, True)
    assert wide.resolve(3 * 5 + 2, valid[:1]) == (0, 2, True)  # one filled slot: it takes every empty slot's action
    assert wide.resolve(wide.stop, valid[:1]) == (-1, -1, False)  # only stop stops
    fifo = ActionLayout(3, 5, False, "fallback", None)
    assert fifo.resolve(9, valid) == (0, 4, True)  # slot 1 is not offered → slot 0, same level
    assert fifo.resolve(14, valid) == (0, 4, True)  # an empty slot too
    assert fifo.resolve(2, valid) == (0, 2, False)
    # The mask the environment builds (decision_kernels.offer) for two waiting jobs that fit, once
    # the job admitted since the last offer (2) is taken out of the waiting jobs.
    level_valid = np.vstack([valid, valid[:1]])
    for lay, want in ((fifo, [1.0] * 5 + [0.0] * 10 + [1.0]), (layout, [1.0] * 5 + [1, 0, 0, 0, 1] + [0.0] * 5 + [1.0])):
        mask = np.empty(lay.n, dtype=np.float32)
        waiting, fits, slots = np.array([0, 2, 1, 7]), np.zeros(4, dtype=bool), np.full(3, -1)
        got = offer(waiting, 3, 2, np.array([1, 1, 1]), 8, level_valid, 3, lay.slots_offered, fits, slots, mask)
        assert got == (2, 2) and waiting[:2].tolist() == [0, 1] and fits[:2].all() and slots[:2].tolist() == [0, 1]
        assert mask.tolist() == want
    # Nothing fits: the mask is left as it was, no slot is filled.
    mask = np.full(layout.n, 0.5, dtype=np.float32)
    fits = np.ones(2, dtype=bool)
    assert offer(np.array([0, 1]), 2, -1, np.array([4, 4]), 2, valid, 3, 3, fits, np.zeros(3, dtype=np.int64), mask) == (2, 0)
    assert not fits.any() and (mask == 0.5).all()


@pytest.mark.parametrize("kwargs", CASES)
def test_raise_mode_refuses_masked_actions_naming_them_and_keeps_the_state(kwargs):
    env = SynergyEnv(**{**SMALL, **kwargs}, invalid_action="raise")
    twin = SynergyEnv(**{**SMALL, **kwargs}, invalid_action="raise")
    rng = np.random.default_rng(3)
    env.reset(seed=2)
    twin.reset(seed=2)
    refused = 0
    for _ in range(400):
        mask = env.action_masks()
        masked = np.flatnonzero(~mask)
        for a in rng.choice(masked, size=min(3, masked.size), replace=False):
            stops = env.action_space.n - 1
            with pytest.raises(ValueError, match=rf"^env\.step\(\): action {a} is masked: .*; action {stops} stops$"):
                env.step(int(a))
            refused += 1
        valid = np.flatnonzero(mask)
        a = int(valid[rng.integers(valid.size)])
        o1, r1, t1, u1, i1 = env.step(a)
        o2, r2, t2, u2, _ = twin.step(a)  # the refused actions changed nothing
        assert (r1, t1, u1) == (r2, t2, u2) and not i1["invalid_action"]
        for key in o1:
            np.testing.assert_array_equal(o1[key], o2[key])
        if t1 or u1:
            break
    assert refused > 100


def test_raise_mode_messages_say_why():
    env = SynergyEnv(**SMALL, invalid_action="raise")
    env.reset(seed=0)
    filled = env.slot_jobs.size
    with pytest.raises(ValueError, match=rf"action {(filled + 1) * 5} is masked: slot {filled + 1} is empty"):
        env.step((filled + 1) * 5)
    fifo = SynergyEnv(**{**SMALL, "jobs_per_hour": 30.0}, invalid_action="raise", agent_orders=False)
    fifo.reset(seed=0)
    while fifo.slot_jobs.size < 2:
        fifo.step(fifo.action_space.n - 1)
    message = r"action 6 is masked: agent_orders=False offers only slot 0 \(the earliest arrival that fits\), not slot 1"
    with pytest.raises(ValueError, match=message):
        fifo.step(6)
    grid = SynergyEnv(**{**SMALL, **SCARCE}, invalid_action="raise", levels="grid")
    grid.reset(seed=0)
    bad = int(np.flatnonzero(~grid.action_masks()[:45])[0])
    message = rf"action {bad} is masked: level {bad} can never be honoured for slot 0's job \(valid levels: \["
    with pytest.raises(ValueError, match=message):
        grid.step(bad)


@pytest.mark.parametrize("mode", ["fallback", "raise"])
def test_actions_outside_the_space_or_not_integers_raise_in_both_modes(mode):
    env = SynergyEnv(**SMALL, invalid_action=mode)
    env.reset(seed=0)
    n = env.action_space.n
    for a in (-1, n, n + 10, np.int64(n), 10**12):
        with pytest.raises(ValueError, match=rf"action {int(a)} is out of range: the action space is 0\.\.{n - 1}"):
            env.step(a)
    for a in (1.5, "1", None, [1, 2], np.array([1, 2]), True, np.bool_(True), float("nan"), np.array(0.5), 1 + 0j):
        with pytest.raises(ValueError, match="is not a single integer"):
            env.step(a)
    # Integers of any numpy flavour, 0-d and 1-element arrays (what vector envs and SB3 pass), integral floats.
    twin = SynergyEnv(**SMALL, invalid_action=mode)
    twin.reset(seed=0)
    for a in (np.int64(1), np.int32(1), np.uint8(1), np.array(1), np.array([1]), 1.0, np.float32(1.0)):
        o1, r1, *_ = env.step(a)
        o2, r2, *_ = twin.step(1)
        assert r1 == r2
        np.testing.assert_array_equal(o1["action_mask"], o2["action_mask"])
