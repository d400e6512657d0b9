"""Masked PPO on any ``Synergy-*`` environment in one file: plain PyTorch, no Stable-Baselines3.

For researchers who want to read every line (in the spirit of CleanRL's
single-file implementations, written for this environment). The observation
Dict (every key but ``action_mask``: the slots and their allocation levels,
the cluster, the running jobs, demand, the rest of the queue, time) is
flattened into one vector; the action is ``slot · levels + level`` or the last
one, *stop*; actions outside ``obs["action_mask"]`` get a logit of -1e8 so they
are never sampled; advantages use GAE; the policy and value heads share no
weights. Run::

    python -m synergy_gym.agents.ppo_masked_minimal --env-id Synergy-small-scarce-v0 --total-timesteps 100000 --num-envs 4

and watch the mean JCT of finished episodes fall toward (or below) the env
heuristics' (``synergy-gym evaluate --env ID --baselines env``).

Speed: the networks are tiny, so on the CPU PyTorch runs on one thread unless
``--torch-threads N`` says otherwise (more threads only add synchronisation,
and on a shared machine they fight other processes for the cores). The
rollout is kept in NumPy arrays and turned into tensors once per update, so a
step costs one batched forward pass for all envs; ``benchmarks/bench_train.py``
measures the env steps per second.
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

import gymnasium as gym
import numpy as np

import synergy_gym  # registers the environments

try:
    import torch
    from torch import nn
except ModuleNotFoundError as exc:  # `python -m …` without PyTorch: one line naming the extra, not a traceback
    if __name__ == "__main__" and exc.name == "torch":
        from synergy_gym.agents.extras import exit_if_missing

        exit_if_missing("ppo_masked_minimal.py", "rl", ("torch",))
    raise

#: The observation keys the networks read, flattened and joined in this order.
FEATURE_KEYS = ("slots", "slot_levels", "slot_mask", "cluster", "running", "demand", "queue_rest", "time")
#: The logit given to masked actions: exp(-1e8) is exactly 0, so they are never sampled.
MASKED_LOGIT = -1e8


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="Synergy-small-v0", help=f"one of {', '.join(synergy_gym.SCENARIOS)}")
    p.add_argument("--num-jobs", type=int, default=None, help="jobs per episode (default: the env's)")
    p.add_argument("--total-timesteps", type=int, default=100_000,
                   help="env steps; rounded down to whole rollouts of num-envs × num-steps (at least one)")
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
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    p.add_argument("--torch-threads", type=int, default=None, metavar="N",
                   help="PyTorch CPU threads (default: 1 on the CPU, PyTorch's own choice with CUDA)")
    args = p.parse_args(argv)
    if not re.fullmatch(r"auto|cpu|cuda(:[0-9]+)?", args.device):
        p.error(f"--device must be auto, cpu, cuda or cuda:N, got {args.device!r}")
    # Bad options: one line naming the option and its value (exit 2), before any env or network is built.
    for name in ("num_jobs", "total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs",
                 "torch_threads"):
        if (value := getattr(args, name)) is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    inf = float("inf")
    for name, ok, must in (("learning_rate", lambda v: 0 < v < inf, "a finite positive number"),
                           ("gamma", lambda v: 0 < v <= 1, "in (0, 1]"), ("gae_lambda", lambda v: 0 <= v <= 1, "in [0, 1]"),
                           ("clip_coef", lambda v: 0 < v < inf, "a finite positive number"),
                           ("ent_coef", lambda v: 0 <= v < inf, "a finite number ≥ 0"),
                           ("vf_coef", lambda v: 0 <= v < inf, "a finite number ≥ 0"),
                           ("max_grad_norm", lambda v: 0 < v < inf, "a finite positive number"),
                           ("reward_scale", lambda v: 0 < v < inf, "a finite positive number")):
        if not ok(value := getattr(args, name)):  # (NaN fails every comparison)
            p.error(f"--{name.replace('_', '-')} must be {must}, got {value}")
    batch = args.num_envs * args.num_steps
    if batch % args.num_minibatches:
        p.error(f"--num-minibatches {args.num_minibatches} must divide the rollout of --num-envs × --num-steps = "
                f"{args.num_envs} × {args.num_steps} = {batch} steps into equal minibatches")
    if args.env_id not in synergy_gym.SCENARIOS:
        p.error(f"--env-id: unknown env {args.env_id!r}; valid: {', '.join(synergy_gym.SCENARIOS)}")
    try:  # one throw-away env: a setting the env refuses is one line too
        gym.make(args.env_id, **env_kwargs(args)).close()
    except synergy_gym.SynergyGymError as exc:
        p.error(f"--num-jobs {args.num_jobs} on {args.env_id}: {exc}")  # the only env setting an option gives
    return args


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The env's keyword arguments from the options (the scenario's own for those not given)."""
    return {} if args.num_jobs is None else {"num_jobs": args.num_jobs}


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
        """(action, its log-probability, the entropy, the value); samples an action if none is given.

        Masked actions get the logit MASKED_LOGIT, so a probability of exactly 0: never sampled, and
        they add 0 to the entropy (0 · -1e8; with -inf it would be NaN). Written out rather than with
        torch.distributions.Categorical, which costs more per call than the networks themselves here.
        """
        log_probs = self.actor(x).masked_fill(~mask, MASKED_LOGIT).log_softmax(-1)
        if action is None:
            action = torch.multinomial(log_probs.exp(), 1).squeeze(-1)
        log_prob = log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        return action, log_prob, entropy, self.value(x)


def gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, next_value: np.ndarray, next_done: np.ndarray,
        gamma: float, lam: float) -> np.ndarray:
    """Generalised advantage estimates, (steps, envs).

    ``rewards[t]``, ``values[t]``: step t's reward and the value of its observation; ``dones[t]`` is 1
    where that observation began a new episode (the step before ended one), ``next_value`` and
    ``next_done`` the same for the observation after the last step. No bootstrapping across an
    episode's end (a truncated episode is treated as ended too).
    """
    advantages = np.zeros_like(rewards)
    last = np.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        not_done = 1.0 - (next_done if t == len(rewards) - 1 else dones[t + 1])
        nxt = next_value if t == len(rewards) - 1 else values[t + 1]
        delta = rewards[t] + gamma * nxt * not_done - values[t]
        last = delta + gamma * lam * not_done * last
        advantages[t] = last
    return advantages


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        index = int(name.partition(":")[2] or 0)
        seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if index >= seen:
            raise SystemExit(f"ppo_masked_minimal: error: --device {name} but PyTorch sees "
                             f"{seen or 'no'} CUDA device{'s' if seen != 1 else ''}")
    return torch.device(name)


def main(argv=None) -> dict[str, float]:
    args = parse_args(argv)
    device = resolve_device(args.device)
    threads = torch.get_num_threads()
    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    elif device.type == "cpu":
        torch.set_num_threads(1)  # tiny MLPs: one thread is fastest, and leaves the other cores alone
    try:  # main() may be called from other code (the tests): the caller's threads and random state are restored
        with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
            return train(args, device)
    finally:
        torch.set_num_threads(threads)


