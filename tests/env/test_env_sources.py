"""Workload sources of the environment: the generator, fixed jobs, readers found through entry points."""

from dataclasses import dataclass

import numpy as np
import pytest

from synergy_gym import ConfigError, SyntheticWorkload, Workload
from synergy_gym.env import FixedWorkload, GeneratedWorkloads, SynergyEnv, WorkloadSource
from synergy_gym.env import source as source_module
from synergy_gym.traces.replay import write_workload_csv

SMALL = {"cluster": "small", "jobs_per_hour": 2.25}


def run_to_end(env, seed=0, options=None):
    """Always action 1 (slot 0 at its demand) until the episode ends; the final info."""
    env.reset(seed=seed, options=options)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(1)
        done = terminated or truncated
    assert terminated
    return info


def test_default_source_is_the_papers_generator_seeded_per_reset():
    env = SynergyEnv(**SMALL, num_jobs=30)
    assert isinstance(env.source, GeneratedWorkloads) and env.source.seeded
    env.reset(seed=3)
    seed = int(np.random.default_rng(3).integers(0, 2**31 - 1))  # what reset(seed=3) draws first
    expected = SyntheticWorkload(jobs_per_hour=2.25, seed=seed, num_jobs=30, max_gpus=32).build()
    assert np.array_equal(env.sim.jobs.arrival_s, expected.arrival_s)


@dataclass
class CountingSource:
    """A user's own source: three jobs whose length grows with the episode."""

    seeded: bool = False
    calls: int = 0

    def workload(self, seed):
        from synergy_gym import ModelZoo

        self.calls += 1
        zoo = ModelZoo.default()
        return Workload.build(
            zoo, job_id=[0, 1, 2], model=[zoo.index("gnmt")] * 3, gpus=[1, 1, 1],
            arrival_s=[0, 10, 20], total_iters=[10_000 * self.calls] * 3, run_until="all",
        )


def test_any_object_with_seeded_and_workload_is_a_source():
    src = CountingSource()
    assert isinstance(src, WorkloadSource)
    env = SynergyEnv(**SMALL, workload=src)
    assert env.source is src
    first = run_to_end(env)
    second = run_to_end(env)
    assert src.calls == 2 and first["jobs_total"] == 3
    assert second["mean_jct_h"] > first["mean_jct_h"]  # the second episode's jobs are longer


def test_a_fixed_workload_runs_until_all_jobs_finish_and_keeps_its_window(zoo):
    w = Workload.build(
        zoo, job_id=np.arange(6), model=[zoo.index("gnmt")] * 6, gpus=[1] * 6,
        arrival_s=np.arange(6) * 100.0, total_iters=np.arange(1, 7) * 20_000,
        measured=[False, False, True, True, False, False], run_until="window",
    )
    env = SynergyEnv(**SMALL, workload=w)
    assert isinstance(env.source, FixedWorkload) and not env.source.seeded
    info = run_to_end(env)
    assert info["jobs_finished"] == 6
    jobs = env.sim.jobs
    jct_h = (jobs.finish_s - jobs.arrival_s) / 3600
    assert info["window_mean_jct_h"] == pytest.approx(jct_h[2:4].mean())  # the workload's own window
    assert info["mean_jct_h"] == pytest.approx(jct_h.mean())


def test_replay_files_and_traces_are_read_by_the_registered_readers(tmp_path, zoo):
    w = SyntheticWorkload(jobs_per_hour=2.25, seed=5, num_jobs=40, max_gpus=32).build()
    path = write_workload_csv(w, tmp_path / "w.csv")
    env = SynergyEnv(**SMALL, workload=str(path))
    assert np.array_equal(env.source.workload(None).total_iters, w.total_iters)
    trace = tmp_path / "philly.csv"
    trace.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        + "".join(f"{1000 + 600 * i},{4000 + 100 * i},1,{4000 + 100 * i},vc1\n" for i in range(12))
    )
    env = SynergyEnv(**SMALL, trace=str(trace), num_jobs=10)
    assert len(env.source.workload(None)) == 10
    assert run_to_end(env)["jobs_finished"] == 10


def test_a_missing_reader_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setattr(source_module, "entry_points", lambda group: [])
    with pytest.raises(ConfigError, match="no 'replay' workload reader is installed"):
        SynergyEnv(**SMALL, workload=str(tmp_path / "w.csv"))


def test_a_workload_of_the_wrong_type_is_refused():
    with pytest.raises(ConfigError, match="env kwarg workload must be a replay CSV path, a Workload or a workload source"):
        SynergyEnv(**SMALL, workload=42)


def test_reset_on_a_given_workload_seed_pairs_env_and_simulator_runs():
    from synergy_gym import Simulator
    from synergy_gym.baselines import make_policy
    from synergy_gym.sim.cluster import cluster_preset

    env = SynergyEnv(**SMALL, num_jobs=40)
    w = env.workload_for_seed(1_000_000)
    generated = SyntheticWorkload(jobs_per_hour=2.25, seed=1_000_000, num_jobs=40, max_gpus=32).build()
    assert np.array_equal(w.arrival_s, generated.arrival_s)
    env.reset(seed=7, options={"workload_seed": 1_000_000})
    assert np.array_equal(env.sim.jobs.arrival_s, w.arrival_s)
    info = run_to_end(env, seed=7, options={"workload_seed": 1_000_000})  # slot 0 at demand: fifo+tune
    sim = Simulator(cluster_preset("small"), w, make_policy("fifo+tune")).run()
    jct = sim.jobs["jct_s"].to_numpy() / 3600
    assert info["mean_jct_h"] == pytest.approx(jct.mean(), rel=1e-12)
    # The option does not depend on the env's own seed, and a plain reset still draws from it.
    env.reset(seed=8, options={"workload_seed": 1_000_000})
    assert np.array_equal(env.sim.jobs.arrival_s, w.arrival_s)
    env.reset(seed=8)
    assert not np.array_equal(env.sim.jobs.arrival_s, w.arrival_s)


