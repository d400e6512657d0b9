"""The per-slot action head (synergy_gym.agents.slot_policy), the imitation's learning rate, the stop on a stalled run."""

import re

import numpy as np
import pandas as pd
import pytest
import torch

from tests.support.agent_runs import SMALL_ENV, tiny_train_config

ENV = "Synergy-small-scarce-v0"


def tiny(**extra):
    return tiny_train_config(ENV, **extra)


def per_slot_model(algo="maskable_ppo"):
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    import synergy_gym  # noqa: F401
    from synergy_gym.agents.models import build_model

    vec = DummyVecEnv([lambda: gym.make(ENV, **SMALL_ENV)])
    return build_model(tiny(action_head="per_slot", algo=algo), vec, "cpu", tb_dir=None), vec


def permuted(obs, order, q, n_levels, n_slot_features, n_level_features):
    """The observation with its slots in ``order`` (slot features, levels, slot mask and their action-mask part)."""
    out = {k: v.copy() for k, v in obs.items()}
    out["slots"] = obs["slots"].reshape(q, n_slot_features)[order].reshape(-1)
    out["slot_levels"] = obs["slot_levels"].reshape(q, n_levels * n_level_features)[order].reshape(-1)
    out["slot_mask"] = obs["slot_mask"][order]
    mask = obs["action_mask"]
    out["action_mask"] = np.concatenate([mask[: q * n_levels].reshape(q, n_levels)[order].reshape(-1), mask[q * n_levels:]])
    return out


@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "a2c"])
def test_per_slot_head_scores_slots_independently_of_their_order(algo):
    """Permuting the slots permutes their logits and leaves the stop logit unchanged."""
    from synergy_gym.env.observation import LEVEL_FEATURES, SLOT_FEATURES

    model, vec = per_slot_model(algo)
    policy = model.policy
    obs = vec.reset()
    for _ in range(40):  # a state with several filled slots
        if obs["slot_mask"][0].sum() >= 3:
            break
        obs, *_ = vec.step(np.array([vec.action_space.n - 1]))
    raw = {k: v[0] for k, v in obs.items()}
    q = raw["slot_mask"].shape[0]
    n_levels = (raw["action_mask"].shape[0] - 1) // q
    assert raw["slot_mask"].sum() >= 3
    order = np.random.default_rng(0).permutation(q)
    swapped = permuted(raw, order, q, n_levels, len(SLOT_FEATURES), len(LEVEL_FEATURES))

    def logits_and_value(o):
        tensors, _ = policy.obs_to_tensor({k: v[None] for k, v in o.items()})
        with torch.no_grad():
            features = policy.extract_features(tensors)
            latent_pi, latent_vf = policy.mlp_extractor(features)
            return policy.action_net(latent_pi)[0].numpy(), policy.value_net(latent_vf)[0].numpy()

    a, _ = logits_and_value(raw)
    b, _ = logits_and_value(swapped)
    assert a.shape == (q * n_levels + 1,)
    filled = raw["slot_mask"] > 0
    a_slots, b_slots = a[:-1].reshape(q, n_levels), b[:-1].reshape(q, n_levels)
    np.testing.assert_allclose(b_slots[np.argsort(order)][filled], a_slots[filled], rtol=1e-5, atol=1e-6)
    assert b[-1] == pytest.approx(a[-1], rel=1e-5, abs=1e-6)
    vec.close()


def test_per_slot_model_trains_saves_and_loads(tmp_path):
    from synergy_gym import evaluate
    from synergy_gym.agents.models import load_agent
    from synergy_gym.agents.slot_policy import MaskableSlotPolicy
    from synergy_gym.agents.train import train

    out = train(tiny(action_head="per_slot"), out=tmp_path / "run", log=None)
    agent = load_agent(out / "last_model.zip", None, "cpu", "agent")
    assert isinstance(agent.model.policy, MaskableSlotPolicy)
    frame = evaluate(agent, ENV, [1_000_000], **SMALL_ENV)
    assert frame["jobs_finished"].iloc[0] == SMALL_ENV["num_jobs"]


def test_the_slot_scorer_is_its_mlp_over_each_slot_joined_with_the_context():
    """The first layer is split (context part once per state); the function is slot_head(cat([slot, context]))."""
    from synergy_gym.agents.slot_policy import SlotScorer

    torch.manual_seed(0)
    scorer = SlotScorer(context_dim=6, slot_dim=4, n_slots=3, n_levels=5, hidden=16)
    features = torch.randn(7, 6 + 3 * 4)
    context, slots = features[:, :6], features[:, 6:].reshape(7, 3, 4)
    joined = torch.cat([slots, context.unsqueeze(1).expand(7, 3, 6)], dim=2)
    expected = torch.cat([scorer.slot_head(joined).reshape(7, 15), scorer.stop_head(context)], dim=1)
    torch.testing.assert_close(scorer(features), expected, rtol=1e-5, atol=1e-6)


