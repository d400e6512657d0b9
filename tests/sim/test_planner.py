"""The round planner: Tune's admit–sort–place sequence as a cursor, re-using last round's placement."""

import pickle

import numpy as np
import pytest

from synergy_gym import ClusterSpec, FairShare, Greedy, SyntheticWorkload, Tune
from synergy_gym.sim.allocation import admit_by_gpus
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.ledger import ClusterLedger
from synergy_gym.sim.planner import RoundPlanner


def grants(ledger):
    return list(zip(ledger.jobs.tolist(), ledger.cpu.tolist(), ledger.mem.tolist(), ledger.tput.tolist(), ledger.parts))


def cluster_and_jobs(num_jobs=40, seed=2):
    cluster = ClusterSpec(num_servers=2, cpus_per_server=12)
    w = SyntheticWorkload(jobs_per_hour=2, seed=seed, num_jobs=num_jobs, multigpu=True, max_gpus=16).build()
    return cluster, JobTable(cluster, w)


def test_plan_is_tunes_admission_then_placement_in_descending_gpus():
    cluster, jobs = cluster_and_jobs()
    order = list(range(jobs.n))
    ledger = ClusterLedger(cluster)
    RoundPlanner(ledger, jobs, Tune()).plan(order)
    admitted = admit_by_gpus(order, jobs.gpus_l, cluster.total_gpus)
    assert sorted(ledger.jobs) == sorted(admitted)
    gpus = [jobs.gpus_l[j] for j in ledger.jobs]
    assert gpus == sorted(gpus, reverse=True)  # multi-GPU jobs placed first
    # Ties keep policy order.
    for a, b in zip(ledger.jobs, ledger.jobs[1:]):
        if jobs.gpus_l[a] == jobs.gpus_l[b]:
            assert order.index(a) < order.index(b)


def test_reusing_last_rounds_placement_changes_nothing():
    cluster, jobs = cluster_and_jobs(num_jobs=60, seed=5)
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
        assert reused.ledger.free_cpu.tolist() == fresh.free_cpu.tolist()
        assert reused.ledger.free_mem.tolist() == fresh.free_mem.tolist()


def test_a_mechanism_that_is_not_a_placer_plans_whole_rounds_and_refuses_admissions():
    cluster, jobs = cluster_and_jobs()
    order = list(range(jobs.n))
    for mechanism in (FairShare(), Greedy()):
        planner = RoundPlanner(ClusterLedger(cluster), jobs, mechanism, reuse=True)
        assert planner.placer is None and not planner.reuse and not planner.ledger.undo
        planner.plan(np.array(order))
        fresh = ClusterLedger(cluster)
        mechanism.allocate(fresh, jobs, order)
        assert grants(planner.ledger) == grants(fresh) and fresh.n_slots
        with pytest.raises(TypeError, match=f"allocation '{mechanism.name}' plans whole rounds"):
            planner.begin(order)


def test_a_planner_pickles_mid_round():
    cluster, jobs = cluster_and_jobs()
    planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune(), reuse=True)
    order = list(range(jobs.n))
    planner.plan(order)
    planner.begin(order[:5])
    planner.admit_in_order()
    clone = pickle.loads(pickle.dumps(planner))
    for p in (planner, clone):
        p.add(7)
        p.finish()
    assert grants(planner.ledger) == grants(clone.ledger)


def test_a_round_must_be_begun_before_jobs_are_admitted():
    cluster, jobs = cluster_and_jobs()
    planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune())
    for call in (planner.admit_in_order, planner.settle, planner.finish, lambda: planner.add(0)):
        with pytest.raises(RuntimeError, match=r"no round in progress: call begin\(\) first"):
            call()


# -- add: the environment's agent picks the jobs --------------------------------------------------


def _fresh_tune(cluster, jobs, admitted):
    """Tune's placement of ``admitted`` (in admission order) on an empty cluster."""
    ledger = ClusterLedger(cluster)
    Tune().place_all(ledger, jobs, admitted)
    return ledger


