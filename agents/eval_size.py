"""``synergy-gym evaluate``'s size guard: the time and memory of an evaluation, estimated before it runs.

Every policy runs one episode per seed. A simulator policy's episode costs what one simulation of
the environment's jobs on its cluster costs (:func:`synergy_gym.cli.guards.simulation_seconds`), the
contention bound what building and solving its linear program does (:data:`CONTENTION_JOB_S`); a
policy that acts through the environment costs a step per decision, and an agent a forward pass
more. Decisions per job were measured on the registered ids (one core of a 2-core AMD EPYC VM):
about one a job in the default mode; with ``preemptive=True``, 2–18 deciding only what changes
(637–5,405 an episode of 300 jobs on ``Synergy-small-scarce-v0`` under the env heuristics) and 40–55
re-deciding every job at every event (12,000–16,000); environment steps run at 5,900–14,300 a second and an
agent's decision took 0.53 ms. The constants are those figures rounded up: on this machine the
estimate was 2.6× the measured time for 301 episodes of ``Synergy-small-v0`` under env ``fifo+tune``
(20 s against 7.6 s) and 2.8× for ``tetris+greedy`` in the preemptive mode. An evaluation past
the limits of :mod:`synergy_gym.cli.guards` is refused unless ``--allow-large``; under ``--quiet``
one estimated to take over a minute says so on stderr. An agent's episodes run up to
:data:`~synergy_gym.experiments.batched.BATCH_ENVS` at a time, each with its live simulation.
"""

from __future__ import annotations

from typing import Any

from synergy_gym.cli.guards import BASE_BYTES, Estimate, simulation_bytes, simulation_seconds
from synergy_gym.experiments.batched import BATCH_ENVS

#: Decisions per job of an episode: the default (non-preemptive) mode, and with ``preemptive=True`` per ``redecide``.
DECISIONS_PER_JOB = {"default": 1.5, "changes": 10.0, "every_event": 40.0}
#: Seconds per environment step, a heuristic's choice included.
ENV_STEP_S = 1.5e-4
#: Seconds per agent decision on top of the step (SB3's predict, one observation at a time).
AGENT_DECISION_S = 1e-3
#: PyTorch and a loaded model.
TORCH_BYTES = 600 * 1024**2
#: Kept per job of an episode: its JCT, and the row of ``--jobs-csv``.
KEPT_JOB_BYTES = 300
#: Seconds per job of the contention bound's LP (one a seed, default periods): measured 5–11 s for the 300 jobs of
#: ``Synergy-small-scarce-v0`` and 13–40 s for the 1,200 of ``Synergy-scarce-v0`` on a busy 2-core machine (the
#: ceilings' 20 seeds: 6–7 s and 12 s a seed; about 1 s on the ids with 24 CPUs a server).
CONTENTION_JOB_S = 0.04
#: Memory per job of the contention bound's LP while HiGHS solves it.
CONTENTION_JOB_BYTES = 256 * 1024


def decisions_per_job(env_kwargs: dict[str, Any]) -> float:
    """:data:`DECISIONS_PER_JOB` for these env kwargs (an unknown ``redecide``, refused later, counts as the costlier)."""
    if not env_kwargs.get("preemptive", False):
        return DECISIONS_PER_JOB["default"]
    return DECISIONS_PER_JOB.get(str(env_kwargs.get("redecide", "changes")), DECISIONS_PER_JOB["every_event"])


def evaluation_estimate(env_kwargs: dict[str, Any], seeds: int, agents: int, env_names: tuple[str, ...],
                        sim_names: tuple[str, ...]) -> Estimate:
    """The estimate for ``seeds`` episodes of each policy; ``env_kwargs``: every env kwarg's effective value."""
    from synergy_gym.baselines.sim_on_env import CONTENTION_BOUND
    from synergy_gym.env.config import as_cluster

    jobs = int(env_kwargs.get("num_jobs", 1000))
    servers = as_cluster(env_kwargs.get("cluster", "default")).num_servers
    decisions = jobs * decisions_per_job(env_kwargs)
    episode_env = decisions * ENV_STEP_S
    seconds = seeds * (agents * (episode_env + decisions * AGENT_DECISION_S) + len(env_names) * episode_env
                       + sum(jobs * CONTENTION_JOB_S if name == CONTENTION_BOUND else simulation_seconds(name, servers, jobs)
                             for name in sim_names))
    policies = agents + len(env_names) + len(sim_names)
    live = min(seeds, BATCH_ENVS) if agents else 1  # an agent's episodes run side by side
    lp = jobs * CONTENTION_JOB_BYTES if CONTENTION_BOUND in sim_names else 0
    memory = (BASE_BYTES + (TORCH_BYTES if agents else 0) + max(live * simulation_bytes(servers, jobs), lp)
              + seeds * policies * jobs * KEPT_JOB_BYTES)
    episodes = seeds * policies
    what = f"{episodes:,} episode{'s' if episodes != 1 else ''} of {jobs:,} jobs on {servers:,} servers"
    return Estimate(what, memory, seconds)
