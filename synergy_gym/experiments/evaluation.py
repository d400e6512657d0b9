"""Score a policy (an SB3 model or an environment heuristic) on the environment, seed by seed.

The seed *is* the workload seed: each episode starts with
``reset(seed=seed, options={"workload_seed": seed})``, so its jobs are
``env.unwrapped.workload_for_seed(seed)`` – the same for every policy evaluated
with the same ``env_id``, keyword arguments and seed, and the same jobs a
simulator policy gets from ``workload_for_seed`` (``synergy_gym.baselines.sim_on_env``).
That makes per-seed differences between policies paired comparisons.

Two optional records: ``log_decisions`` keeps every decision of the first
seed's episode (:func:`decision_record`: round, time, the chosen slot's job and
features, slot and level after the environment's fallback, number of valid
actions), ``keep_jobs`` every job of each episode (:func:`job_frame`: arrival,
first start, finish, JCT, GPUs, model).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from synergy_gym.env.calls import is_integer, shown, whole_number
from synergy_gym.errors import ConfigError
from synergy_gym.experiments.batched import run_batched
from synergy_gym.experiments.policy_spaces import checked_maker
from synergy_gym.sim.arguments import check_function

if TYPE_CHECKING:
    import pandas as pd  # imported where a frame is built (not with the package)

SUMMARY_KEYS = (
    "mean_jct_h", "median_jct_h", "p99_jct_h", "window_mean_jct_h", "window_median_jct_h",
    "window_p99_jct_h", "makespan_h", "jobs_finished", "jobs_unfinished", "jobs_total",
)
#: Counters of the final ``info`` (NaN in the row when an environment does not report them).
EPISODE_KEYS = ("episode_rounds", "decisions", "invalid_actions")
#: Keys of each decision record (:func:`decision_record`), in order.
DECISION_KEYS = ("round", "time_h", "kind", "job_id", "slot", "level", "ahead", "row", "action", "stop", "invalid",
                 "n_valid", "filled_slots", "features")
#: Columns of :func:`job_frame`, in order.
JOB_COLUMNS = ("job_id", "arrival_h", "start_h", "finish_h", "jct_h", "gpus", "model")


class TruncatedEpisodesWarning(RuntimeWarning):
    """Episodes of an evaluation were cut off at ``max_rounds`` with jobs unfinished (their rows' ``terminated``
    is False): those jobs count with their time so far, so the episodes' JCTs understate them."""


def _warn_truncated(caller: str, label: object, rows: list[dict[str, Any]]) -> None:
    """A :class:`TruncatedEpisodesWarning` naming ``caller``, the policy and the seeds of the rows not terminated."""
    cut = [str(row["seed"]) for row in rows if not row["terminated"]]
    if cut:
        seeds = ("seeds " if len(cut) > 1 else "seed ") + ", ".join(cut[:5]) + (", …" if len(cut) > 5 else "")
        episodes = "episodes" if len(rows) > 1 else "episode"
        warnings.warn(f"{caller}: {len(cut)} of {len(rows)} {episodes} of {label} cut off at max_rounds ({seeds}) "
                      "with jobs unfinished; those jobs count with their time so far, so the JCTs understate them",
                      TruncatedEpisodesWarning, stacklevel=3)


def job_frame(jobs: Any, start_s: np.ndarray | None = None, finish_s: np.ndarray | None = None) -> pd.DataFrame:
    """Every job of a job table (``sim.jobs``): :data:`JOB_COLUMNS`, times in hours.

    ``start_h`` is the job's first start and ``finish_h`` its finish (NaN when it
    never started / has not finished, as in an episode cut off at ``max_rounds``);
    ``jct_h`` = finish − arrival (NaN if unfinished). ``start_s`` / ``finish_s``
    replace the table's (the no-waiting bound's).
    """
    import pandas as pd

    arrival = np.asarray(jobs.arrival_s, dtype=float)
    start = np.asarray(jobs.start_s if start_s is None else start_s, dtype=float)
    finish = np.asarray(jobs.finish_s if finish_s is None else finish_s, dtype=float)
    names = np.asarray(jobs.zoo.names, dtype=object)
    return pd.DataFrame({
        "job_id": np.asarray(jobs.job_id, dtype=np.int64), "arrival_h": arrival / 3600.0, "start_h": start / 3600.0,
        "finish_h": finish / 3600.0, "jct_h": (finish - arrival) / 3600.0, "gpus": np.asarray(jobs.gpus, dtype=np.int64),
        "model": names[np.asarray(jobs.model, dtype=np.int64)],
    }, columns=list(JOB_COLUMNS))


