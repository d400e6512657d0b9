"""``synergy-gym evaluate --decisions DIR``, ``--jobs-csv FILE`` and ``--label``: the records beside the table.

Tiny episodes (10–15 jobs on ``Synergy-small-v0``). The decision log is checked
against the environment itself: each line's slot and level are what the
environment did with the action (its fallback included), its job is the slot's
job, and there is one line per step of the first seed's episode.
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.agents.eval_outputs import JOBS_FIELDS
from synergy_gym.agents.eval_policies import agent_labels, decisions_file_name
from synergy_gym.cli import main
from synergy_gym.env.observation import SLOT_FEATURES
from synergy_gym.errors import ConfigError
from synergy_gym.experiments.evaluation import DECISION_KEYS, decision_record, evaluate
from tests.support import REPO
from tests.support.cli_runs import run_cli, snapshot

ENV = ["--env", "Synergy-small-v0"]
JOBS = 15


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_decision_lines(lines: list[dict], n_levels: int, stop_action: int, seed: int) -> None:
    """Keys, stops, and slot/level consistent with the action (exactly so for the valid ones)."""
    for d in lines:
        assert list(d) == ["seed", *DECISION_KEYS], d
        assert d["seed"] == seed and d["n_valid"] >= 1 and d["filled_slots"] >= 1
        if d["stop"]:
            assert d["action"] == stop_action and not d["invalid"]
            assert d["slot"] is None and d["level"] is None and d["job_id"] is None and d["features"] is None
            continue
        assert list(d["features"]) == list(SLOT_FEATURES) and d["n_valid"] >= 2  # a level of a slot, and stop
        assert 0 <= d["slot"] < d["filled_slots"] and 0 <= d["level"] < n_levels and d["job_id"] >= 0
        if not d["invalid"]:
            assert d["action"] == d["slot"] * n_levels + d["level"], d
    rounds = [d["round"] for d in lines]
    times = [d["time_h"] for d in lines]
    assert rounds == sorted(rounds) and times == sorted(times)


def _save_ppo(path: Path, num_jobs: int = 10) -> Path:
    """An untrained PPO (no masking: it picks masked actions, which the environment resolves)."""
    from stable_baselines3 import PPO

    env = gym.make("Synergy-small-v0", num_jobs=num_jobs)
    path.parent.mkdir(parents=True, exist_ok=True)
    PPO("MultiInputPolicy", env, n_steps=8, batch_size=8, policy_kwargs={"net_arch": [8]}, device="cpu",
        seed=0).save(path)
    env.close()
    return path.with_suffix(".zip")


# -- the decision record against the environment -------------------------------------------------


@pytest.mark.parametrize("kwargs", [{}, {"preemptive": True}, {"preemptive": True, "redecide": "every_event"},
                                    {"agent_orders": False}])
def test_a_decision_record_is_what_the_environment_does_with_the_action(kwargs):
    env = gym.make("Synergy-small-v0", num_jobs=12, **kwargs)
    base = env.unwrapped
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=4, options={"workload_seed": 4})
    done, steps, invalid = False, 0, 0
    kinds = {"admit": 0, "preempt": 0, "stop": 0}
    ahead = 0
    while not done:
        slot_jobs = base.slot_jobs
        rows, now = base.state.running_rows.copy(), base.sim.now
        action = int(rng.integers(base.layout.n))  # anywhere in the space, masked or not
        rec = decision_record(env, obs, action)
        assert rec["round"] == base.sim.rounds_elapsed and rec["n_valid"] == int(base.action_masks().sum())
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        assert rec["invalid"] == info["invalid_action"]
        invalid += rec["invalid"]
        kinds[rec["kind"]] += 1
        if rec["stop"]:
            assert rec["kind"] == "stop" and (action == base.layout.stop or rec["invalid"])
        elif rec["kind"] == "preempt":
            j = int(rows[rec["row"]])
            assert rec["job_id"] == int(base.sim.jobs.job_id[j]) and j not in base.sim.ledger.jobs
        else:
            j = int(slot_jobs[rec["slot"]])
            assert rec["job_id"] == int(base.sim.jobs.job_id[j]) and base.level_of(j) == rec["level"]
            if rec["ahead"] and base.sim.now == now:  # placed before every running job (same event)
                order = base.sim.ledger.jobs.tolist()
                assert all(order.index(j) < order.index(int(r)) for r in rows)
                ahead += 1
        steps += 1
        assert steps < 20_000
    assert invalid > 0 and steps == base.episode_summary()["decisions"]
    assert kinds["admit"] and bool(kinds["preempt"]) == bool(ahead) == (base.layout.n_running > 0)


def test_evaluate_logs_the_first_seed_only_and_keeps_every_job():
    from synergy_gym.baselines.env_heuristics import env_heuristics

    df = evaluate(env_heuristics(1)["random"], "Synergy-small-v0", [5, 6], keep_jobs=True, log_decisions=True,
                  num_jobs=JOBS)
    log = df["decision_log"].iloc[0]
    assert df["decision_log"].iloc[1] is None and len(log) == df["decisions"].iloc[0] == df["steps"].iloc[0]
    assert any(d["stop"] for d in log) and not any(d["invalid"] for d in log)  # random: valid actions, stop among them
    for jobs in df["jobs"]:
        assert len(jobs) == JOBS and list(jobs["job_id"]) == list(range(JOBS))
        assert (jobs["arrival_h"] <= jobs["start_h"]).all() and (jobs["start_h"] < jobs["finish_h"]).all()
        assert np.allclose(jobs["jct_h"], jobs["finish_h"] - jobs["arrival_h"])


# -- the command line -------------------------------------------------------------------------------


def test_decisions_and_jobs_csv_from_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["evaluate", *ENV, "--env-kwargs", f"num_jobs={JOBS}", "--seeds", "3,4",
                              "--baselines", "env:fifo+tune,random,sim:fifo+tune,no-wait-bound", "--quiet",
                              "--out", "e", "--decisions", "d", "--jobs-csv", "e/jobs.csv"], capsys)
    assert code == 0, err
    assert "2 decision logs (seed 3) to d" in out and f"{JOBS * 2 * 4} job rows to e/jobs.csv" in out
    # Env policies only: the simulator's fifo+tune and the bound make no env decisions.
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["fifo+tune.jsonl", "random.jsonl"]
    env = gym.make("Synergy-small-v0", num_jobs=JOBS)
    layout = env.unwrapped.layout
    results = pd.read_csv(tmp_path / "e" / "results.csv")
    for name in ("fifo+tune", "random"):
        lines = read_jsonl(tmp_path / "d" / f"{name}.jsonl")
        row = results[(results["policy"] == name) & (results["source"] == "env") & (results["seed"] == 3)]
        assert len(lines) == int(row["decisions"].iloc[0])  # one line per step of the first seed
        check_decision_lines(lines, layout.n_levels, layout.stop, seed=3)
        admitted = [d["job_id"] for d in lines if not d["stop"]]
        assert sorted(admitted) == list(range(JOBS))  # default mode: each job is admitted once
    assert not any(d["stop"] for d in read_jsonl(tmp_path / "d" / "fifo+tune.jsonl"))
    assert any(d["stop"] for d in read_jsonl(tmp_path / "d" / "random.jsonl"))

    jobs = pd.read_csv(tmp_path / "e" / "jobs.csv")
    assert tuple(jobs.columns) == JOBS_FIELDS and len(jobs) == JOBS * 2 * 4  # jobs × seeds × policies
    assert set(jobs.groupby(["policy", "source", "seed"]).size()) == {JOBS}
    assert set(zip(jobs["policy"], jobs["source"])) == {("fifo+tune", "env"), ("random", "env"), ("fifo+tune", "sim"),
                                                       ("no-wait-bound", "bound")}
    assert np.allclose(jobs["jct_h"], jobs["finish_h"] - jobs["arrival_h"]) and (jobs["start_h"] >= jobs["arrival_h"]).all()
    # The env's fifo+tune is the simulator's on single-GPU workloads, job by job.
    env_rows = jobs[jobs["source"] == "env"].query("policy == 'fifo+tune'").reset_index(drop=True)
    sim_rows = jobs[jobs["source"] == "sim"].reset_index(drop=True)
    pd.testing.assert_frame_equal(env_rows.drop(columns="source"), sim_rows.drop(columns="source"))
    # The bound starts each job at the first round boundary at or after its arrival.
    bound = jobs[jobs["source"] == "bound"]
    round_h = env.unwrapped.sim_config.round_s / 3600.0
    assert ((bound["start_h"] >= bound["arrival_h"] - 1e-9) & (bound["start_h"] - bound["arrival_h"] < round_h)).all()
    assert np.allclose(np.round(bound["start_h"] / round_h), bound["start_h"] / round_h)
    # Per-seed mean JCT in results.csv is the mean over the jobs.csv rows.
    means = jobs.groupby(["policy", "source", "seed"])["jct_h"].mean()
    for r in results.itertuples():
        assert means[(r.policy, r.source, r.seed)] == pytest.approx(r.mean_jct_h)
    env.close()


def test_several_models_each_get_a_row_labels_and_decision_logs(tmp_path, capsys):
    a = _save_ppo(tmp_path / "run-a" / "best_model")
    b = _save_ppo(tmp_path / "run-b" / "best_model")
    common = ["evaluate", *ENV, "--env-kwargs", "num_jobs=10", "max_rounds=300", "--seeds", "0,1",
              "--baselines", "env:fifo+tune", "--device", "cpu", "--quiet", "--no-normalize"]
    code, _, err = run_cli([*common, "--model", str(a), "--label", "ppo one", "--model", str(b), "--label", "b/2",
                              "--out", str(tmp_path / "e"), "--decisions", str(tmp_path / "d"),
                              "--jobs-csv", str(tmp_path / "j.csv")], capsys)
    assert code == 0, err
    rows = {(r["policy"], r["source"]): r for r in json.loads((tmp_path / "e" / "results.json").read_text())["results"]}
    assert set(rows) == {("ppo one", "agent"), ("b/2", "agent"), ("agent", "agent"), ("fifo+tune", "env")}
    assert rows[("agent", "agent")]["ci95_over"] == "models" and rows[("agent", "agent")]["models"] == 2
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["b_2.jsonl", "fifo+tune.jsonl", "ppo_one.jsonl"]
    layout = gym.make("Synergy-small-v0", num_jobs=10).unwrapped.layout
    results = pd.read_csv(tmp_path / "e" / "results.csv")
    for label, name in (("ppo one", "ppo_one.jsonl"), ("b/2", "b_2.jsonl")):
        lines = read_jsonl(tmp_path / "d" / name)
        row = results[(results["policy"] == label) & (results["seed"] == 0)]
        assert len(lines) == int(row["decisions"].iloc[0])
        assert sum(d["invalid"] for d in lines) == int(row["invalid_actions"].iloc[0]) > 0  # fallbacks are logged
        check_decision_lines(lines, layout.n_levels, layout.stop, seed=0)
    jobs = pd.read_csv(tmp_path / "j.csv")
    assert len(jobs) == 10 * 2 * 3 and set(jobs["policy"]) == {"ppo one", "b/2", "fifo+tune"}
    # Without --label: each model is named by its --model argument as given; several give the mean row "agent".
    code, _, err = run_cli([*common, "--model", str(a), "--model", str(b), "--out", str(tmp_path / "e2")], capsys)
    assert code == 0, err
    policies = {r["policy"] for r in json.loads((tmp_path / "e2" / "results.json").read_text())["results"]}
    assert policies == {str(a), str(b), "agent", "fifo+tune"}


def test_default_labels_and_file_names():
    # The default name is the --model argument as given: a shipped policy's name or the path as typed.
    assert agent_labels([], None) == [] and agent_labels(["pretrained:small-scarce"], None) == ["pretrained:small-scarce"]
    assert agent_labels([Path("r/best_model.zip")], None) == ["r/best_model.zip"]
    assert agent_labels(["r1/best_model.zip", "./r2/best_model.zip"], None) == ["r1/best_model.zip", "./r2/best_model.zip"]
    # Repeats, and a model called like the models' mean row, get their position.
    assert agent_labels(["r/m.zip", "r/m.zip", "q.zip"], None) == ["r/m.zip[0]", "r/m.zip[1]", "q.zip"]
    assert agent_labels(["agent"], None) == ["agent"] and agent_labels(["agent", "b"], None) == ["agent[0]", "b"]
    assert agent_labels([Path("a.zip")], ["mine"]) == ["mine"]
    # The CLI page says the same default (it said "the run folder's name").
    page = " ".join((REPO / "docs" / "cli.md").read_text(encoding="utf-8").split())
    assert "`--label` names them in the same order, default the `--model` argument as given" in page
    assert "run folder's name" not in page
    for labels, words in ((["x"], "1 label(s) for 2 --model"), (["x", "y", "z"], "3 label(s) for 2 --model"),
                          (["x", "x"], "'x' is given twice"), (["agent", "y"], "the models' mean row"),
                          (["", "y"], "may not be empty")):
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
            agent_labels([Path("a.zip"), Path("b.zip")], labels)
    assert decisions_file_name("fifo+tune") == "fifo+tune.jsonl"
    assert decisions_file_name("run/best [1]") == "run_best__1_.jsonl" and decisions_file_name("..") == "policy.jsonl"
    assert decisions_file_name("pretrained:small-scarce") == "pretrained_small-scarce.jsonl"


# -- bad input: one line, exit 2, nothing written -------------------------------------------------

BAD = [
    (["--model", "model.zip", "--model", "model.zip", "--label", "a"],
     "--label: 1 label(s) for 2 --model argument(s); give one --label per --model"),
    (["--label", "a"], "--label needs --model"),
    (["--model", "model.zip", "--model", "model.zip", "--label", "a", "--label", "a"], "--label 'a' is given twice"),
    (["--decisions", "afile"], "--decisions afile: afile is a file, not a folder"),
    (["--decisions", "missing/d"], "--decisions missing/d: its parent folder missing does not exist"),
    (["--decisions", "ro"], "--decisions ro: folder ro is not writable"),
    (["--decisions", "adir", "--model", "model.zip", "--label", "fifo+tune"],
     "--decisions: the decisions of agent 'fifo+tune' and env 'fifo+tune' would both go to fifo+tune.jsonl"),
    (["--decisions", "dd"], "--decisions dd: dd/fifo+tune.jsonl is a folder, but the command writes a file there"),
    (["--jobs-csv", "adir"], "--jobs-csv adir: is a folder, not a file"),
    (["--jobs-csv", "missing/j.csv"], "--jobs-csv missing/j.csv: parent folder missing does not exist"),
    (["--jobs-csv", "r.json"], "--jobs-csv r.json: is also a file that --json writes"),
    (["--jobs-csv", "e/results.csv"], "--jobs-csv e/results.csv: is also a file that --out writes"),
]


@pytest.mark.parametrize("extra, words", BAD)
def test_bad_records_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, monkeypatch, extra, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "dd" / "fifo+tune.jsonl").mkdir(parents=True)
    (tmp_path / "model.zip").write_text("not a model")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        before = snapshot(tmp_path)
        argv = ["evaluate", *ENV, "--env-kwargs", "num_jobs=10", "--seeds", "0", "--baselines", "env:fifo+tune",
                "--device", "cpu", "--quiet", "--out", "e", "--json", "r.json", *extra]
        code, out, err = run_cli(argv, capsys)
        assert code == 2, err
        assert err.count("\n") == 1 and err.startswith("synergy-gym evaluate: error:") and words in err, err
        assert out == "" and "Traceback" not in err
        assert snapshot(tmp_path) == before
    finally:
        ro.chmod(0o755)


def test_decisions_inside_a_new_out_folder_and_help(tmp_path, capsys):
    code, _, err = run_cli(["evaluate", *ENV, "--env-kwargs", "num_jobs=10", "--seeds", "0", "--baselines",
                              "env:fifo+tune", "--quiet", "--out", str(tmp_path / "e"),
                              "--decisions", str(tmp_path / "e" / "decisions")], capsys)
    assert code == 0, err
    assert (tmp_path / "e" / "decisions" / "fifo+tune.jsonl").is_file()
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--decisions DIR", "--jobs-csv FILE", "--label", "simulator policies and the bound make no env decisions",
                  "one per --model"):
        assert words in text, words


def test_agents_show_progress_per_episode_as_the_baselines_do(tmp_path, capsys):
    model = _save_ppo(tmp_path / "run" / "model")
    code, _, err = run_cli(["evaluate", *ENV, "--env-kwargs", "num_jobs=10", "max_rounds=300", "--seeds", "0,1",
                            "--baselines", "env:fifo+tune,sim:fifo+fair", "--device", "cpu", "--model", str(model),
                            "--no-normalize", "--out", str(tmp_path / "e")], capsys)
    assert code == 0, err
    assert "\r" not in err  # captured output is not a terminal: plain lines
    for name in (f"agent {model}", "env fifo+tune", "sim fifo+fair"):
        assert f"{name}:   0% (0/2 episodes)\n" in err and f"{name}: 100% (2/2 episodes)\n" in err, err