@pytest.mark.parametrize(
    "options, message",
    [({"workload_seed": -1}, "workload_seed must be a non-negative integer"),
     ({"workload_seed": 1.5}, "workload_seed must be a non-negative integer"),
     ({"seed": 3}, "env.reset\\(\\): unknown option 'seed'; valid: workload_seed")],
)
def test_bad_reset_options_are_refused(options, message):
    env = SynergyEnv(**SMALL, num_jobs=10)
    with pytest.raises(ConfigError, match=message):
        env.reset(options=options)


@pytest.mark.parametrize("name", ["preemptive", "agent_orders", "multigpu", "debug"])
def test_boolean_kwargs_must_be_booleans(name):
    with pytest.raises(ConfigError, match=f"env kwarg {name} must be true or false, got 'false'"):
        SynergyEnv(**SMALL, **{name: "false"})


def test_a_sources_window_workload_still_runs_every_job_to_the_end(zoo):
    # read_workload_csv gives run_until="window": an episode must still end only when every job has finished.
    w = Workload.build(
        zoo, job_id=np.arange(6), model=[zoo.index("gnmt")] * 6, gpus=[1] * 6,
        arrival_s=np.arange(6) * 100.0, total_iters=np.arange(1, 7) * 20_000,
        measured=[True, True, False, False, False, False], run_until="window",
    )

    class WindowSource:
        seeded = False

        def workload(self, seed):
            return w

    env = SynergyEnv(**SMALL, workload=WindowSource())
    info = run_to_end(env)
    assert info["jobs_finished"] == 6 and info["jobs_unfinished"] == 0
    assert env.workload_for_seed(0).run_until == "all"


def test_a_source_that_returns_no_workload_is_a_one_line_error():
    class Broken:
        seeded = True

        def workload(self, seed):
            return [1, 2, 3]

    env = SynergyEnv(**SMALL, workload=Broken())
    with pytest.raises(ConfigError, match=r"^workload source Broken: workload\(\d+\) must return a Workload, got list$"):
        env.reset(seed=0)


def test_gym_make_refuses_a_config_dict_the_ids_kwargs_would_override():
    import gymnasium as gym

    import synergy_gym  # noqa: F401  (registers the environments)
    from synergy_gym.env.calls import EnvCallError

    with pytest.raises(EnvCallError, match=r"config sets num_jobs=20, but the id \(or a keyword argument\) sets "
                                           r"num_jobs=300, which would win; .*gym.make\(id, \*\*config\)"):
        gym.make("Synergy-small-v0", config={"num_jobs": 20, "preemptive": True})
    env = gym.make("Synergy-small-v0", config={"num_jobs": 300, "preemptive": True})  # no disagreement
    assert env.unwrapped.cfg.preemptive and env.unwrapped.cfg.num_jobs == 300
    # The same settings in other forms (as YAML, JSON or numpy give them) are no disagreement either.
    from synergy_gym.env.config import as_cluster

    for config in ({"class_split": [60, 20, 20]}, {"class_split": np.array([60, 20, 20])}, {"class_split": "60/20/20"}):
        assert gym.make("Synergy-scarce-v0", config=config).unwrapped.cfg.class_split == (60.0, 20.0, 20.0)
    assert gym.make("Synergy-small-v0", config={"cluster": as_cluster("small")}).unwrapped.cluster.total_gpus == 32
    with pytest.raises(EnvCallError, match=r"config sets class_split=\[20, 70, 10\]"):
        gym.make("Synergy-scarce-v0", config={"class_split": [20, 70, 10]})
    with pytest.raises(EnvCallError, match=r"config sets cluster='default'"):
        gym.make("Synergy-small-v0", config={"cluster": "default"})


def test_jobs_over_another_model_zoo_are_refused_and_a_copy_of_the_default_zoo_is_not():
    # The environment observes, sizes and renders jobs by the default zoo, the simulator runs them by their own:
    # a deepspeech job over the zoo in reverse order showed as a vision job and rendered as alexnet.
    from synergy_gym import ModelZoo

    default = ModelZoo.default()
    reordered = ModelZoo(tuple(reversed(default.models)))

    def one_job(zoo):
        return Workload.build(zoo, job_id=[0], model=[zoo.index("deepspeech")], gpus=[1], arrival_s=[0.0],
                              total_iters=[1000.0], run_until="all")

    refused = r"^env kwarg workload: the jobs use another model zoo \(deepspeech, m5, .*\) than the environment"
    with pytest.raises(ConfigError, match=refused):
        SynergyEnv(**SMALL, workload=one_job(reordered))

    @dataclass(frozen=True)
    class Reordered:
        seeded: bool = False

        def workload(self, seed):
            return one_job(reordered)

    env = SynergyEnv(**SMALL, workload=Reordered())
    with pytest.raises(ConfigError, match=r"^workload source Reordered: workload\(None\): the jobs use another model"):
        env.reset(seed=0)
    with pytest.raises(ConfigError, match="another model zoo"):
        env.workload_for_seed(0)
    assert run_to_end(SynergyEnv(**SMALL, workload=one_job(ModelZoo.default())))["jobs_finished"] == 1