def decision_record(env: gym.Env, obs: dict, action: Any) -> dict[str, Any]:
    """One decision, taken before ``env.step(action)``: what the environment will do with ``action``.

    ``kind`` is ``"admit"``, ``"preempt"`` (``preemptive=True, redecide="changes"``) or ``"stop"``,
    after the environment's fallback for a masked action (:meth:`SynergyEnv.decode
    <synergy_gym.env.SynergyEnv.decode>`). An admission has its ``slot``, ``level`` and ``ahead``
    (placed before the running jobs), ``job_id`` the slot's job (``sim.jobs.job_id``) and
    ``features`` its slot features ``{name: value}`` as observed
    (:data:`~synergy_gym.env.observation.SLOT_FEATURES`); a preemption its running ``row``, the
    row's job and features (:data:`~synergy_gym.env.observation.RUNNING_SLOT_FEATURES`). A stop has
    ``stop`` true and ``slot``, ``level``, ``job_id``, ``features`` None. ``n_valid`` counts the
    valid actions (stop included), ``filled_slots`` the waiting jobs offered. ``invalid`` is filled
    in from the step's ``info``.
    """
    from synergy_gym.env.observation import RUNNING_SLOT_FEATURES, SLOT_FEATURES, slot_arrays

    base: Any = env.unwrapped  # a SynergyEnv (duck-typed: its simulator, layout, mask and slots)
    sim = base.sim
    mask = np.asarray(base.action_masks(), dtype=np.bool_)
    slot_jobs = np.asarray(base.slot_jobs)
    d = base.decode(action)
    record: dict[str, Any] = {
        "round": int(sim.rounds_elapsed), "time_h": float(sim.now) / 3600.0, "kind": d.kind, "job_id": None,
        "slot": None, "level": None, "ahead": d.ahead, "row": None, "action": base.layout.parse(action),
        "stop": d.kind == "stop", "invalid": bool(d.invalid), "n_valid": int(mask.sum()),
        "filled_slots": int(slot_jobs.size), "features": None,
    }
    if d.kind == "admit":
        slots, _ = slot_arrays(obs)
        record.update(job_id=int(sim.jobs.job_id[int(slot_jobs[d.slot])]), slot=d.slot, level=d.level,
                      features={k: round(float(v), 6) for k, v in zip(SLOT_FEATURES, np.asarray(slots[d.slot]))})
    elif d.kind == "preempt":
        rows = np.asarray(obs["running_slots"]).reshape(-1, len(RUNNING_SLOT_FEATURES))
        record.update(job_id=int(sim.jobs.job_id[int(base.state.running_rows[d.row])]), row=d.row,
                      features={k: round(float(v), 6) for k, v in zip(RUNNING_SLOT_FEATURES, rows[d.row])})
    return record


def check_seeds(seeds: Any) -> list[int]:
    """``evaluate``'s ``seeds``: a non-empty iterable (not a string) of non-negative integers (Python or NumPy, or
    whole floats; not bools), as a list of ``int``; anything else is one line naming it."""
    wanted = "a non-empty list of non-negative integers (workload seeds)"
    if isinstance(seeds, (str, bytes)) or is_integer(seeds):
        hint = f"; for one seed give [{seeds}]" if is_integer(seeds) else ""
        raise ConfigError(f"evaluate(): seeds must be {wanted}, got {shown(seeds)}{hint}")
    try:
        given = list(seeds)
    except TypeError:  # not iterable (None, a float, a 0-d NumPy array)
        raise ConfigError(f"evaluate(): seeds must be {wanted}, got {shown(seeds)}") from None
    if not given:
        raise ConfigError(f"evaluate(): seeds must be {wanted}, got an empty one ({shown(seeds)})")
    checked = [whole_number(seed) for seed in given]  # 3.0 runs seed 3, as it did; 2.5 is refused
    for i, seed in enumerate(checked):
        if seed is None or seed < 0:
            raise ConfigError(f"evaluate(): seeds[{i}] must be a non-negative integer, got {shown(given[i])}")
    return [int(seed) for seed in checked if seed is not None]


