"""``synergy-gym evaluate`` and ``synergy_gym.evaluate`` on the scheduling-action environment.

Without ``--model`` the command scores the env heuristics (source ``env``), the
simulator's policies (source ``sim``) and the bounds (source ``bound``: no-waiting and contention-aware) on the same
workloads: the seed is the workload seed. The env heuristic ``fifo+tune`` reproduces the simulator's
``fifo+tune`` exactly in preemptive mode, and in the default mode on single-GPU
workloads, so their per-seed results must be equal here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from synergy_gym import evaluate
from synergy_gym.agents.eval_policies import parse_baselines, parse_sim_policies
from synergy_gym.agents.eval_summary import SUMMARY_FIELDS
from synergy_gym.agents.evaluate import run_policies
from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES, env_heuristics
from synergy_gym.baselines.sim_on_env import BOUNDS, CONTENTION_BOUND, NO_WAIT_BOUND, SIM_POLICIES, simulate_on_env
from synergy_gym.errors import SynergyGymError
from tests.support.cli_runs import run_cli, snapshot

SMALL = ["--env", "Synergy-small-v0"]


def rows_by_key(path: Path) -> dict[tuple[str, str], dict]:
    data = json.loads(path.read_text())
    assert set(data) == {"results", "meta"} and isinstance(data["results"], list)
    return {(r["policy"], r["source"]): r for r in data["results"]}


def test_evaluate_without_a_model_runs_env_heuristics_and_simulator_policies(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["evaluate", *SMALL, "--env-kwargs", "num_jobs=30", "preemptive=true",
                              "--baselines", "all", "--seeds", "3..5", "--json", "r.json", "--out", "e", "--quiet"],
                             capsys)
    assert code == 0, err
    rows = rows_by_key(tmp_path / "r.json")
    # The bounds run with the simulator's policies and are reported with source "bound".
    assert set(BOUNDS) == {NO_WAIT_BOUND, CONTENTION_BOUND} and set(BOUNDS) <= set(SIM_POLICIES)
    simulated = {(n, "bound" if n in BOUNDS else "sim") for n in SIM_POLICIES}
    assert set(rows) == {(n, "env") for n in HEURISTIC_NAMES} | simulated
    no_wait, contention = rows[(NO_WAIT_BOUND, "bound")], rows[(CONTENTION_BOUND, "bound")]
    # 30 jobs on 32 GPUs hardly contend: the contention bound is the no-waiting bound up to rounding.
    assert min(r["mean_jct_h"] for r in rows.values()) == pytest.approx(no_wait["mean_jct_h"], rel=1e-9)
    for row in rows.values():
        assert set(SUMMARY_FIELDS) <= set(row), row
        assert row["episodes"] == 3 and set(row["per_seed"]) == {"3", "4", "5"}
        assert row["mean_jct_h"] == pytest.approx(np.mean(list(row["per_seed"].values())))
        if row is contention:  # a mean JCT only, and the LP's solve time
            assert row["p99_jct_h"] is None and row["makespan_h"] is None and row["wall_s"] > 0
            continue
        assert row["mean_jct_ci95_h"] > 0 and row["p99_jct_h"] >= row["mean_jct_h"] and row["makespan_h"] > 0
        # No policy beats the contention bound on any seed, and it counts more than the no-waiting bound.
        for seed, mean in row["per_seed"].items():
            assert mean >= contention["per_seed"][seed] * (1 - 1e-9) or row is no_wait, (row["policy"], seed)
            assert contention["per_seed"][seed] >= no_wait["per_seed"][seed] * (1 - 1e-9)
    # Preemptive mode: the env's fifo+tune is the simulator's fifo+tune, seed by seed.
    env_tune, sim_tune = rows[("fifo+tune", "env")], rows[("fifo+tune", "sim")]
    assert env_tune["per_seed"] == sim_tune["per_seed"]
    for key in ("p99_jct_h", "makespan_h"):
        assert env_tune[key] == sim_tune[key]
    # The table is sorted by mean JCT and names the best env heuristic.
    means = [float(line.split()[2]) for line in out.splitlines()[2:2 + len(rows)]]
    assert means == sorted(means)
    best = min((r for r in rows.values() if r["source"] == "env"), key=lambda r: r["mean_jct_h"])
    assert f"best env heuristic: {best['policy']}," in out
    assert (tmp_path / "e" / "results.json").read_text() == (tmp_path / "r.json").read_text()
    csv = (tmp_path / "e" / "results.csv").read_text().splitlines()
    assert csv[0].startswith("policy,source,seed,") and "decisions,invalid_actions" in csv[0]
    assert len(csv) == 1 + 3 * len(rows) and (tmp_path / "e" / "jct_cdf.png").is_file()


def test_default_mode_fifo_tune_matches_the_simulator_on_single_gpu_workloads():
    results, jcts = run_policies("Synergy-small-v0", {"num_jobs": 40}, [0, 1], ("fifo+tune",), ("fifo+tune",))
    env = results[results["source"] == "env"].set_index("seed")
    sim = results[results["source"] == "sim"].set_index("seed")
    for column in ("mean_jct_h", "p99_jct_h", "makespan_h", "jobs_total"):
        assert env[column].tolist() == sim[column].tolist(), column
    assert np.array_equal(jcts[("fifo+tune", "env")], jcts[("fifo+tune", "sim")])
    assert (env["decisions"] >= 40).all() and (env["invalid_actions"] == 0).all()
    assert sim["decisions"].isna().all()


def test_preemptive_multi_gpu_fifo_tune_matches_the_simulator():
    kwargs = {"num_jobs": 30, "multigpu": True, "preemptive": True}
    env = evaluate(env_heuristics()["fifo+tune"], "Synergy-small-v0", [7, 8], **kwargs)
    sim = simulate_on_env("fifo+tune", "Synergy-small-v0", [7, 8], **kwargs)
    assert env["mean_jct_h"].tolist() == sim["mean_jct_h"].tolist()
    assert env["makespan_h"].tolist() == sim["makespan_h"].tolist()


def test_simulator_names_and_bounds_are_read_in_any_case_and_rows_carry_the_name_as_read():
    from synergy_gym.errors import UnknownNameError

    kwargs = {"num_jobs": 10}
    for given, name in (("FIFO+Tune ", "fifo+tune"), ("No-Wait-Bound", "no-wait-bound")):
        rows = simulate_on_env(given, "Synergy-small-v0", [7], **kwargs)
        assert rows["policy"].tolist() == [name]
        assert rows["mean_jct_h"].tolist() == simulate_on_env(name, "Synergy-small-v0", [7], **kwargs)["mean_jct_h"].tolist()
    with pytest.raises(UnknownNameError, match="unknown simulator policy 'nope'; valid: fifo\\+fair, .*, no-wait-bound, "
                                               "contention-bound$"):
        simulate_on_env("nope", "Synergy-small-v0", [7], **kwargs)


def test_the_seed_is_the_workload_seed():
    import gymnasium as gym

    import synergy_gym  # noqa: F401

    df = evaluate(env_heuristics()["fifo+tune"], "Synergy-small-v0", [11], keep_jcts=True, num_jobs=20)
    assert {"decisions", "invalid_actions", "episode_rounds"} <= set(df.columns)
    env = gym.make("Synergy-small-v0", num_jobs=20)
    jobs = env.unwrapped.workload_for_seed(11)
    assert df["jobs_total"].iloc[0] == len(jobs) == 20
    env.reset(seed=999, options={"workload_seed": 11})  # the env's own seed does not change the jobs
    assert np.array_equal(env.unwrapped.sim.jobs.arrival_s, np.asarray(jobs.arrival_s, dtype=float))
    env.close()


def test_random_is_seeded_per_episode(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for seeds, path in (("0,1", a), ("1", b)):
        code, _, err = run_cli(["evaluate", *SMALL, "--env-kwargs", "num_jobs=20", "--baselines", "random",
                                "--seeds", seeds, "--json", str(path), "--out", str(tmp_path / path.stem), "--quiet"],
                               capsys)
        assert code == 0, err
    assert json.loads(a.read_text())["results"][0]["per_seed"]["1"] == json.loads(b.read_text())["results"][0]["per_seed"]["1"]


def test_baseline_names_pick_sources():
    assert parse_baselines("fifo+tune") == (("fifo+tune",), ("fifo+tune",))
    assert parse_baselines("env:fifo+tune, sim:fifo+opt,tetris") == (("fifo+tune", "tetris"), ("fifo+opt",))
    assert parse_baselines("drf+greedy,random") == (("random",), ("drf+greedy",))
    assert parse_baselines("env") == (HEURISTIC_NAMES, ())
    assert parse_baselines("all", ("fifo+tune",)) == (HEURISTIC_NAMES, ("fifo+tune",))
    assert parse_baselines("none") == ((), ())
    # The bounds are taken as simulator policies, each on its own too; "all" runs both.
    assert parse_baselines("contention-bound") == ((), (CONTENTION_BOUND,))
    assert parse_baselines("sim:contention-bound,no-wait-bound") == ((), (CONTENTION_BOUND, NO_WAIT_BOUND))
    assert set(BOUNDS) <= set(parse_baselines("all")[1])
    assert parse_sim_policies("contention-bound,fifo+tune") == ("fifo+tune", CONTENTION_BOUND)
    assert parse_sim_policies("no-wait-bound,contention-bound") == BOUNDS
    # Any case, the bounds as the simulator policies (and --baselines) take them.
    assert parse_sim_policies("No-Wait-Bound, FIFO+Tune,CONTENTION-BOUND") == ("fifo+tune", *BOUNDS)
    for bad in ("nope", "env:fifo+opt", "sim:tetris", "gpu:fifo+tune", "env:contention-bound"):
        with pytest.raises(SynergyGymError):
            parse_baselines(bad)


BAD_INPUT = [
    ({"--baselines": ["fifo+tune,nope"]}, "--baselines 'fifo+tune,nope': unknown baseline 'nope'"),
    ({"--baselines": ["env:fifo+opt"]}, "unknown env heuristic 'fifo+opt'"),
    ({"--sim-policies": ["fifo+magic"]}, "--sim-policies 'fifo+magic'"),
    ({"--sim-policies": ["fifo+tune,no-wait-bnd"]}, "or a bound: no-wait-bound, contention-bound"),
    ({"--episodes": ["3"]}, "--episodes 3 and --seeds '0' contradict each other"),
    ({"--seeds": ["1000000,5..3"]}, "--seeds '1000000,5..3': the seed range is empty: 5..3 ends before it starts"),
    ({"--seeds": ["5..2"]}, "--seeds '5..2': the seed range is empty"),
    ({"--seeds": ["a..b"]}, "--seeds 'a..b': expected integers"),
    ({"--env": ["Synergy-nope-v0"]}, "--env 'Synergy-nope-v0': unknown environment; valid: Synergy-v0"),
    ({"--env-kwargs": ["bogus=1"]}, "unknown env kwarg 'bogus'"),
    ({"--baselines": ["none"]}, "nothing to evaluate"),
    ({"--seeds": [], "--episodes": ["0"]}, "--episodes must be a positive integer"),
]


@pytest.mark.parametrize("change, words", BAD_INPUT)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, monkeypatch, change, words):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    flags = {"--env": ["Synergy-small-v0"], "--env-kwargs": ["num_jobs=10"], "--seeds": ["0"], "--json": ["r.json"]}
    flags.update(change)
    argv = ["evaluate", "--quiet", *[x for flag, values in flags.items() if values for x in (flag, *values)]]
    code, out, err = run_cli(argv, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("synergy-gym evaluate: error:") and words in err, err
    assert out == "" and "Traceback" not in err
    assert snapshot(tmp_path) == before  # no runs/ folder, no r.json


# -- models --------------------------------------------------------------------------------------


def _save_ppo(env, path: Path) -> Path:
    from stable_baselines3 import PPO

    path.parent.mkdir(parents=True, exist_ok=True)
    PPO("MultiInputPolicy", env, n_steps=8, batch_size=8, policy_kwargs={"net_arch": [8]}, device="cpu").save(path)
    return path.with_suffix(".zip")


def test_models_join_the_table_and_a_mismatched_model_is_refused(tmp_path, capsys, monkeypatch):
    import gymnasium as gym

    import synergy_gym  # noqa: F401

    monkeypatch.chdir(tmp_path)
    env = gym.make("Synergy-small-v0", num_jobs=10)
    model = _save_ppo(env, tmp_path / "m" / "model")
    env.close()
    argv = ["evaluate", "--model", str(model), "--model", str(model), *SMALL, "--seeds", "0,1",
            "--baselines", "fifo+tune", "--device", "cpu", "--quiet", "--no-normalize",
            "--env-kwargs", "num_jobs=10", "max_rounds=300"]
    code, out, err = run_cli([*argv, "--out", str(tmp_path / "e"), "--json", str(tmp_path / "r.json")], capsys)
    assert code == 0, err
    rows = rows_by_key(tmp_path / "r.json")
    # The same model twice: named by the --model argument as given, then by position.
    first, second = f"{model}[0]", f"{model}[1]"
    assert {(first, "agent"), (second, "agent"), ("agent", "agent"), ("fifo+tune", "env"), ("fifo+tune", "sim")} == set(rows)
    assert rows[("agent", "agent")]["ci95_over"] == "models" and rows[("agent", "agent")]["models"] == 2
    assert rows[(first, "agent")]["per_seed"] == rows[(second, "agent")]["per_seed"]
    # The same model on an environment with fewer slots: its spaces do not fit.
    code, out, err = run_cli([*argv, "max_queue=8"], capsys)
    assert code == 2 and err.count("\n") == 1 and out == "", err
    assert "its run folder has no config.json" in err and "Box(161,) in the model vs Box(41,)" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e", "m", "r.json"]


def test_agents_are_paired_per_seed_with_the_best_env_heuristic():
    """The paired difference is per seed against the table's best env heuristic, for each model and their mean."""
    import pandas as pd

    from synergy_gym.agents.eval_summary import format_summary, paired_vs_best_env, summarise, summary_records

    seeds = [10, 11, 12, 13]
    jct = {("srtf+price", "env"): [20.0, 30.0, 40.0, 50.0], ("fifo+tune", "env"): [30.0, 40.0, 50.0, 60.0],
           ("tetris+greedy", "sim"): [1.0, 1.0, 1.0, 1.0],  # a simulator row is never the comparison
           ("a", "agent"): [19.0, 31.0, 38.0, 49.0], ("b", "agent"): [21.0, 29.0, 40.0, 51.0]}
    rows = [{"policy": p, "source": s, "seed": seed, "mean_jct_h": v, "p99_jct_h": v, "makespan_h": v, "terminated": True,
             "wall_s": 0.0} for (p, s), values in jct.items() for seed, v in zip(seeds, values)]
    summary = summarise(pd.DataFrame(rows))
    paired = paired_vs_best_env(summary)
    assert set(paired) == {"a", "b", "agent"} and {p["heuristic"] for p in paired.values()} == {"srtf+price"}
    diffs_a = np.array([-1.0, 1.0, -2.0, -1.0])
    assert paired["a"]["mean_diff_h"] == pytest.approx(diffs_a.mean())
    assert paired["a"]["ci95_h"] == pytest.approx(3.182446 * diffs_a.std(ddof=1) / 2, rel=1e-5)
    assert paired["a"]["relative"] == pytest.approx(diffs_a.mean() / 35.0)
    assert (paired["a"]["better_seeds"], paired["b"]["better_seeds"], paired["agent"]["better_seeds"]) == (3, 1, 1)
    assert paired["agent"]["mean_diff_h"] == pytest.approx(np.mean([-1.0, 1.0, -2.0, -1.0, 1.0, -1.0, 0.0, 1.0]))
    records = {r["policy"]: r for r in summary_records(summary)}
    assert records["a"]["paired_vs_best_env"]["better_seeds"] == 3 and "paired_vs_best_env" not in records["fifo+tune"]
    text = format_summary(summary, seeds, "Synergy-small-scarce-v0")
    assert "paired vs srtf+price: a -0.750 h ± " in text and "lower JCT on 3 of 4 seeds" in text


