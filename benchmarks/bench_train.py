"""Training throughput: env steps per wall-second of a whole training run on one core, as a user starts it.

It runs, each as a fresh subprocess pinned to one CPU core (with ``taskset -c
CORE`` when ``taskset`` is installed, else ``os.sched_setaffinity``, which the
child inherits; the output names which),

* ``synergy-gym train --env Synergy-small-v0 --timesteps N`` with default
  settings (``--out`` goes to a temporary folder, deleted afterwards; nothing
  else is given), and
* ``python -m synergy_gym.agents.ppo_masked_minimal --env-id Synergy-small-v0
  --total-timesteps N`` at its defaults (it rounds N down to whole rollouts
  of 4 envs × 256 steps: 19,456 steps for N = 20,000),

and prints, per run, the training env steps it reports, the wall time from
starting the process to its exit, and their ratio, env steps per wall-second.
Nothing is subtracted: Python and PyTorch start-up, building the envs, and for
``train`` the heuristics' scores on the evaluation seeds and the periodic
evaluations (whose env steps are not counted) are all in the wall time. It
also prints the time to first step: the wall time until the process prints
the line it writes just before training starts (``train``: "<algo> on <env>,
<device> (N torch threads) …", after the heuristics' scores and before the
model is built; the minimal PPO: "ppo_masked_minimal: …", after the envs and
networks are built, just before the first env step), or "n/a" if that line
does not appear. PyTorch picks its thread count from the process's CPU
affinity, so a pinned run uses one thread whatever the program sets;
``--no-pin`` measures the run on all the cores (and threads) it gets.
The header names the machine (CPU model, cores, load average), Python,
PyTorch's version and default thread count. Measurements on a shared machine
are noisy: run it on an otherwise idle one, and more than once.

    python benchmarks/bench_train.py [--env Synergy-small-v0] [--timesteps 20000] [--skip-train] [--skip-minimal]
                                     [--core 0] [--no-pin]

``--env`` runs both programs on another environment, e.g. ``Synergy-small-scarce-v0`` (issue 25's
training target). ``train`` scores the heuristics once per code, env and seed list and keeps the
scores on disk (:mod:`synergy_gym.agents.baseline_cache`): the first run on a machine scores them
(``--cold`` deletes the kept scores first, so that every run does), later ones read them.

With ``--config FILE`` the ``train`` run uses that training config (its env, algorithm and
settings; ``--timesteps`` still sets the length), e.g. a reference run's
(``agents/configs/small_scarce.toml``) on both cores: ``--config … --skip-minimal --no-pin``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu_model, load_average  # benchmarks/machine.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
ENV_ID = "Synergy-small-v0"
#: The line each program prints just before its first training step.
START_LINE = {
    "train": re.compile(r" on \S+, \S+ \(\d+ torch threads?\)"),
    "minimal": re.compile(r"^ppo_masked_minimal: "),
}
#: The line with the env steps trained: train's summary, the minimal PPO's last update line.
STEPS_LINE = {
    "train": re.compile(r"^trained \S+ on \S+ for (\d+) steps"),
    "minimal": re.compile(r"^update \d+/\d+  steps (\d+)"),
}


def torch_info() -> str:
    """PyTorch's version and default thread count, asked of a fresh interpreter (as the runs start)."""
    probe = "import torch; print(torch.__version__, torch.get_num_threads(), torch.cuda.is_available())"
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"PyTorch not usable ({exc})"
    cuda = "available" if out[2] == "True" else "not available"
    return f"PyTorch {out[0]}, {out[1]} threads by default (unpinned), CUDA {cuda}"


def allowed_cores() -> set[int]:
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


def pinning(core: int | None) -> tuple[list[str], str]:
    """(command prefix, description) that pin a child to ``core`` (None: no pinning; [] without taskset)."""
    if core is None:
        return [], f"not pinned ({len(allowed_cores())} cores)"
    taskset = shutil.which("taskset")
    if taskset:
        return [taskset, "-c", str(core)], f"pinned to core {core} with taskset -c {core}"
    if hasattr(os, "sched_setaffinity"):
        return [], f"pinned to core {core} with os.sched_setaffinity"
    raise SystemExit("bench_train: error: cannot pin to one core here (no taskset, no os.sched_setaffinity); "
                     "use --no-pin")