def test_action_head_and_bc_learning_rate_are_checked():
    from synergy_gym.errors import SynergyGymError

    assert (tiny().action_head, tiny().bc_learning_rate, tiny().stop_on_stall_after) == ("linear", None, None)
    for bad, message in [({"action_head": "slots"}, "unknown action_head 'slots'"),
                         ({"action_head": "per_slot", "algo": "dqn"}, "needs an actor-critic algorithm"),
                         ({"bc_learning_rate": 0.0}, "bc_learning_rate must be a positive number"),
                         ({"stop_on_stall_after": -5}, "stop_on_stall_after must be a positive integer"),
                         ({"vec_env": "threads"}, "unknown vec_env 'threads'")]:
        with pytest.raises(SynergyGymError, match=re.escape(message)):
            tiny(**bad)


def test_imitation_at_its_own_learning_rate_restores_the_rl_rate(tmp_path):
    """bc_learning_rate applies to the warm start only; the model's optimiser is back at learning_rate after it."""
    from synergy_gym.agents.imitation import behaviour_clone
    from synergy_gym.agents.models import build_model
    from synergy_gym.agents.vec_envs import make_vec_env

    cfg = tiny(bc_steps=128, bc_policy="srtf+price", bc_learning_rate=0.01, learning_rate=0.0003)
    vec = make_vec_env(cfg)
    model = build_model(cfg, vec, "cpu", tmp_path)
    before = [p.detach().clone() for p in model.policy.parameters()]
    stats = behaviour_clone(model, vec, cfg)
    assert stats["bc_samples"] == 128 and 0.0 <= stats["bc_accuracy"] <= 1.0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters()))
    assert [g["lr"] for g in model.policy.optimizer.param_groups] == [0.0003]
    vec.close()


def test_a_warm_start_is_evaluated_at_step_zero(tmp_path):
    from synergy_gym.agents.train import train

    out = train(tiny(bc_steps=64, bc_policy="srtf+price"), out=tmp_path / "run", log=None)
    assert pd.read_csv(out / "eval.csv")["timesteps"].tolist() == [0, 64, 128]


@pytest.mark.parametrize("step, best_step, after, stalled", [
    (1000, 500, 2000, False),  # before stop_on_stall_after
    (3000, 2000, 2000, True),  # 3000 ≥ 1.5 · 2000
    (2999, 2000, 2000, False),  # the best is within the last third
    (2000, 0, 2000, True),  # nothing beat the first evaluation
    (2000, 0, None, False),  # no stop configured
])
def test_stall_rule(step, best_step, after, stalled):
    from synergy_gym.agents.callbacks import validation_stalled

    assert validation_stalled(step, best_step, after) is stalled


def test_training_stops_once_the_validation_jct_stalls(tmp_path):
    """With a learning rate too small to change any decision (and fixed inputs: no observation normalisation),
    no evaluation beats the first: training stops early, at the first step of the rollout that started with the
    stalled evaluation, which the final evaluation scores (the last row is last_model.zip)."""
    from synergy_gym.agents.checkpoints import saved_timesteps
    from synergy_gym.agents.train import train

    lines = []
    out = train(tiny(timesteps=4096, eval_freq=64, stop_on_stall_after=256, learning_rate=1e-12,
                     normalize_obs=False),
                out=tmp_path / "run", log=lines.append)
    history = pd.read_csv(out / "eval.csv")
    assert history["timesteps"].tolist() == [64, 128, 192, 256, 257]
    assert history["mean_jct_h"].nunique() == 1
    assert any("has not improved since step 64" in line for line in lines)
    assert saved_timesteps(out / "last_model.zip") == 257