def test_models_that_tie_the_heuristic_on_every_seed_have_a_mean_row_that_ties_it_too():
    """Three models deciding as the heuristic: the mean row is not 'lower' on any seed (a plain mean of three equal
    floats can be an ulp below them: 15.858465644563449 is one such value)."""
    import pandas as pd

    from synergy_gym.agents.eval_summary import paired_vs_best_env, summarise

    values = [15.858465644563449, 28.471854514277062, 15.489916168808467, 19.919]
    assert any(pd.DataFrame([{"v": v}] * 3).mean(axis=0)["v"] != v for v in values)  # the float effect is real
    jct = {("tetris+greedy", "env"): values, **{(name, "agent"): values for name in ("s0", "s1", "s2")}}
    rows = [{"policy": p, "source": s, "seed": seed, "mean_jct_h": v, "p99_jct_h": v, "makespan_h": v, "terminated": True,
             "wall_s": 0.0} for (p, s), vs in jct.items() for seed, v in enumerate(vs)]
    paired = paired_vs_best_env(summarise(pd.DataFrame(rows)))
    assert paired["agent"]["better_seeds"] == 0 and paired["agent"]["mean_diff_h"] == 0.0


def test_the_best_env_heuristic_is_never_random_and_ties_go_by_name():
    """As benchmark and training pick it (best_heuristic): random's lower JCT does not make it the comparison."""
    import pandas as pd

    from synergy_gym.agents.eval_summary import format_summary, paired_vs_best_env, summarise, summary_records

    def summary(jct: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
        return summarise(pd.DataFrame([{"policy": p, "source": s, "seed": seed, "mean_jct_h": v, "p99_jct_h": v,
                                        "makespan_h": v, "terminated": True, "wall_s": 0.0}
                                       for (p, s), values in jct.items() for seed, v in zip((1, 2), values)]))

    agent = {("a", "agent"): [19.0, 21.0]}
    table = summary({("random", "env"): [5.0, 5.0], ("tetris", "env"): [20.0, 30.0], ("las+tune", "env"): [30.0, 20.0],
                     ("fifo+tune", "env"): [40.0, 40.0], **agent})
    assert paired_vs_best_env(table)["a"]["heuristic"] == "las+tune"  # tied with tetris: the first by name
    records = {r["policy"]: r for r in summary_records(table)}
    assert records["a"]["paired_vs_best_env"]["heuristic"] == "las+tune"
    assert "best env heuristic: las+tune, mean JCT 25.000 h (-37.5% vs env fifo+tune)" in format_summary(table, [1, 2], "x")
    # random alone: no best heuristic, no paired comparison, and the table says so.
    alone = summary({("random", "env"): [5.0, 5.0], **agent})
    assert paired_vs_best_env(alone) == {}
    assert all("paired_vs_best_env" not in r for r in summary_records(alone))
    text = format_summary(alone, [1, 2], "x")
    assert "best env heuristic: none (only random ran, and random never counts); the agents get no paired " \
           "comparison" in text and "paired vs" not in text


def test_sim_policies_help_lists_the_bounds():
    from synergy_gym.cli import build_parser

    evaluate_parser = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices
                           and "evaluate" in a.choices).choices["evaluate"]
    helps = {a.dest: a.help for a in evaluate_parser._actions}
    assert all(bound in helps["sim_policies"] for bound in BOUNDS)
    assert "not with --seeds" in helps["episodes"] and "not with --episodes" in helps["seeds"]


def test_a_bounds_only_evaluation_writes_its_files_and_its_heading_names_the_env_kwargs(tmp_path, capsys):
    # The contention bound has no per-job JCTs: its figure is one empty panel (it was a traceback from matplotlib),
    # and the table's first line says which mode ran (preemptive=True) and counts one episode in the singular.
    code, out, err = run_cli(["evaluate", "--env", "Synergy-small-v0", "--env-kwargs", "num_jobs=12", "preemptive=true",
                              "--seeds", "4", "--baselines", "sim", "--sim-policies", "contention-bound", "--quiet",
                              "--out", str(tmp_path / "e")], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == ("Synergy-small-v0 (num_jobs=12 preemptive=True), workload seeds 4 "
                        "(1 episode; all jobs of each episode)")
    assert lines[2].split()[:2] == ["contention-bound", "bound"]
    assert (tmp_path / "e" / "jct_cdf.png").read_bytes().startswith(b"\x89PNG")
