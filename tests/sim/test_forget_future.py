"""Simulator.forget_future: a copy that knows no job to come (the same-information lookahead's model)."""

import copy

import numpy as np
import pytest

from synergy_gym import FIFO, ClusterSpec, SchedulingPolicy, SimulationConfig, Simulator, Tune

ONE_GPU = ClusterSpec(num_servers=1, gpus_per_server=1, cpus_per_server=3, mem_gb_per_server=62.5)


@pytest.mark.parametrize("run_until", ["all", "window"])
def test_a_copy_that_forgets_the_future_runs_only_the_jobs_already_there(make_workload, run_until):
    arrivals = [0.0, 0.0, 1000.0, 5000.0, 9000.0, 20000.0]
    w = make_workload(["res18"] * 6, arrivals=arrivals, iters=[3000] * 6, measured=[True] * 6, run_until=run_until)
    sim = Simulator(ONE_GPU, w, SchedulingPolicy(FIFO(), Tune()), SimulationConfig(debug=True))
    while sim.now < 3000:
        assert sim.step()
    arrived = int((sim.jobs.arrival_s <= sim.now).sum())
    assert 0 < arrived < 6 and not sim.done
    twin = copy.deepcopy(sim)
    twin.forget_future()
    while twin.step():
        pass
    assert twin.done
    jobs = twin.jobs
    assert np.isfinite(jobs.finish_s[:arrived]).all()  # the jobs already there all finish
    assert np.isnan(jobs.finish_s[arrived:]).all() and np.isnan(jobs.start_s[arrived:]).all()  # the others never run
    assert np.isinf(jobs.arrival_s[arrived:]).all()
    while sim.step():  # the original is untouched and runs every job
        pass
    assert np.isfinite(sim.jobs.finish_s).all() and sim.jobs.arrival_s.tolist() == arrivals
    # FIFO on one GPU: later arrivals never run before the earlier jobs, so these finish as in the original
    assert jobs.finish_s[:arrived].tolist() == sim.jobs.finish_s[:arrived].tolist()


def test_forgetting_when_every_job_has_arrived_changes_nothing(make_workload):
    w = make_workload(["res18"] * 3, arrivals=[0.0, 0.0, 0.0], iters=[2000] * 3)
    sim = Simulator(ONE_GPU, w, SchedulingPolicy(FIFO(), Tune()), SimulationConfig(debug=True))
    sim.step()
    twin = copy.deepcopy(sim)
    twin.forget_future()
    for s in (sim, twin):
        while s.step():
            pass
    assert twin.jobs.finish_s.tolist() == sim.jobs.finish_s.tolist() and twin.done


def test_jobs_that_arrived_while_the_clock_skipped_are_not_forgotten(make_workload):
    # One step skips to the first completion (19,500 s): the jobs of 600 s and 5,000 s have arrived, not yet queued.
    w = make_workload(["res18"] * 3, arrivals=[0.0, 600.0, 5000.0], iters=[30000] * 3)
    sim = Simulator(ONE_GPU, w, SchedulingPolicy(FIFO(), Tune()), SimulationConfig(debug=True))
    sim.step()
    assert sim.now > 5000.0
    twin = copy.deepcopy(sim)
    twin.forget_future()
    for s in (sim, twin):
        while s.step():
            pass
    assert np.isfinite(twin.jobs.finish_s).all() and twin.jobs.finish_s.tolist() == sim.jobs.finish_s.tolist()