def test_dagger_labels_the_policys_own_states_with_the_heuristic(tmp_path, monkeypatch):
    """DAgger rounds run the policy (its actions step the envs), the heuristic labels every state, and each
    round fits on all states so far; on the preemptive mode's spaces (running rows, ahead admissions, preemptions)."""
    from synergy_gym.agents import imitation
    from synergy_gym.agents.models import build_model
    from synergy_gym.agents.vec_envs import make_vec_env
    from tests.support.agent_runs import tiny_train_config

    cfg = tiny_train_config("Synergy-small-scarce-v0", bc_steps=64, bc_policy="tetris+greedy", dagger_rounds=2,
                            dagger_steps=32, action_head="per_slot", n_envs=2,
                            env_kwargs={"num_jobs": 12, "preemptive": True})
    vec = make_vec_env(cfg)
    model = build_model(cfg, vec, "cpu", tmp_path)
    fitted, acted = [], []
    fit, act = imitation._fit, imitation._policy_actions
    monkeypatch.setattr(imitation, "_fit", lambda m, data, c: fitted.append(len(data.actions)) or fit(m, data, c))
    monkeypatch.setattr(imitation, "_policy_actions", lambda m, o, mask, c: acted.append(mask) or act(m, o, mask, c))
    stats = imitation.behaviour_clone(model, vec, cfg)
    steps = [64 // cfg.n_envs, 32 // cfg.n_envs]
    assert fitted == [steps[0], steps[0] + steps[1], steps[0] + 2 * steps[1]]  # each round on all states so far
    assert len(acted) == 2 * steps[1]  # the policy acted in the DAgger rounds only
    assert all(m.shape == (cfg.n_envs, vec.action_space.n) for m in acted)
    assert stats["bc_samples"] == (steps[0] + 2 * steps[1]) * cfg.n_envs and 0.0 <= stats["dagger_agreement"] <= 1.0
    vec.close()


def test_masks_and_the_hint_are_not_normalised_in_any_mode():
    """The extractor reads slot_mask and running_mask as 0/1 (MaskablePPO the action mask, the head a hint's one-hot
    action): VecNormalize skips them."""
    from synergy_gym.agents.vec_envs import MASK_KEYS, make_vec_env
    from tests.support.agent_runs import tiny_train_config

    cfg = tiny_train_config("Synergy-small-scarce-v0", env_kwargs={"num_jobs": 12, "preemptive": True},
                            action_head="per_slot", hint_policy="srtf+tune")
    vec = make_vec_env(cfg)
    masks = {k for k in vec.observation_space.spaces if k.endswith("_mask") or k == "hint"}
    assert masks == {"action_mask", "slot_mask", "running_mask", "hint"} == set(MASK_KEYS)
    assert not masks & set(vec.norm_obs_keys) and "running_slots" in vec.norm_obs_keys
    vec.close()


def test_attention_relates_the_jobs_and_keeps_the_slots_order_free():
    """With attention, states with no job give finite features, and permuting the slots permutes their logits (the
    head stays equivariant to the slots' order)."""
    import gymnasium as gym

    from synergy_gym.agents.features import SynergyExtractor
    from synergy_gym.agents.slot_policy import SlotScorer

    torch.manual_seed(0)
    env = gym.make("Synergy-small-scarce-v0", num_jobs=40, preemptive=True, max_queue=4, max_running=3)
    from synergy_gym.baselines.env_heuristics import env_heuristics

    policy = env_heuristics()["fifo+tune"]
    obs, _ = env.reset(seed=2)
    while not (obs["slot_mask"].sum() >= 2 and obs["running_mask"].sum() >= 1):
        obs, *_ = env.step(int(policy.predict(obs)[0]))
    ex = SynergyExtractor(env.observation_space, 16, 8, attention_heads=2)
    head = SlotScorer(ex.n_slots, ex.n_levels, ex.slot_dim, ex.context_dim, n_running=ex.n_running)
    batch = {k: torch.as_tensor(v)[None] for k, v in obs.items()}
    empty = {k: torch.zeros_like(v) if k in ("slot_mask", "running_mask") else v for k, v in batch.items()}
    assert torch.isfinite(ex(empty)).all()
    # Swap slots 0 and 1 in every slot-indexed part of the observation.
    q, n_levels = ex.n_slots, ex.n_levels
    order = [1, 0, *range(2, q)]
    swapped = dict(batch)
    for key, width in (("slots", -1), ("slot_levels", -1), ("slot_fits", n_levels)):
        swapped[key] = batch[key].reshape(1, q, width)[:, order].reshape(1, -1)
    mask = batch["action_mask"].clone()
    for block in (0, q * n_levels):  # admissions, then ahead admissions
        part = mask[:, block : block + q * n_levels].reshape(1, q, n_levels)
        mask[:, block : block + q * n_levels] = part[:, order].reshape(1, -1)
    swapped["action_mask"] = mask
    logits, moved = head(ex(batch)), head(ex(swapped))
    for block in (0, q * n_levels):  # admissions and ahead admissions follow their slot
        per_slot = logits[:, block : block + q * n_levels].reshape(q, n_levels)
        got = moved[:, block : block + q * n_levels].reshape(q, n_levels)
        torch.testing.assert_close(got, per_slot[order], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(moved[:, 2 * q * n_levels :], logits[:, 2 * q * n_levels :], rtol=1e-4, atol=1e-5)
