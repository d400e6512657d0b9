"""The runnable jobs' buffer, and rounds whose cost does not depend on rebuilding the whole queue."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synergy_gym import ClusterSpec, Simulator, SyntheticWorkload, Tune
from synergy_gym.baselines import make_policy
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.ledger import ClusterLedger
from synergy_gym.sim.planner import RoundPlanner
from synergy_gym.sim.runnable import RunnableJobs

# Each step: ("arrive", k) adds k jobs; ("finish", picks) finishes the runnable jobs at those positions.
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.integers(0, 700)),
        st.tuples(st.just("finish"), st.lists(st.integers(0, 10_000), max_size=12)),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(_steps, st.booleans())
def test_the_buffer_keeps_arrival_order_through_appends_and_removals(steps, each_time):
    n_jobs = sum(k for kind, k in steps if kind == "arrive")
    finish_s = np.full(n_jobs, np.nan)
    measured = np.arange(n_jobs) % 3 != 0
    queue, expected, arrived = RunnableJobs(), [], 0
    for t, (kind, arg) in enumerate(steps):
        if kind == "arrive":
            queue.append(arrived, arrived + arg)
            expected.extend(range(arrived, arrived + arg))
            arrived += arg
        elif expected:
            finished = np.array(sorted({expected[p % len(expected)] for p in arg}), dtype=np.int64)
            at = finished * 0.5 + t if each_time else np.zeros(0)
            n_measured = queue.drop_finished(finish_s, measured, finished, at, float(t))
            assert n_measured == int(measured[finished].sum())
            assert np.array_equal(finish_s[finished], at if each_time else np.full(finished.size, float(t)))
            expected = [j for j in expected if j not in set(finished.tolist())]
        assert queue.view.tolist() == expected
        assert queue.size == len(expected)
    assert np.isnan(finish_s[expected]).all()


def test_a_simulators_runnable_jobs_are_the_arrived_unfinished_ones_in_arrival_order():
    cluster = ClusterSpec(num_servers=2)
    workload = SyntheticWorkload(jobs_per_hour=12, seed=3, num_jobs=400, multigpu=True, max_gpus=16).build()
    for policy in ("fifo+tune", "srtf+tune", "las+greedy"):
        sim = Simulator(cluster, workload, make_policy(policy))
        checked = 0
        while not sim.done and sim.step():
            jobs = sim.jobs
            arrived = np.flatnonzero(jobs.arrival_s[: jobs.n] <= sim.now)
            waiting_or_running = arrived[np.isnan(jobs.finish_s[arrived])]
            # Arrivals are admitted at the start of the next step; the view holds those admitted so far.
            assert set(sim.runnable.tolist()) <= set(waiting_or_running.tolist())
            assert np.all(np.diff(sim.runnable) > 0)
            assert np.isnan(jobs.finish_s[sim.runnable]).all()
            checked += 1
        assert checked > 50 and sim.runnable.size == 0


def test_an_array_order_plans_the_same_round_as_a_list():
    # One 8-GPU server with 4 GPUs taken by a long job: the first job that fits sits far down a
    # long queue of 8-GPU jobs, past the planner's first block of the array.
    cluster = ClusterSpec(num_servers=1, gpus_per_server=8)
    workload = SyntheticWorkload(jobs_per_hour=60, seed=1, num_jobs=3_000, multigpu=True, max_gpus=8).build()
    jobs = JobTable(cluster, workload)
    big = [j for j in range(jobs.n) if jobs.gpus_l[j] == 8]
    small = [j for j in range(jobs.n) if jobs.gpus_l[j] <= 2]
    four = next(j for j in range(jobs.n) if jobs.gpus_l[j] == 4)
    # 8-GPU jobs never fit after the 4-GPU one, so repeating them in the order admits none twice.
    order = [four, *(big * (2_000 // len(big) + 1))[:2_000], *small[:5]]
    assert big and len(small) >= 5
    results = []
    for as_array in (False, True):
        ledger = ClusterLedger(cluster)
        planner = RoundPlanner(ledger, jobs, Tune(), reuse=True)
        for _ in range(2):  # a second round re-uses the first's placement
            planner.plan(np.array(order, dtype=np.int64) if as_array else order)
            results.append((list(ledger.jobs), list(ledger.cpu), list(ledger.mem), list(ledger.parts)))
    assert results[0] == results[1] == results[2] == results[3]
    assert results[0][0][0] == four and set(results[0][0][1:]) <= set(small)
