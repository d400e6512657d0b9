"""``synergy-gym train``'s tooling: TensorBoard baselines, console lines, --help, Ctrl-C, torch threads."""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch

from synergy_gym.cli import build_parser, main
from tests.support import REPO
from tests.support.agent_runs import FAST, SMALL_ENV, TINY, tensorboard_scalars, tiny_train_config

ROOT = REPO
ENV = "Synergy-small-scarce-v0"


def tiny_config(**extra):
    return tiny_train_config(ENV, **extra)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """One short run with an entropy schedule and the relative reward; its folder and console output."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("tooling")
    config = root / "tiny.toml"
    config.write_text(TINY + "ent_coef = 0.02\nent_coef_final = 0.0\ntarget_kl = 0.05\n")
    out = root / "run"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["train", "--env", ENV, "--timesteps", "192", "--n-envs", "1", "--eval-freq", "64",
                     "--config", str(config), "--reward", "heuristic_relative", "--out", str(out), *FAST])
    assert code == 0
    return out, buffer.getvalue()


def test_tensorboard_has_every_heuristic_and_the_ratio_to_the_best(short_run):
    from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES, env_heuristics
    from synergy_gym.experiments.evaluation import evaluate

    out, _ = short_run
    scalars = tensorboard_scalars(out, with_steps=True)
    seeds = [2_000_000, 2_000_001]
    means = {name: float(evaluate(h, ENV, seeds, **SMALL_ENV)["mean_jct_h"].mean())
             for name, h in env_heuristics().items()}
    for name in HEURISTIC_NAMES:
        tag = f"baseline/{name}/mean_jct_h"
        assert tag in scalars, tag
        assert scalars[tag][0][0] == 0  # logged at the start
        assert scalars[tag][0][1] == pytest.approx(means[name])
    best = min((n for n in means if n != "random"), key=means.get)
    history = pd.read_csv(out / "eval.csv")
    ratios = dict(scalars["eval/jct_vs_best_heuristic"])
    assert sorted(ratios) == history["timesteps"].tolist() == [64, 128, 192]
    for _, row in history.iterrows():
        assert ratios[row["timesteps"]] == pytest.approx(row["mean_jct_h"] / means[best], rel=1e-6)
        assert row["jct_vs_best_heuristic"] == pytest.approx(row["mean_jct_h"] / means[best])
    import json

    scored = json.loads((out / "baselines.json").read_text())
    assert scored["best"] == best and scored["relative_to"] == best
    assert scored["mean_jct_h"] == pytest.approx(means)
    # The entropy schedule: 0.02 → 0 over 192 steps, set before each update (after 64, 128, 192 steps).
    assert [v for _, v in scalars["train/ent_coef"]] == pytest.approx([0.02 * 2 / 3, 0.02 / 3, 0.0])


def test_tensorboard_has_one_value_per_tag_and_step(tmp_path):
    # An evaluation every second update wrote the pending update's train/* at its step too: two values at one
    # step (SB3's dump at the end of the rollout, then the evaluation's), none at the next rollout's end.
    config = tmp_path / "tiny.toml"
    config.write_text(TINY.replace("n_steps = 64", "n_steps = 32").replace("batch_size = 64", "batch_size = 32"))
    out = tmp_path / "run"
    code = main(["train", "--env", ENV, "--timesteps", "128", "--n-envs", "1", "--eval-freq", "64", "--config",
                 str(config), "--out", str(out), *FAST])
    assert code == 0
    scalars = tensorboard_scalars(out, with_steps=True)
    for tag, points in scalars.items():
        steps = [step for step, _ in points]
        assert len(steps) == len(set(steps)), (tag, steps)
    assert [step for step, _ in scalars["train/loss"]] == [64, 96, 128]  # each update's, at SB3's next dump
    assert [step for step, _ in scalars["eval/mean_jct_h"]] == [64, 128]


def test_console_shows_the_run_folder_first_and_one_line_per_evaluation(short_run):
    out, printed = short_run
    lines = printed.splitlines()
    assert lines[0] == f"run folder: {out}"
    assert lines[1].startswith("env heuristics on 2 evaluation seeds (mean JCT, h): ") and "(best)" in lines[1]
    assert "reward heuristic_relative to " in lines[2] and "1 torch thread" in lines[2]
    evals = [line for line in lines if line.startswith("eval  step")]
    assert len(evals) == 3  # at 64, 128, 192 steps, without a progress bar
    pattern = re.compile(r"eval  step +([\d,]+)  mean JCT +([\d.]+) h  ([\d.]+)× (\S+)  best so far +([\d.]+) h")
    history = pd.read_csv(out / "eval.csv")
    best = float("inf")
    for line, (_, row) in zip(evals, history.iterrows()):
        step, jct, ratio, _, best_so_far = pattern.match(line).groups()
        best = min(best, row["mean_jct_h"])
        assert int(step.replace(",", "")) == row["timesteps"]
        assert float(jct) == pytest.approx(row["mean_jct_h"], abs=1e-3)
        assert float(ratio) == pytest.approx(row["jct_vs_best_heuristic"], abs=1e-3)
        assert float(best_so_far) == pytest.approx(best, abs=1e-3)
    assert "(best heuristic)" in lines[-2] and lines[-1] == f"run folder: {out}"


@pytest.mark.slow
def test_progress_into_a_log_is_plain_lines(tmp_path, capsys):
    """Output that is not a terminal gets a plain line at the start and the end of training, not a redrawn bar."""
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    fast = [a for a in FAST if a != "--no-progress"]
    assert main(["train", "--env", ENV, "--timesteps", "128", "--n-envs", "1", "--eval-freq", "64",
                 "--config", str(config), "--out", str(tmp_path / "run"), *fast]) == 0
    out, err = capsys.readouterr()
    assert "\r" not in out + err
    progress = [line for line in err.splitlines() if line.startswith("training: ")]
    assert progress[0] == "training:   0% (0/128 steps)" and progress[-1] == "training: 100% (128/128 steps)"
    assert len(progress) <= 12


def test_help_shows_every_default(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    train = sub.choices["train"]
    options = [a for a in train._actions if a.option_strings and a.dest != "help"]
    assert len(options) >= 20
    for action in options:
        assert "(default: " in (action.help or ""), action.option_strings
    assert text.count("(default: ") >= len(options)
    for shown in ("(default: maskable_ppo)", "(default: 200,000)", "(default: 4)",
                  "(default: fifo+tune)", "(default: absolute)", "(default: best)", "(default: off)"):
        assert shown in text, shown


def test_new_options_reach_the_config(tmp_path):
    from synergy_gym.agents.train import config_from_args

    parser = build_parser()
    args = parser.parse_args(["train", "--torch-threads", "3", "--reward", "heuristic_relative", "--relative-to",
                              "tetris", "--shared-workload", "--ent-coef-final", "0.001", "--gamma", "0.999"])
    cfg = config_from_args(args)
    assert (cfg.torch_threads, cfg.reward, cfg.relative_to, cfg.shared_workload, cfg.ent_coef_final, cfg.gamma) == (
        3, "heuristic_relative", "tetris", True, 0.001, 0.999)
    config = tmp_path / "c.toml"
    config.write_text("shared_workload = true\n")
    args = parser.parse_args(["train", "--config", str(config), "--no-shared-workload"])
    assert config_from_args(args).shared_workload is False


# -- torch threads -----------------------------------------------------------------------------------


class Probe:
    """An SB3 callback (built lazily) that records torch's thread count, or raises Ctrl-C at a step."""

    def __new__(cls, seen=None, interrupt_at=None, wrapped=False):
        from stable_baselines3.common.callbacks import BaseCallback

        class _Probe(BaseCallback):
            def _on_step(self):
                if seen is not None:
                    seen.add(torch.get_num_threads())
                if interrupt_at is not None and self.num_timesteps >= interrupt_at:
                    if wrapped:  # as numba reports a Ctrl-C inside a compiled kernel
                        try:
                            raise KeyboardInterrupt
                        except KeyboardInterrupt:
                            raise SystemError("CPUDispatcher(...) returned a result with an exception set")  # noqa: B904
                    raise KeyboardInterrupt
                return True

        return _Probe()