def test_add_in_admission_order_is_tunes_round():
    cluster, jobs = cluster_and_jobs(num_jobs=60, seed=3)
    rng = np.random.default_rng(1)
    for _ in range(20):
        order = rng.permutation(jobs.n).tolist()
        planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune())
        admitted = admit_by_gpus(order, jobs.gpus_l, cluster.total_gpus)
        planner.begin([])
        planner.admit_in_order()
        assert planner.ledger.n_slots == 0
        free = cluster.total_gpus
        for j in admitted:
            assert planner.free_gpus == free
            planner.add(j)
            free -= jobs.gpus_l[j]
        assert planner.free_gpus == free
        planner.finish()
        fresh = ClusterLedger(cluster)
        RoundPlanner(fresh, jobs, Tune()).plan(order)
        assert grants(planner.ledger) == grants(fresh)


def test_add_after_kept_jobs_over_many_rounds_gives_tunes_placement_with_reuse():
    # The env's loop: begin over the jobs that keep running, admit more with add (some at a new
    # target), finish. Reusing last round's placement must change nothing.
    cluster, jobs = cluster_and_jobs(num_jobs=60, seed=4)
    rng = np.random.default_rng(2)
    planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune(), reuse=True)
    grid_cpu, grid_mem = jobs.zoo.cpu_grid, jobs.zoo.mem_grid
    running: list[int] = []
    reused_rounds = 0
    for _ in range(200):
        quiet = rng.random() < 0.5  # a round in which nothing changes, as most are
        keep = list(running) if quiet else [j for j in running if rng.random() > 0.2]  # some finished
        planner.begin(keep)
        planner.admit_in_order()
        admitted = list(keep)
        others = [j for j in rng.permutation(jobs.n).tolist() if j not in keep]
        for j in others[: 0 if quiet else int(rng.integers(0, 8))]:
            if jobs.gpus_l[j] > planner.free_gpus:
                continue
            changed = bool(rng.random() < 0.5)
            if changed:
                jobs.set_target(j, float(rng.choice(grid_cpu)), float(rng.choice(grid_mem)))
            planner.add(j, target_changed=changed)
            admitted.append(j)
        in_sync = planner._scan.in_sync
        planner.finish()
        reused_rounds += in_sync
        assert grants(planner.ledger) == grants(_fresh_tune(cluster, jobs, admitted))
        planner.ledger.check_capacity()
        running = admitted
    assert reused_rounds > 10


def test_re_adding_last_rounds_jobs_reuses_only_the_unchanged_placements():
    # The env's preemptive loop: every job returns to the waiting set; the agent re-admits them,
    # mostly in the same order and at the same level (target_changed=False), sometimes not.
    cluster, jobs = cluster_and_jobs(num_jobs=60, seed=6)
    rng = np.random.default_rng(3)
    planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune(), reuse=True)
    grid_cpu, grid_mem = jobs.zoo.cpu_grid, jobs.zoo.mem_grid
    admitted = admit_by_gpus(list(range(jobs.n)), jobs.gpus_l, cluster.total_gpus)
    changed_rounds = 0
    for _ in range(150):
        planner.begin([])
        planner.admit_in_order()
        order = list(admitted)
        if rng.random() < 0.2 and len(order) > 1:  # swap two neighbours
            i = int(rng.integers(len(order) - 1))
            order[i], order[i + 1] = order[i + 1], order[i]
        if rng.random() < 0.2 and order:  # one finished
            order.pop(int(rng.integers(len(order))))
        admitted = []
        for j in order:
            if jobs.gpus_l[j] > planner.free_gpus:
                continue
            changed = bool(rng.random() < 0.15)
            if changed:
                jobs.set_target(j, float(rng.choice(grid_cpu)), float(rng.choice(grid_mem)))
                changed_rounds += 1
            planner.add(j, target_changed=changed)
            admitted.append(j)
        for j in rng.permutation(jobs.n).tolist():  # backfill
            if j not in admitted and jobs.gpus_l[j] <= planner.free_gpus and rng.random() < 0.3:
                planner.add(j)
                admitted.append(j)
        planner.finish()
        assert grants(planner.ledger) == grants(_fresh_tune(cluster, jobs, admitted))
    assert changed_rounds > 20


