"""Misuse of the environment's API: one-line errors, in Gymnasium's style, that name the call.

Two kinds (both raised by :class:`~synergy_gym.env.SynergyEnv`):

* :class:`ResetNeeded` – a call that needs an episode made before ``env.reset()``
  (``step``, ``action_masks``, ``episode_summary``, ``level_of``, ``state``), or
  ``env.step()`` after the episode has ended (terminated or truncated). It is
  Gymnasium's :class:`gymnasium.error.ResetNeeded` (what ``gym.make``'s order
  enforcing raises) and a :class:`RuntimeError`.
* :class:`EnvCallError` – a bad argument to a call: ``reset``'s ``seed`` or
  ``options``, ``step``'s action, ``level_of``'s job, ``workload_for_seed``'s
  seed. It is a :class:`~synergy_gym.errors.ConfigError` (so a ``ValueError``
  and a :class:`~synergy_gym.errors.SynergyGymError`) and a
  :class:`gymnasium.error.Error`.

What needs no episode works before ``reset()``: ``sim`` is ``None``, ``slot_jobs`` is empty,
``workload_for_seed`` gives any seed's jobs and ``render()`` draws the empty cluster
(``"(not reset)"`` in ``ansi`` mode) – called on the environment itself (``env.unwrapped``) or
under ``gymnasium.wrappers.OrderEnforcing(env, disable_render_order_enforcing=True)``; through
``gym.make`` Gymnasium's order enforcing raises ``ResetNeeded`` for it. After the episode has
ended ``action_masks()`` is the final observation's mask (only *stop*), ``episode_summary()`` the
final summary and ``render()`` the cluster at the end (the unfinished jobs still running).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium

from synergy_gym.errors import ConfigError
from synergy_gym.sim.validation import is_integer, shown, whole_number  # noqa: F401  (the env's checks, re-exported)

#: The keys of ``reset(options=...)``.
RESET_OPTIONS: tuple[str, ...] = ("workload_seed",)


class ResetNeeded(gymnasium.error.ResetNeeded, RuntimeError):
    """A call that needs an episode: before ``env.reset()``, or ``env.step()`` after the episode has ended."""


class EnvCallError(ConfigError, gymnasium.error.Error):
    """A bad argument to one of the environment's calls; the message names the call and the value."""


def before_reset(call: str) -> ResetNeeded:
    """The error of ``call`` (``"env.step()"``, ``"access env.state"``) made before the first ``reset()``."""
    verb = call if call.startswith("access ") else f"call {call}"
    return ResetNeeded(f"Cannot {verb} before calling env.reset()")


def episode_ended(call: str) -> ResetNeeded:
    """The error of ``call`` made after the episode has ended."""
    return ResetNeeded(
        f"Cannot call {call}: the episode has ended (terminated or truncated); call env.reset() to start a new one"
    )


def check_seed(seed: Any) -> int | None:
    """``reset``'s ``seed``: None or a non-negative integer (NumPy integers too), as an ``int``."""
    if seed is None:
        return None
    if not is_integer(seed) or seed < 0:
        raise EnvCallError(f"env.reset(): seed must be None or a non-negative integer, got {shown(seed)}")
    return int(seed)


def check_reset_options(options: Any) -> dict[str, Any]:
    """``reset``'s ``options``: None or a mapping of :data:`RESET_OPTIONS`, each checked."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise EnvCallError(
            f"env.reset(): options must be None or a dict with the keys {', '.join(RESET_OPTIONS)}, got {shown(options)}"
        )
    unknown = [key for key in options if key not in RESET_OPTIONS]
    if unknown:
        raise EnvCallError(f"env.reset(): unknown option {shown(unknown[0])}; valid: {', '.join(RESET_OPTIONS)}")
    checked = dict(options)
    if "workload_seed" in checked:
        seed = checked["workload_seed"]
        if not is_integer(seed) or seed < 0:
            raise EnvCallError(f"env.reset(): option workload_seed must be a non-negative integer, got {shown(seed)}")
        checked["workload_seed"] = int(seed)
    return checked


def check_workload_seed(seed: Any) -> int:
    """``workload_for_seed``'s ``seed``: a non-negative integer."""
    if not is_integer(seed) or seed < 0:
        raise EnvCallError(f"env.workload_for_seed(): seed must be a non-negative integer, got {shown(seed)}")
    return int(seed)


def check_job_index(j: Any, n_jobs: int) -> int:
    """``level_of``'s job: an index into ``sim.jobs``."""
    if not is_integer(j) or not 0 <= j < n_jobs:
        raise EnvCallError(f"env.level_of(): j must be a job index in 0..{n_jobs - 1} (of sim.jobs), got {shown(j)}")
    return int(j)
