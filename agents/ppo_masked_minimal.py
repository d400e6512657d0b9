"""Masked PPO on any ``Synergy-*`` environment in one file: plain PyTorch, no Stable-Baselines3.

For researchers who want to read every line (in the spirit of CleanRL's
single-file implementations, written for this environment). The observation
Dict (every key but ``action_mask``: the slots and their allocation levels,
the cluster, the running jobs, demand, the rest of the queue, time) is
flattened into one vector; the action is ``slot · levels + level`` or the last
one, *stop*; actions outside ``obs["action_mask"]`` get a logit of -1e8 so they
are never sampled; advantages use GAE; the policy and value heads share no
weights. Run::

    python -m agents.ppo_masked_minimal --env-id Synergy-small-scarce-v0 --total-timesteps 100000 --num-envs 4

and watch the mean JCT of finished episodes fall toward (or below) the env
heuristics' (``synergy-gym evaluate --env ID --baselines env``).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import synergy_gym  # registers the environments

#: The observation keys the networks read, flattened and joined in this order.
FEATURE_KEYS = ("slots", "slot_levels", "slot_mask", "cluster", "running", "demand", "queue_rest", "time")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="Synergy-small-v0", help=f"one of {', '.join(synergy_gym.SCENARIOS)}")
    p.add_argument("--num-jobs", type=int, default=None, help="jobs per episode (default: the env's)")
    p.add_argument("--total-timesteps", type=int, default=100_000)
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--num-steps", type=int, default=256, help="steps per env per rollout")
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=0.995)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--reward-scale", type=float, default=0.01, help="multiplies rewards (returns are hours of JCT)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    return p.parse_args(argv)


def flatten(obs: dict[str, np.ndarray]) -> np.ndarray:
    """Batched Dict observation → (num_envs, features)."""
    return np.concatenate([obs[k].reshape(obs[k].shape[0], -1) for k in FEATURE_KEYS], axis=1, dtype=np.float32)


def action_mask(obs: dict[str, np.ndarray]) -> np.ndarray:
    """Batched Dict observation → (num_envs, actions) booleans: the valid actions."""
    return obs["action_mask"] > 0


def layer(n_in: int, n_out: int, std: float = np.sqrt(2)) -> nn.Linear:
    linear = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(linear.weight, std)
    nn.init.zeros_(linear.bias)
    return linear


class Agent(nn.Module):
    def __init__(self, n_features: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(layer(n_features, 128), nn.Tanh(), layer(128, 128), nn.Tanh(), layer(128, 1, 1.0))
        self.actor = nn.Sequential(
            layer(n_features, 128), nn.Tanh(), layer(128, 128), nn.Tanh(), layer(128, n_actions, 0.01)
        )

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def act(self, x: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None):
        logits = self.actor(x).masked_fill(~mask, -1e8)
        dist = Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(x)


def main(argv=None) -> dict[str, float]:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("ppo_masked_minimal: error: --device cuda but PyTorch sees no CUDA device")
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    kwargs = {} if args.num_jobs is None else {"num_jobs": args.num_jobs}
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make(args.env_id, **kwargs) for _ in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    obs, _ = envs.reset(seed=args.seed)
    n_actions = envs.single_action_space.n
    x = torch.tensor(flatten(obs), device=device)
    mask = torch.tensor(action_mask(obs), device=device)
    agent = Agent(x.shape[1], n_actions).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    steps, envs_n = args.num_steps, args.num_envs
    buf_x = torch.zeros((steps, envs_n, x.shape[1]), device=device)
    buf_mask = torch.zeros((steps, envs_n, n_actions), dtype=torch.bool, device=device)
    buf_action = torch.zeros((steps, envs_n), dtype=torch.long, device=device)
    buf_logp = torch.zeros((steps, envs_n), device=device)
    buf_reward = torch.zeros((steps, envs_n), device=device)
    buf_done = torch.zeros((steps, envs_n), device=device)
    buf_value = torch.zeros((steps, envs_n), device=device)
    done = torch.zeros(envs_n, device=device)

    batch = steps * envs_n
    minibatch = batch // args.num_minibatches
    updates = max(1, args.total_timesteps // batch)
    finished_jct: list[float] = []
    started = time.perf_counter()
    for update in range(1, updates + 1):
        # Collect a rollout.
        for t in range(steps):
            buf_x[t], buf_mask[t], buf_done[t] = x, mask, done
            with torch.no_grad():
                action, logp, _, value = agent.act(x, mask)
            buf_action[t], buf_logp[t], buf_value[t] = action, logp, value
            obs, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
            buf_reward[t] = torch.tensor(reward * args.reward_scale, device=device)
            done = torch.tensor(np.logical_or(terminated, truncated), dtype=torch.float32, device=device)
            x = torch.tensor(flatten(obs), device=device)
            mask = torch.tensor(action_mask(obs), device=device)
            final = info.get("final_info", {})  # the last step's info of episodes that just ended
            if "mean_jct_h" in final:
                finished_jct.extend(final["mean_jct_h"][final["_mean_jct_h"]].tolist())
        # Generalised advantage estimation.
        with torch.no_grad():
            next_value = agent.value(x)
            advantages = torch.zeros_like(buf_reward)
            last = torch.zeros(envs_n, device=device)
            for t in reversed(range(steps)):
                not_done = 1.0 - (done if t == steps - 1 else buf_done[t + 1])
                nxt = next_value if t == steps - 1 else buf_value[t + 1]
                delta = buf_reward[t] + args.gamma * nxt * not_done - buf_value[t]
                last = delta + args.gamma * args.gae_lambda * not_done * last
                advantages[t] = last
            returns = advantages + buf_value
        # PPO update on shuffled minibatches.
        b_x, b_mask = buf_x.reshape(batch, -1), buf_mask.reshape(batch, -1)
        b_action, b_logp = buf_action.reshape(-1), buf_logp.reshape(-1)
        b_adv, b_ret = advantages.reshape(-1), returns.reshape(-1)
        for _ in range(args.update_epochs):
            for idx in torch.randperm(batch, device=device).split(minibatch):
                _, logp, entropy, value = agent.act(b_x[idx], b_mask[idx], b_action[idx])
                ratio = (logp - b_logp[idx]).exp()
                adv = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                value_loss = 0.5 * ((value - b_ret[idx]) ** 2).mean()
                loss = policy_loss + args.vf_coef * value_loss - args.ent_coef * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        recent = np.mean(finished_jct[-10:]) if finished_jct else float("nan")
        print(f"update {update}/{updates}  steps {update * batch}  mean JCT of recent episodes {recent:.2f} h  "
              f"{update * batch / (time.perf_counter() - started):.0f} steps/s", flush=True)
    envs.close()
    return {"updates": updates, "episodes": len(finished_jct), "recent_mean_jct_h": float(recent)}


if __name__ == "__main__":
    main()