def test_add_out_of_gpu_order_is_re_placed_in_tunes_order():
    cluster, jobs = cluster_and_jobs(num_jobs=60, seed=5)
    small = [j for j in range(jobs.n) if jobs.gpus_l[j] == 1][:3]
    big = [j for j in range(jobs.n) if jobs.gpus_l[j] >= 4][:1]
    assert small and big
    planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune())
    planner.begin([])
    planner.admit_in_order()
    for j in small + big:  # a bigger job after smaller ones: placed when the round ends
        planner.add(j)
    planner.finish()
    gpus = [jobs.gpus_l[j] for j in planner.ledger.jobs]
    assert gpus == sorted(gpus, reverse=True)
    assert grants(planner.ledger) == grants(_fresh_tune(cluster, jobs, small + big))


def test_add_refuses_jobs_that_do_not_fit():
    cluster, jobs = cluster_and_jobs()
    planner = RoundPlanner(ClusterLedger(cluster), jobs, Tune())
    planner.begin(list(range(jobs.n)))
    planner.admit_in_order()  # fill the cluster
    assert planner.free_gpus < cluster.total_gpus
    too_big = next(k for k in range(jobs.n) if jobs.gpus_l[k] > planner.free_gpus and k not in planner.ledger.jobs)
    message = rf"job {too_big} needs {jobs.gpus_l[too_big]} GPUs but only {planner.free_gpus} are free"
    with pytest.raises(RuntimeError, match=message):
        planner.add(too_big)


def test_a_tune_subclass_that_places_jobs_its_own_way_is_called(make_workload):
    cluster = ClusterSpec(num_servers=2, gpus_per_server=4, cpus_per_server=12, mem_gb_per_server=250)
    jobs = JobTable(cluster, make_workload(["res18", "gnmt", "res18"], [0, 1, 2], [10] * 3, gpus=[1, 2, 1]))

    class Recorded(Tune):
        def __init__(self) -> None:
            self.placed: list[int] = []

        def place(self, ledger, jobs, j, target=None):
            self.placed.append(int(j))
            return super().place(ledger, jobs, j, target)

    for order in ([0, 2], [0, 1, 2]):  # placed as admitted; re-placed in Tune's order (more GPUs first)
        placer = Recorded()
        RoundPlanner(ClusterLedger(cluster), jobs, placer).plan(order)
        assert placer.placed[-len(order):] == sorted(order, key=lambda j: -jobs.gpus_l[j])


def test_target_rows_then_assign_target_equals_set_target():
    # The environment precomputes each level's target row at reset and sets it with
    # ``assign_target``; that must leave the job table exactly as ``set_target`` does.
    _, precomputed = cluster_and_jobs(num_jobs=30, seed=5)
    _, direct = cluster_and_jobs(num_jobs=30, seed=5)
    jobs = np.arange(precomputed.n)
    cpu = 1.0 + (jobs % 7) * 0.75
    mem = 20.0 + (jobs % 5) * 30.0
    rows = precomputed.target_rows(jobs, cpu, mem)
    unchanged = {name: getattr(precomputed, name).copy() for name in ("target_cpu", "tput_target", "tput_capped")}
    for name, before in unchanged.items():  # computing rows sets nothing
        assert np.array_equal(getattr(precomputed, name), before)
    for j in jobs.tolist():
        precomputed.assign_target(j, *rows[j].tolist())
        direct.set_target(j, float(cpu[j]), float(mem[j]))
    for name in ("target_cpu", "target_mem", "tput_target", "fallback_cpu", "fallback_mem", "tput_fallback",
                 "tput_capped", "target_cpu_l", "target_mem_l", "tput_target_l", "fallback_cpu_l",
                 "fallback_mem_l", "tput_fallback_l"):
        assert np.array_equal(np.asarray(getattr(precomputed, name)), np.asarray(getattr(direct, name))), name