def check_policy(policy: Any, env_id: Any) -> None:
    """``evaluate``'s ``policy`` (an object with a ``predict`` method) and ``env_id`` (an id or a callable making the
    environment); anything else is one line naming it."""
    if not callable(getattr(policy, "predict", None)):
        raise ConfigError(f"evaluate(): policy must have a predict(obs, ...) method (an SB3 model, an env heuristic, "
                          f"synergy_gym.agents.load_pretrained(...)), got {shown(policy)}")
    check_env_id_argument("evaluate()", env_id)


def check_env_id_argument(caller: str, env_id: Any) -> None:
    """``env_id``: an environment id or a callable making the environment; anything else is one line naming it."""
    if not (isinstance(env_id, str) or callable(env_id)):
        raise ConfigError(f"{caller}: env_id must be an environment id such as 'Synergy-small-v0' or a callable "
                          f"that makes the environment, got {shown(env_id)}")


def check_run_options(caller: str, on_episode: Any, **flags: Any) -> None:
    """``caller``'s flags (each True or False) and ``on_episode`` (None or a function), checked at entry: one line
    naming the argument and the value, not a flag read as true or a call failing after the first episode."""
    for key, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise ConfigError(f"{caller}: {key} must be True or False, got {shown(value)}")
    check_function(f"{caller}: on_episode", on_episode, "(done, total)")


def env_maker(caller: str, env_id: Any, env_kwargs: dict[str, Any]) -> Callable[[], gym.Env]:
    """A function making the environment of ``env_id`` (an id, or a callable given ``env_kwargs``) that refuses, in one
    line, a callable returning something other than a Gymnasium environment."""
    def make() -> gym.Env:
        env = gym.make(env_id, **env_kwargs) if isinstance(env_id, str) else env_id(**env_kwargs)
        if not isinstance(env, gym.Env):
            raise ConfigError(f"{caller}: env_id {shown(env_id)} must make a gymnasium.Env, it returned {shown(env)}")
        return env

    return make


def _accepts(policy: Any, *names: str, any_keyword: bool = False) -> bool:
    """Whether ``policy.predict`` takes every one of the keyword arguments ``names`` (``any_keyword``: or ``**kwargs``)."""
    try:
        parameters = inspect.signature(policy.predict).parameters
    except (TypeError, ValueError):
        return False
    if any_keyword and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True
    return all(name in parameters for name in names)