@pytest.mark.slow
@pytest.mark.parametrize("configured, expected", [(None, 1), (2, 2)])
def test_torch_runs_on_one_cpu_thread_unless_configured(tmp_path, configured, expected):
    from synergy_gym.agents.train import train

    torch.set_num_threads(3)
    try:
        seen: set[int] = set()
        train(tiny_config(timesteps=64, eval_freq=64, torch_threads=configured), out=tmp_path / "run", log=None,
              callbacks=[Probe(seen)])
        assert seen == {expected}
        assert torch.get_num_threads() == 3  # restored after training
    finally:
        torch.set_num_threads(1)


def test_cuda_threads_are_left_alone():
    from synergy_gym.agents.train import torch_threads

    assert torch_threads(tiny_config(), "cuda") is None
    assert torch_threads(tiny_config(), "cpu") == 1
    assert torch_threads(tiny_config(torch_threads=4), "cuda") == 4


# -- Ctrl-C ----------------------------------------------------------------------------------------


def test_ctrl_c_saves_the_last_model(tmp_path, capsys, monkeypatch):
    from synergy_gym.agents import train as train_module
    from synergy_gym.agents.models import load_model
    from synergy_gym.errors import Interrupted

    out = tmp_path / "run"
    with pytest.raises(Interrupted, match=r"saved last_model.zip and vecnormalize.pkl at step 1(0[0-9]|1[0-9]|2[0-8])"):
        train_module.train(tiny_config(timesteps=10_000, eval_freq=64), out=out, log=None,
                           callbacks=[Probe(interrupt_at=100)])
    assert (out / "last_model.zip").is_file() and (out / "vecnormalize.pkl").is_file()
    assert load_model(out / "last_model.zip", "maskable_ppo", "cpu").num_timesteps == 100
    assert pd.read_csv(out / "eval.csv")["timesteps"].tolist() == [64]  # no final evaluation after Ctrl-C
    # Through the command line: exit status 130 and one line saying what was saved.
    original = train_module.train
    monkeypatch.setattr(train_module, "train", lambda cfg, out=None, resume=None: original(
        cfg, out=out, resume=resume, callbacks=[Probe(interrupt_at=64)]))
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    code = main(["train", "--env", ENV, "--timesteps", "10000", "--n-envs", "1", "--config", str(config),
                 "--out", str(tmp_path / "cli"), *FAST])
    err = capsys.readouterr().err
    assert code == 130
    assert err.startswith("synergy-gym train: interrupted; saved last_model.zip and vecnormalize.pkl at step 64 in ")
    assert (tmp_path / "cli" / "last_model.zip").is_file()