def run(kind: str, command: list[str], core: int | None) -> dict:
    """Run ``command`` (pinned) and time it: the steps it reports, wall time, time to first step."""
    prefix, pinned = pinning(core)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # lines arrive as printed, so the start line is timed
    print(f"$ {' '.join(command)}    [{pinned}]", flush=True)
    first_step = None
    steps = None
    tail: list[str] = []
    own = allowed_cores()
    if core is not None and not prefix:
        os.sched_setaffinity(0, {core})  # no taskset: the child inherits this process's affinity
    started = time.perf_counter()
    try:
        proc = subprocess.Popen([*prefix, *command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
    finally:
        if core is not None and not prefix:
            os.sched_setaffinity(0, own)
    with proc:
        for line in proc.stdout:
            if first_step is None and START_LINE[kind].search(line):
                first_step = time.perf_counter() - started
            if (match := STEPS_LINE[kind].search(line)):
                steps = int(match.group(1))
            tail = (tail + [line.rstrip()])[-20:]
    wall = time.perf_counter() - started
    if proc.returncode != 0 or steps is None:
        print("\n".join(tail))
        raise SystemExit(f"bench_train: error: {kind} run failed (exit status {proc.returncode}, steps {steps})")
    return {"steps": steps, "wall_s": wall, "first_step_s": first_step, "pinned": pinned}


def forget_kept_scores() -> None:
    """Delete the heuristics' scores kept on disk (the folder ``train`` reads them from, as this process sees it)."""
    from synergy_gym.agents.baseline_cache import cache_folder

    folder = cache_folder()
    if folder is not None:
        for path in folder.glob("*.json"):
            path.unlink(missing_ok=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default=ENV_ID, help=f"the environment of both runs (default: {ENV_ID})")
    parser.add_argument("--cold", action="store_true",
                        help="delete the heuristics' kept scores first, so that train scores them (default: reuse them)")
    parser.add_argument("--timesteps", type=int, default=20_000, help="env steps to train for (default: 20,000)")
    parser.add_argument("--skip-train", action="store_true", help="do not run synergy-gym train")
    parser.add_argument("--skip-minimal", action="store_true", help="do not run agents/ppo_masked_minimal.py")
    parser.add_argument("--core", type=int, default=None,
                        help="the CPU core to pin to (default: the lowest this process may run on)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the runs to one core")
    parser.add_argument("--config", type=Path, default=None,
                        help="a training config for the train run (default: none, train's defaults)")
    args = parser.parse_args(argv)
    if args.timesteps < 1:
        parser.error("--timesteps must be at least 1")
    core = None
    if not args.no_pin:
        core = args.core if args.core is not None else min(allowed_cores())

    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, load average {load_average()}")
    print(f"Python {platform.python_version()}, {torch_info()}")
    settings = f"config {args.config}" if args.config else f"env {args.env}, default settings"
    print(f"{settings}, {args.timesteps:,} training steps requested\n", flush=True)

    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        if not args.skip_train:
            if args.cold:
                forget_kept_scores()
            chosen = ["--config", str(args.config.resolve())] if args.config else ["--env", args.env]
            results["synergy-gym train"] = run("train", [
                sys.executable, "-m", "synergy_gym", "train", *chosen, "--timesteps", str(args.timesteps),
                "--out", str(Path(tmp) / "run")], core)
        if not args.skip_minimal:
            results["ppo_masked_minimal"] = run("minimal", [
                sys.executable, "-m", "synergy_gym.agents.ppo_masked_minimal", "--env-id", args.env,
                "--total-timesteps", str(args.timesteps)], core)
    print(f"\n{'program':<22}{'env steps':>10}{'wall s':>9}{'steps/s':>9}{'first step s':>14}  pinning")
    for name, r in results.items():
        first = f"{r['first_step_s']:.1f}" if r["first_step_s"] is not None else "n/a"
        rate = r["steps"] / r["wall_s"]
        print(f"{name:<22}{r['steps']:>10,}{r['wall_s']:>9.1f}{rate:>9,.0f}{first:>14}  {r['pinned']}")


if __name__ == "__main__":
    main()