def _one_action(result: Any, label: str) -> tuple[int, Any]:
    """``predict``'s ``(action, state)`` for one observation as a Python int and the state; anything else is one
    line naming what it returned."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise ConfigError(f"evaluate(): {label}'s predict must return (action, state) as SB3's models do, "
                          f"got {shown(result)}")
    action = np.asarray(result[0])
    if action.size != 1:
        raise ConfigError(f"evaluate(): {label}'s predict must return one action for one observation, "
                          f"got {shown(result[0])}")
    return action.item(), result[1]


def evaluate(
    policy: Any,
    env_id: str | Callable[..., gym.Env] = "Synergy-small-v0",
    seeds: Iterable[int] = (0,),
    name: str | None = None,
    deterministic: bool = True,
    keep_jcts: bool = False,
    keep_jobs: bool = False,
    log_decisions: bool = False,
    on_episode: Callable[[int, int], None] | None = None,
    **env_kwargs: Any,
) -> pd.DataFrame:
    """Run one episode per seed; one row per seed with the episode's JCT summary.

    ``seed`` is both the environment's seed and the workload seed
    (``reset(seed=seed, options={"workload_seed": seed})``): the episode runs on
    ``env.unwrapped.workload_for_seed(seed)``. With a fixed workload (``workload``
    or ``trace`` kwargs) every seed runs the same jobs.

    JCT statistics are over all jobs of the episode (``compare`` reports its
    measured window instead); in an episode cut off at ``max_rounds``
    (``terminated`` False) unfinished jobs count with their time so far, and a
    :class:`TruncatedEpisodesWarning` names the seeds of such episodes. The
    row also holds the final ``info``'s ``decisions``, ``invalid_actions`` and
    ``episode_rounds`` (NaN if absent).

    With ``keep_jcts`` a column ``jct_h`` holds each episode's per-job JCTs (finished jobs);
    with ``keep_jobs`` a column ``jobs`` each episode's :func:`job_frame` (at the episode's end);
    with ``log_decisions`` a column ``decision_log`` the first seed's decisions (a list of
    :func:`decision_record` dicts; None in the other rows). ``on_episode(done, total)``
    is told after each episode (for a progress display).

    ``seeds``: a non-empty iterable of non-negative integers (:func:`check_seeds`). ``policy`` needs
    ``predict(obs, ..., deterministic=..., [action_masks=...])``
    returning ``(action, state)`` with one action – SB3 models and :mod:`synergy_gym.baselines.env_heuristics`
    both qualify; other seeds, policies, return values or an ``env_id`` that is neither an id nor a callable
    are one line (:class:`~synergy_gym.errors.ConfigError`, :func:`check_policy`), as are flags other than True or
    False, an ``on_episode`` that is no function, and a model (a policy stating ``observation_space`` and
    ``action_space``) made for other spaces than the environment's
    (:mod:`synergy_gym.experiments.policy_spaces`), all before an episode runs. Masks are passed when
    ``predict`` names them; ``state`` (the one it returned last, None at an episode's start) and
    ``episode_start``, as SB3's ``predict`` takes them, when it names them – or takes ``**kwargs`` and has
    returned a state other than None –, so that a recurrent policy (sb3-contrib's ``RecurrentPPO``, or a
    wrapper forwarding to it) keeps its state through an episode. A policy that also offers
    ``batch_predictor(deterministic)`` (trained agents: :class:`synergy_gym.agents.wrappers.AgentPolicy`)
    and returns a predictor for it has its episodes run side by side and decided in batches, with the
    same actions and rows but ``wall_s`` (:mod:`synergy_gym.experiments.batched`).

    A policy with a ``reseed(seed)`` method (the ``random`` env heuristic) is reseeded with each episode's seed
    first, so that a seed's row does not depend on the seeds before it.

    With ``deterministic=False`` each episode draws its sampled actions from torch's generator seeded
    with the episode's seed (when torch is loaded, as it is for SB3 models), restored afterwards: the
    same seeds give the same rows, and the caller's torch random state is left as it was.
    """
    import pandas as pd

    from synergy_gym.env.scenarios import register_envs

    seed_list = check_seeds(seeds)
    check_policy(policy, env_id)
    check_run_options("evaluate()", on_episode, deterministic=deterministic, keep_jcts=keep_jcts, keep_jobs=keep_jobs,
                      log_decisions=log_decisions)
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"evaluate(): name must be None or text (the rows' policy), got {shown(name)}")
    register_envs()

    label = name or getattr(policy, "name", None) or type(policy).__name__
    record = EpisodeRecord(keep_jcts, keep_jobs, log_decisions)
    make = checked_maker(policy, env_maker("evaluate()", env_id, env_kwargs), label)  # a model's spaces, the env's
    batched = getattr(policy, "batch_predictor", None)
    predict = batched(deterministic) if callable(batched) else None
    if predict is not None:
        batch_rows = run_batched(predict, make, seed_list, label, record, on_episode)
        _warn_truncated("evaluate()", label, batch_rows)
        return pd.DataFrame(batch_rows)
    masks = _accepts(policy, "action_masks")
    # SB3's signature: a recurrent policy's state goes back in. A predict(obs, **kwargs) gets them once it has returned
    # a state (a wrapper forwarding to a recurrent model); one that returns None never does (its **kwargs may go to a
    # function without them). At an episode's start no state and no episode_start are what SB3 takes them to be.
    stateful = _accepts(policy, "state", "episode_start")
    forwards = not stateful and _accepts(policy, "state", "episode_start", any_keyword=True)
    reseed = getattr(policy, "reseed", None)
    gave_state = False  # (a forwarding predict gets the state once it has given one)
    rows: list[dict[str, Any]] = []
    env = make()
    base: Any = env.unwrapped  # a SynergyEnv (duck-typed: its mask and simulator)
    try:
        for i, seed in enumerate(seed_list):
            started = time.perf_counter()
            sampling = contextlib.nullcontext() if deterministic else _seeded_torch(seed)
            if callable(reseed):  # a policy with a random stream of its own (the random heuristic)
                reseed(seed)
            obs, _ = env.reset(seed=seed, options={"workload_seed": seed})
            ret, steps, done = 0.0, 0, False
            info: dict[str, Any] = {}
            terminated = truncated = False
            log: list[dict[str, Any]] | None = [] if log_decisions and i == 0 else None
            state: Any = None
            with sampling:
                while not done:
                    kwargs: dict[str, Any] = {"deterministic": deterministic}
                    if masks:
                        kwargs["action_masks"] = base.action_masks()
                    if stateful or (forwards and gave_state):
                        kwargs.update(state=state, episode_start=np.array([steps == 0]))
                    action, state = _one_action(policy.predict(obs, **kwargs), label)
                    gave_state = gave_state or state is not None
                    if log is not None:
                        log.append(decision_record(env, obs, action))
                    obs, reward, terminated, truncated, info = env.step(action)
                    if log is not None:
                        log[-1]["invalid"] = bool(info.get("invalid_action", log[-1]["invalid"]))
                    ret += float(reward)
                    steps += 1
                    done = terminated or truncated
            rows.append(record.row(base, label, seed, ret, steps, terminated, time.perf_counter() - started,
                                   info, log))
            if on_episode is not None:
                on_episode(len(rows), len(seed_list))
    finally:
        env.close()
    _warn_truncated("evaluate()", label, rows)
    return pd.DataFrame(rows)


@contextlib.contextmanager
def _seeded_torch(seed: int) -> Iterator[None]:
    """Torch's CPU and CUDA generators seeded with ``seed`` inside, their states restored after (no-op without torch)."""
    torch = sys.modules.get("torch")  # a policy that samples with torch has loaded it; the core does not import it
    if torch is None:
        yield
        return
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []  # a CUDA model: in use
    with torch.random.fork_rng(devices=cuda):
        seed %= 2**64  # torch's seeds are 64-bit; evaluate's may be any non-negative integer
        torch.random.default_generator.manual_seed(seed)  # not torch.manual_seed: it would queue a CUDA seeding
        if cuda:
            torch.cuda.manual_seed_all(seed)
        yield


class EpisodeRecord:
    """An episode's row: its summary and counters, and the records asked for (JCTs, jobs, decision log)."""

    def __init__(self, keep_jcts: bool, keep_jobs: bool, log_decisions: bool) -> None:
        self.keep_jcts, self.keep_jobs, self.log_decisions = keep_jcts, keep_jobs, log_decisions

    @staticmethod
    def decision(env: gym.Env, obs: dict, action: Any) -> dict[str, Any]:
        """The decision's record (:func:`decision_record`)."""
        return decision_record(env, obs, action)

    def row(self, base: Any, label: str, seed: int, ret: float, steps: int, terminated: bool, wall_s: float,
            info: dict[str, Any], log: list[dict[str, Any]] | None) -> dict[str, Any]:
        """The row of the episode that just ended in the environment ``base`` (read before its next reset)."""
        row = {"policy": label, "seed": seed, "episode_return": ret, "steps": steps,
               "terminated": bool(terminated), "wall_s": wall_s}
        row.update({k: info.get(k, np.nan) for k in (*SUMMARY_KEYS, *EPISODE_KEYS)})
        if self.keep_jcts:
            jobs = base.sim.jobs
            done_jobs = ~np.isnan(jobs.finish_s)
            row["jct_h"] = ((jobs.finish_s - jobs.arrival_s)[done_jobs] / 3600.0).tolist()
        if self.keep_jobs:
            row["jobs"] = job_frame(base.sim.jobs)
        if self.log_decisions:
            row["decision_log"] = log
        return row
