"""The feature extractor (synergy_gym.agents.features.SynergyExtractor): shapes, empty slots, order of the slots."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.env.observation import LEVEL_FEATURES, SLOT_FEATURES, slot_arrays


def _extractor_and_batch(env_id="Synergy-small-scarce-v0", **kwargs):
    """The extractor, and a batch of three observations: the busiest queue of an episode first."""
    from synergy_gym.agents.features import SynergyExtractor

    env = gym.make(env_id, num_jobs=60, jobs_per_hour=20.0, **kwargs)
    obs, _ = env.reset(seed=1)
    seen, done = [], False
    while not done:
        seen.append(obs)
        obs, _, terminated, truncated, _ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        done = terminated or truncated
    busiest = max(range(len(seen)), key=lambda i: seen[i]["slot_mask"].sum())
    batch = [seen[busiest], seen[0], seen[-1]]
    extractor = SynergyExtractor(env.observation_space, global_dim=16, slot_dim=8)
    tensors = {k: torch.as_tensor(np.stack([o[k] for o in batch])) for k in batch[0]}
    return extractor, tensors


@pytest.mark.parametrize("levels", ["default", "grid"])
def test_extractor_shapes(levels):
    extractor, obs = _extractor_and_batch(levels=levels)
    slots, slot_levels = slot_arrays(obs)
    q, n_levels = slot_levels.shape[1:3]
    assert slots.shape == (3, q, len(SLOT_FEATURES)) and slot_levels.shape == (3, q, n_levels, len(LEVEL_FEATURES))
    assert obs["slots"].ndim == obs["slot_levels"].ndim == 2  # flat per environment
    assert n_levels == (45 if levels == "grid" else 5) and (extractor.n_slots, extractor.n_levels) == (q, n_levels)
    features = extractor(obs)
    assert features.shape == (3, 16 + (2 + q) * 8) == (3, extractor.features_dim)
    assert torch.isfinite(features).all()


def _with_slots(obs, slots, slot_levels):
    """``obs`` with its slot features replaced by the (batch, slots, …) arrays given, flattened as observed."""
    batch = slots.shape[0]
    return {**obs, "slots": slots.reshape(batch, -1).contiguous(), "slot_levels": slot_levels.reshape(batch, -1).contiguous()}


def test_extractor_ignores_empty_slots_and_pools_without_order():
    extractor, obs = _extractor_and_batch()
    slots, slot_levels = slot_arrays(obs)
    mask = obs["slot_mask"][0] > 0
    filled = int(mask.sum())
    q, n_levels = slot_levels.shape[1:3]
    assert 1 < filled < q  # some filled slots, some empty
    base = extractor(obs)
    # What an empty slot holds does not matter.
    noisy_slots, noisy_levels = slots.clone(), slot_levels.clone()
    noisy_slots[0, filled:] = torch.rand_like(noisy_slots[0, filled:])
    noisy_levels[0, filled:] = torch.rand_like(noisy_levels[0, filled:])
    noisy = _with_slots(obs, noisy_slots, noisy_levels)
    assert not torch.equal(noisy["slots"], obs["slots"]) and not torch.equal(noisy["slot_levels"], obs["slot_levels"])
    torch.testing.assert_close(extractor(noisy), base)
    # What a filled slot holds does.
    changed_slots = slots.clone()
    changed_slots[0, 0] = torch.rand_like(changed_slots[0, 0])
    assert not torch.allclose(extractor(_with_slots(obs, changed_slots, slot_levels))[0], base[0])
    # Pooled features do not depend on the slots' order; the ordered embeddings move with them.
    perm = torch.arange(q)
    perm[:filled] = perm[:filled].flip(0)
    swapped_slots, swapped_levels = slots.clone(), slot_levels.clone()
    swapped_slots[0], swapped_levels[0] = slots[0, perm], slot_levels[0, perm]
    swapped = _with_slots(obs, swapped_slots, swapped_levels)
    swapped["action_mask"] = obs["action_mask"].clone()
    swapped["action_mask"][0, : q * n_levels] = obs["action_mask"][0, : q * n_levels].reshape(q, n_levels)[perm].reshape(-1)
    out = extractor(swapped)
    pooled = slice(16, 16 + 2 * 8)
    torch.testing.assert_close(out[0, pooled], base[0, pooled])
    assert not torch.allclose(out[0, 16 + 2 * 8 :], base[0, 16 + 2 * 8 :])


def test_extractor_with_no_filled_slot_is_finite():
    extractor, obs = _extractor_and_batch()
    obs["slot_mask"][:] = 0
    features = extractor(obs)
    assert torch.isfinite(features).all()
    torch.testing.assert_close(features[:, 16:], torch.zeros_like(features[:, 16:]))
