"""The simulator's public loop and summary: step() ends, averages count idle time, slips get one line."""

import dataclasses
import math

import numpy as np
import pytest

from synergy_gym import (
    FIFO,
    ClusterSpec,
    ConfigError,
    FairShare,
    ModelZoo,
    SchedulingPolicy,
    SimulationConfig,
    Simulator,
    SyntheticWorkload,
    Tune,
    WorkloadError,
)

ONE_GPU = ClusterSpec(num_servers=1, gpus_per_server=1, cpus_per_server=3, mem_gb_per_server=62.5)
FIFO_TUNE = SchedulingPolicy(FIFO(), Tune())


@pytest.mark.parametrize("run_until, measured", [("all", None), ("window", [True, False, False])])
def test_step_returns_false_once_the_run_is_done(make_workload, run_until, measured):
    w = make_workload(["gnmt"] * 3, arrivals=[0, 10, 20], iters=[2500, 5000, 2500], measured=measured, run_until=run_until)
    sim = Simulator(ONE_GPU, w, FIFO_TUNE)
    steps = 0
    while sim.step():  # used to return True forever once the run was done
        steps += 1
        assert steps < 100
    assert sim.done and not sim.step()
    again = Simulator(ONE_GPU, w, FIFO_TUNE).run()  # run() is unchanged
    assert again.summary.rounds_planned == sim.rounds_planned


def test_utilisation_and_throughput_average_over_the_whole_run(make_workload):
    # Two one-round jobs 10 rounds apart: the GPU is busy 2 of the run's 11 rounds.
    w = make_workload(["gnmt", "gnmt"], arrivals=[0, 3000], iters=[2500, 2500])
    result = Simulator(ONE_GPU, w, SchedulingPolicy(FIFO(), FairShare())).run()
    s = result.summary
    assert s.simulated_h == pytest.approx(3300 / 3600)
    assert s.mean_gpu_util == pytest.approx(2 / 11)  # was 1.0: the idle rounds were left out
    assert s.mean_cpu_util == pytest.approx(2 / 11) and s.mean_mem_util == pytest.approx(2 / 11)
    assert s.mean_throughput == pytest.approx(2 / 11)
    assert s.mean_gpu_util == pytest.approx(result.per_round()["gpu_util"].mean())
    unlogged = Simulator(ONE_GPU, w, FIFO_TUNE, SimulationConfig(record_rounds=False)).run().summary
    assert math.isnan(unlogged.mean_gpu_util) and math.isnan(unlogged.mean_throughput)


def test_slips_in_the_simulators_arguments_say_what_to_call(make_workload):
    w = make_workload(["gnmt"], arrivals=[0], iters=[10])
    cases = [
        (("small", w, FIFO_TUNE), ConfigError, "cluster must be a ClusterSpec, got 'small'; use cluster_preset('small')"),
        ((ONE_GPU, SyntheticWorkload(num_jobs=5), FIFO_TUNE), WorkloadError,
         "workload must be a Workload, got a SyntheticWorkload; call its .build()"),
        ((ONE_GPU, w, "fifo+tune"), ConfigError,
         "policy must be a SchedulingPolicy, got 'fifo+tune'; use synergy_gym.baselines.make_policy('fifo+tune')"),
        ((ONE_GPU, w, FIFO_TUNE, {"debug": True}), ConfigError,
         "config must be a SimulationConfig, got a dict; use SimulationConfig(**settings)"),
        # were: TypeError ('list' object is not an iterator, 'int' object is not callable) once the run needed them
        ((ONE_GPU, w, FIFO_TUNE, None, [w]), WorkloadError,
         "more_jobs must be an iterator of Workloads (SyntheticWorkload.stream()), got a list; pass iter(...) of it"),
        ((ONE_GPU, w, FIFO_TUNE, None, None, 5), ConfigError,
         "observer must be None or a function (simulator, job indices, GPUs), got an int"),
    ]
    for args, error, message in cases:
        with pytest.raises(error) as caught:
            Simulator(*args)
        assert type(caught.value) is error and str(caught.value).startswith(f"Simulator: {message}")
    with pytest.raises(ConfigError, match=r"^Simulator.run: progress must be None or a function \(done, total\), "
                                          r"got an int$"):
        Simulator(ONE_GPU, w, FIFO_TUNE).run(progress=5)


def test_a_model_with_zero_throughput_is_named_in_both_timings(zoo):
    z = dataclasses.replace(zoo[0], name="z", tput=np.zeros_like(zoo[0].tput))
    w = SyntheticWorkload(num_jobs=5, class_split=(1, 0, 0)).build(ModelZoo((z,)))
    for timing in ("round", "exact"):  # exact timing used to run to JCTs of inf
        with pytest.raises(WorkloadError, match="^job 0: model 'z' has throughput 0 at its slowest allocation"):
            Simulator(ClusterSpec(num_servers=1), w, FIFO_TUNE, SimulationConfig(timing=timing))


@pytest.mark.parametrize("timing", ["round", "exact"])
def test_the_measured_job_counts_follow_the_jobs_at_every_step(timing):
    # measured_finished and measured_total are kept as counts (run's progress asks for them each round):
    # they must equal the counts over the jobs, as more jobs stream in and the window's jobs finish.
    from synergy_gym.sim.cluster import cluster_preset

    first, more = SyntheticWorkload(jobs_per_hour=12.0, seed=3, window=(20, 60), multigpu=True, max_gpus=32).stream()
    sim = Simulator(cluster_preset("small"), first, FIFO_TUNE, SimulationConfig(timing=timing), more_jobs=more)
    steps, counts = 0, set()
    while sim.step():
        jobs = sim.jobs
        assert sim.measured_total == np.count_nonzero(jobs.measured)
        assert sim.measured_finished == np.count_nonzero(jobs.measured & ~np.isnan(jobs.finish_s))
        steps, counts = steps + 1, counts | {sim.measured_finished}
    assert steps > 10 and len(counts) > 10 and sim.measured_finished == sim.measured_total == 40
