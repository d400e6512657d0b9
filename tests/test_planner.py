"""The round planner: Tune's admit–sort–place sequence as a cursor that stops for decisions."""

import pickle

import numpy as np

from synergy_gym import ClusterSpec, SyntheticWorkload, Tune
from synergy_gym.allocation import ClusterLedger
from synergy_gym.job_table import JobTable
from synergy_gym.planner import RoundPlanner


def grants(ledger):
    return list(zip(ledger.jobs, ledger.cpu, ledger.mem, ledger.tput, ledger.parts))


def setup(num_jobs=40, seed=2):
    cluster = ClusterSpec(num_servers=2, cpus_per_server=12)
    w = SyntheticWorkload(jobs_per_hour=2, seed=seed, num_jobs=num_jobs, multigpu=True, max_gpus=16).build()
    return cluster, JobTable(cluster, w)


def test_plan_is_tunes_admission_then_placement_in_descending_gpus():
    cluster, jobs = setup()
    order = list(range(jobs.n))
    ledger = ClusterLedger(cluster)
    RoundPlanner(ledger, jobs, Tune()).plan(order)
    admitted = RoundPlanner(ClusterLedger(cluster), jobs, Tune()).admission(order)
    assert sorted(ledger.jobs) == sorted(admitted)
    gpus = [jobs.gpus_l[j] for j in ledger.jobs]
    assert gpus == sorted(gpus, reverse=True)  # multi-GPU jobs placed first
    # Ties keep policy order.
    for a, b in zip(ledger.jobs, ledger.jobs[1:]):
        if jobs.gpus_l[a] == jobs.gpus_l[b]:
            assert order.index(a) < order.index(b)


def test_reusing_last_rounds_placement_changes_nothing():
    cluster, jobs = setup(num_jobs=60, seed=5)
    rng = np.random.default_rng(0)
    reused = RoundPlanner(ClusterLedger(cluster), jobs, Tune(), reuse=True)
    for _ in range(30):
        # Rounds that keep a prefix of the last order and change the rest.
        order = list(range(jobs.n))
        k = int(rng.integers(0, jobs.n))
        tail = order[k:]
        rng.shuffle(tail)
        order[k:] = tail
        reused.plan(order)
        fresh = ClusterLedger(cluster)
        RoundPlanner(fresh, jobs, Tune()).plan(order)
        assert grants(reused.ledger) == grants(fresh)
        assert reused.ledger.free_cpu == fresh.free_cpu and reused.ledger.free_mem == fresh.free_mem


def test_the_cursor_stops_for_decisions_and_passes_jobs_over():
    cluster, jobs = setup()
    order = list(range(jobs.n))
    planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune())
    planner.begin(order)
    asked = []
    j = planner.next_decision(lambda j: j % 3 == 0)
    while j >= 0:
        asked.append(j)
        assert planner.waiting_after(2) == order[order.index(j) + 1 : order.index(j) + 3]
        if j == 0:
            planner.pass_over(j)  # kept out of this round
        else:
            planner.accept(j)
        j = planner.next_decision(lambda j: j % 3 == 0)
    assert planner.passed_over and asked and all(j % 3 == 0 for j in asked)
    planner.finish()
    assert 0 not in planner.ledger.jobs and not planner.in_round
    # The same round without job 0 is what Tune gives.
    fresh = ClusterLedger(cluster)
    RoundPlanner(fresh, jobs, Tune()).plan(order[1:])
    assert grants(planner.ledger) == grants(fresh)


def test_a_planner_pickles_mid_round():
    cluster, jobs = setup()
    planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune(), reuse=True)
    order = list(range(jobs.n))
    planner.plan(order)
    planner.begin(order, reuse_prefix=False)  # job 5 was admitted last round: it may not be kept unasked
    j = planner.next_decision(lambda j: j == 5)
    assert j == 5
    clone = pickle.loads(pickle.dumps(planner))
    for p in (planner, clone):
        p.accept(j)
        assert p.next_decision(None) == -1
        p.finish()
    assert grants(planner.ledger) == grants(clone.ledger)


def test_only_the_pending_job_can_be_decided():
    import pytest

    cluster, jobs = setup()
    planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune())
    planner.begin(list(range(jobs.n)))
    j = planner.next_decision(lambda j: j == 2)
    with pytest.raises(RuntimeError, match="job 3 is not awaiting a decision"):
        planner.accept(3)
    planner.accept(j)
    with pytest.raises(RuntimeError, match="job 2 is not awaiting a decision"):
        planner.pass_over(j)