def train(args: argparse.Namespace, device: torch.device) -> dict[str, float]:
    torch.manual_seed(args.seed)  # (the environments are seeded by reset; numpy's global generator is not used)

    kwargs = env_kwargs(args)
    envs: gym.vector.VectorEnv[dict[str, np.ndarray], np.ndarray, np.ndarray] = gym.vector.SyncVectorEnv(
        [lambda: gym.make(args.env_id, **kwargs) for _ in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        copy=False,  # the observation is flattened into a new array right away
    )
    obs, _ = envs.reset(seed=args.seed)
    x, mask = flatten(obs), action_mask(obs)
    done = np.zeros(args.num_envs, dtype=np.float32)
    if not isinstance(envs.single_action_space, gym.spaces.Discrete):
        raise TypeError(f"{args.env_id}: expected a Discrete action space, got {envs.single_action_space}")
    n_features, n_actions = x.shape[1], int(envs.single_action_space.n)
    agent = Agent(n_features, n_actions).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # The rollout lives in NumPy arrays (no per-step tensor creation on the device); one update's worth.
    steps, envs_n = args.num_steps, args.num_envs
    buf_x = np.zeros((steps, envs_n, n_features), dtype=np.float32)
    buf_mask = np.zeros((steps, envs_n, n_actions), dtype=bool)
    buf_action = np.zeros((steps, envs_n), dtype=np.int64)
    buf_logp, buf_value, buf_reward, buf_done = (np.zeros((steps, envs_n), dtype=np.float32) for _ in range(4))

    batch = steps * envs_n
    minibatch = batch // args.num_minibatches  # parse_args: the count divides the batch
    updates = max(1, args.total_timesteps // batch)  # at least one rollout, as --total-timesteps says
    finished_jct: list[float] = []
    invalid_actions = 0
    recent = float("nan")  # the mean JCT of the last 10 finished episodes (none yet)
    losses = {}
    print(f"ppo_masked_minimal: {args.env_id}, {envs_n} envs × {steps} steps × {updates} updates = "
          f"{updates * batch} steps, {device}, {torch.get_num_threads()} torch thread"
          f"{'s' if torch.get_num_threads() != 1 else ''}", flush=True)
    started = time.perf_counter()
    for update in range(1, updates + 1):
        # Collect a rollout: one forward pass for all envs per step.
        for t in range(steps):
            buf_x[t], buf_mask[t], buf_done[t] = x, mask, done
            with torch.no_grad():
                action, logp, _, value = agent.act(torch.from_numpy(x).to(device), torch.from_numpy(mask).to(device))
            buf_action[t], buf_logp[t], buf_value[t] = action.cpu().numpy(), logp.cpu().numpy(), value.cpu().numpy()
            obs, reward, terminated, truncated, info = envs.step(buf_action[t])
            buf_reward[t] = reward * args.reward_scale
            done = np.logical_or(terminated, truncated).astype(np.float32)
            x, mask = flatten(obs), action_mask(obs)
            invalid_actions += int(np.sum(info.get("invalid_action", 0)))  # the env's fallbacks: stays 0
            final = info.get("final_info", {})  # the last step's info of episodes that just ended
            if "mean_jct_h" in final:
                finished_jct.extend(final["mean_jct_h"][final["_mean_jct_h"]].tolist())
        # Generalised advantage estimation, on the host.
        with torch.no_grad():
            next_value = agent.value(torch.from_numpy(x).to(device)).cpu().numpy()
        advantages = gae(buf_reward, buf_value, buf_done, next_value, done, args.gamma, args.gae_lambda)
        returns = advantages + buf_value
        # PPO update on shuffled minibatches; the rollout goes to the device once.
        b_x, b_mask, b_action, b_logp, b_adv, b_ret = (
            torch.from_numpy(a.reshape(batch, *a.shape[2:])).to(device)
            for a in (buf_x, buf_mask, buf_action, buf_logp, advantages, returns)
        )
        for _ in range(args.update_epochs):
            for idx in torch.randperm(batch, device=device).split(minibatch):
                _, logp, entropy, value = agent.act(b_x[idx], b_mask[idx], b_action[idx])
                ratio = (logp - b_logp[idx]).exp()
                adv = b_adv[idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if len(idx) > 1 else adv
                policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                value_loss = 0.5 * ((value - b_ret[idx]) ** 2).mean()
                loss = policy_loss + args.vf_coef * value_loss - args.ent_coef * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        losses = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.mean().item()}
        recent = float(np.mean(finished_jct[-10:])) if finished_jct else float("nan")
        jct = f"{recent:.2f} h" if finished_jct else "none finished yet"
        print(f"update {update}/{updates}  steps {update * batch}  mean JCT of recent episodes {jct}  "
              f"{update * batch / (time.perf_counter() - started):.0f} steps/s", flush=True)
    envs.close()
    return {"updates": updates, "steps": updates * batch, "episodes": len(finished_jct), "recent_mean_jct_h": recent,
            "invalid_actions": invalid_actions, "steps_per_s": updates * batch / (time.perf_counter() - started),
            **losses}


if __name__ == "__main__":
    main()