def test_ctrl_c_inside_a_kernel_saves_the_last_model_too(tmp_path):
    from synergy_gym.agents.train import train
    from synergy_gym.errors import Interrupted

    out = tmp_path / "run"
    with pytest.raises(Interrupted, match=r"saved last_model.zip and vecnormalize.pkl at step "):
        train(tiny_config(timesteps=10_000, eval_freq=64), out=out, log=None, callbacks=[Probe(interrupt_at=40, wrapped=True)])
    assert (out / "last_model.zip").is_file()


def _interruptible() -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_sigint_to_a_training_process_group_saves_and_exits_130(tmp_path):
    """SIGINT to a training run's whole process group (as a terminal's Ctrl-C): it saves, says so and exits 130.

    The SubprocVecEnv workers get the signal too and ignore it; the main process saves and
    closes them without waiting for an interrupted rollout step (that wait once hung the run:
    ``test_closing_after_an_interrupted_rollout_step_does_not_hang``).
    """
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "synergy_gym", "train", "--env", ENV, "--timesteps", "1000000", "--n-envs", "2",
         "--eval-freq", "128", "--config", str(config), "--out", str(out), *FAST],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # A process started with SIGINT ignored keeps ignoring it (Python then installs no
        # KeyboardInterrupt handler); start the child as a terminal would, whatever this process inherited.
        preexec_fn=_interruptible,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / "eval.csv").is_file():  # training has started
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no evaluation within 120 s"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # the child leads its own session and process group
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (stdout, stderr)
    assert stdout.splitlines()[0] == f"run folder: {out}"
    assert re.search(r"interrupted; saved last_model.zip and vecnormalize.pkl at step [\d,]+ in ", stderr), stderr
    assert "Traceback" not in stderr
    assert (out / "last_model.zip").is_file() and (out / "vecnormalize.pkl").is_file()
    assert np.isfinite(pd.read_csv(out / "eval.csv")["mean_jct_h"]).all()


@pytest.mark.slow
def test_closing_after_an_interrupted_rollout_step_does_not_hang():
    """Ctrl-C inside SubprocVecEnv.step_wait, after one worker's result was received: closing must not wait for it."""
    import threading

    from stable_baselines3.common.vec_env import SubprocVecEnv, VecNormalize

    from synergy_gym.agents.vec_envs import close_vec_env, env_factory

    vec = SubprocVecEnv([env_factory(ENV, dict(SMALL_ENV), worker=True)] * 2)
    env = VecNormalize(vec)
    env.reset()
    vec.step_async([vec.action_space.n - 1] * 2)
    vec.remotes[0].recv()  # step_wait got this far when the interrupt came
    closer = threading.Thread(target=close_vec_env, args=(env, True), daemon=True)
    closer.start()
    closer.join(timeout=60)
    hung = closer.is_alive()
    if hung:  # unblock the test process
        for process in vec.processes:
            process.kill()
    assert not hung and vec.closed and not any(p.is_alive() for p in vec.processes)
