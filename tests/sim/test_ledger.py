"""The compiled ledger against a plain reading of its rules, on random grant, resize and rollback sequences."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from synergy_gym import ClusterSpec
from synergy_gym.sim import ledger_kernels as lk
from synergy_gym.sim import server_index
from synergy_gym.sim.compiled import kernel_sources_digest
from synergy_gym.sim.ledger import ClusterLedger

EPS = lk.EPS


def first_fit(ledger: ClusterLedger, gpus: int, cpu: float, mem: float):
    """First fit as the module docstring states it, by a scan of every server in index order."""
    fg, fc, fm = ledger.free_gpu.tolist(), ledger.free_cpu.tolist(), ledger.free_mem.tolist()
    if gpus > sum(fg):
        return None
    if gpus == 1:
        for s in range(len(fg)):
            if fg[s] > 0 and fc[s] >= cpu - EPS and fm[s] >= mem - EPS:
                return [(s, 1)]
        return None
    parts, need = [], gpus
    for s in range(len(fg)):
        k = min(need, fg[s], int((fc[s] + EPS) // cpu), int((fm[s] + EPS) // mem)) if fg[s] > 0 else 0
        if k > 0:
            parts.append((s, k))
            need -= k
            if need == 0:
                return parts
    return None


def snapshot(ledger: ClusterLedger):
    return (
        ledger.free_gpu.tolist(), ledger.free_cpu.tolist(), ledger.free_mem.tolist(), ledger.jobs.tolist(),
        ledger.cpu.tolist(), ledger.mem.tolist(), ledger.tput.tolist(), ledger.parts, ledger.fallback,
        ledger.free_gpus_total,
    )


def index_is_current(ledger: ClusterLedger) -> bool:
    index = ledger.state[13].copy()
    server_index.rebuild(ledger.free_gpu, ledger.free_cpu, ledger.free_mem, ledger.state[13])
    return bool(np.array_equal(index, ledger.state[13]))


ops = st.lists(
    st.tuples(
        st.sampled_from(["grant", "grant", "grant", "resize", "mark", "rollback"]),
        st.integers(1, 6),  # GPUs
        st.sampled_from([0.5, 1.0, 2.5, 3.0, 4.0, 6.0, 9.0]),  # CPUs per GPU
        st.sampled_from([10.0, 31.25, 62.5, 100.0, 125.0]),  # GB per GPU
        st.integers(0, 10**6),
    ),
    max_size=60,
)


@settings(max_examples=80, deadline=None)
@given(servers=st.integers(1, 19), gpus_per_server=st.sampled_from([1, 2, 4, 8]), ops=ops)
def test_the_ledger_finds_what_a_scan_finds_and_rolls_back_exactly(servers, gpus_per_server, ops):
    cluster = ClusterSpec(
        num_servers=servers, gpus_per_server=gpus_per_server, cpus_per_server=3.0 * gpus_per_server,
        mem_gb_per_server=62.5 * gpus_per_server,
    )
    ledger = ClusterLedger(cluster, undo=True)
    marks: list[tuple[int, tuple]] = []
    for kind, gpus, cpu, mem, pick in ops:
        if kind == "grant":
            parts = ledger.find(gpus, cpu, mem)
            assert parts == first_fit(ledger, gpus, cpu, mem)
            if parts is not None:
                ledger.grant(pick, parts, cpu, mem, 1.0, (min(cpu, 3.0), min(mem, 62.5), 1.0))
        elif kind == "resize" and ledger.n_slots:
            slot = pick % ledger.n_slots
            fb_cpu, fb_mem, fb_tput = ledger.fallback[slot]
            ledger.resize(slot, fb_cpu, fb_mem, fb_tput)
        elif kind == "mark":
            marks.append((ledger.mark(), snapshot(ledger)))
        elif kind == "rollback" and marks:
            mark, before = marks.pop(pick % len(marks))
            del marks[pick % (len(marks) + 1):]  # later marks are gone with what they marked
            ledger.rollback(mark)
            assert snapshot(ledger) == before  # the old values themselves, not recomputed ones
        ledger.check_capacity()
        assert index_is_current(ledger)
        assert ledger.free_gpus_total == int(ledger.free_gpu.sum())
    on_server = ledger.slot_on_server
    for slot, parts in enumerate(ledger.parts):
        for s, n in parts:
            assert slot in on_server[s] and ledger.gpus_of(slot, s) == n


def test_a_long_rollback_rebuilds_the_index_once_and_leaves_it_current():
    cluster = ClusterSpec(num_servers=64, gpus_per_server=8)
    ledger = ClusterLedger(cluster, undo=True)
    before = snapshot(ledger)
    while (parts := ledger.find(1, 3.0, 62.5)) is not None:  # fill the cluster, a GPU at a time
        ledger.grant(ledger.n_slots, parts, 3.0, 62.5, 1.0)
    assert ledger.free_gpus_total == 0 and ledger.n_slots == 512
    ledger.rollback(0)
    assert snapshot(ledger) == before and index_is_current(ledger)


def test_consolidate_fills_the_fullest_server_that_holds_the_job():
    cluster = ClusterSpec(num_servers=3, gpus_per_server=4, cpus_per_server=12, mem_gb_per_server=250)
    ledger = ClusterLedger(cluster, "consolidate")
    ledger.grant(0, [(1, 3)], 3.0, 62.5, 1.0)
    assert ledger.find(1, 3.0, 62.5) == [(1, 1)]  # server 1 has one free GPU left
    assert ledger.find(6, 3.0, 62.5) == [(0, 4), (2, 2)]  # most room first
    assert ledger.find(10, 3.0, 62.5) is None and not math.isnan(ledger.free_cpu.sum())


def test_the_kernel_cache_folder_follows_the_kernels_source(tmp_path):
    root = tmp_path / "copy"
    for package in ("sim", "env"):
        (root / package).mkdir(parents=True)
        (root / package / "kernels.py").write_text("x = 1\n")
    same = kernel_sources_digest.__wrapped__(root)
    assert kernel_sources_digest.__wrapped__(root) == same
    (root / "env" / "kernels.py").write_text("x = 2\n")  # a kernel another module's kernels call, changed
    assert kernel_sources_digest.__wrapped__(root) != same
    assert len(kernel_sources_digest()) == 16


def test_a_numba_cache_dir_that_cannot_be_used_turns_caching_off(tmp_path, monkeypatch):
    # numba swapped an unusable NUMBA_CACHE_DIR for a folder beside the package's modules (17 index files in it).
    from synergy_gym.sim import compiled

    asked = []

    class FakeNumba:
        @staticmethod
        def njit(**options):
            asked.append(options["cache"])
            return lambda function: function

    monkeypatch.setattr(compiled, "_import_numba", lambda: FakeNumba)
    monkeypatch.setattr(compiled, "_recompiling_corrupt_files", lambda dispatcher: dispatcher)
    (tmp_path / "afile").write_text("x")
    for folder, cached in ((tmp_path / "afile" / "n", False), (tmp_path / "numba", True)):
        monkeypatch.setenv("NUMBA_CACHE_DIR", str(folder))
        compiled._dispatcher(lambda: None)
        assert asked[-1] is cached


def test_resizing_one_grant_again_and_again_grows_the_undo_log_and_rolls_back_exactly():
    cluster = ClusterSpec(num_servers=1, gpus_per_server=1, cpus_per_server=8, mem_gb_per_server=100)
    ledger = ClusterLedger(cluster, undo=True)
    before = snapshot(ledger)
    ledger.grant(7, [(0, 1)], 6.0, 50.0, 1.5, (3.0, 25.0, 1.0))
    for k in range(20):  # far more entries than Tune ever logs for one slot
        ledger.resize(0, 3.0 + k % 3, 25.0 + k, 1.0 + k / 100)
    assert ledger.free_cpu.tolist() == [8.0 - (3.0 + 19 % 3)] and ledger.mark() == 21
    ledger.rollback(0)
    assert snapshot(ledger) == before and index_is_current(ledger)


def test_a_grant_of_gpus_that_are_not_free_is_refused_naming_them():
    ledger = ClusterLedger(ClusterSpec(num_servers=2, gpus_per_server=2))
    ledger.grant(0, [(0, 2)], 3.0, 62.5, 1.0)
    for parts in ([(0, 1)], [(1, 3)], [(2, 1)], [(1, 0)], [(1, 1), (1, 1)], []):
        with pytest.raises(ValueError, match=r"grant of job 1: parts="):
            ledger.grant(1, parts, 3.0, 62.5, 1.0)
    assert ledger.n_slots == 1 and ledger.free_gpu.tolist() == [0, 2]
    with pytest.raises(IndexError, match="slot=1 is not a grant"):
        ledger.resize(1, 3.0, 62.5, 1.0)


def test_a_tiny_amount_per_gpu_fits_as_many_gpus_as_are_free():
    ledger = ClusterLedger(ClusterSpec(num_servers=2, gpus_per_server=2))
    assert ledger.find(3, 1e-18, 1e-300) == [(0, 2), (1, 1)]  # quotients far past any integer type
    assert ClusterLedger(ClusterSpec(num_servers=2, gpus_per_server=2), "consolidate").find(3, 1e-18, 10.0) == [
        (0, 2), (1, 1)]


@settings(max_examples=60, deadline=None)
@given(servers=st.integers(1, 8), gpus_per_server=st.sampled_from([1, 2, 4, 8]),
       jobs=st.lists(st.tuples(st.integers(1, 8), st.sampled_from([0.5, 1.0, 2.5, 3.0, 4.0, 6.0, 9.0]),
                               st.sampled_from([10.0, 31.25, 62.5, 100.0, 125.0])), min_size=1, max_size=60),
       placement=st.sampled_from(["first_fit", "consolidate"]))
@example(servers=1, gpus_per_server=2, jobs=[(1, 0.5, 100.0), (1, 0.5, 62.5), (1, 1.0, 10.0)], placement="first_fit")
def test_granting_in_order_grants_what_a_search_for_every_job_grants(servers, gpus_per_server, jobs, placement):
    # grant_in_order skips a job whose request is at least one that found no room (grants only take room):
    # the grants must be those of searching for every job in turn.
    cluster = ClusterSpec(num_servers=servers, gpus_per_server=gpus_per_server, cpus_per_server=3.0 * gpus_per_server,
                          mem_gb_per_server=62.5 * gpus_per_server)
    gpus = np.array([g for g, _, _ in jobs], dtype=np.int64)
    cpu, mem = np.array([c for _, c, _ in jobs]), np.array([m for _, _, m in jobs])
    tput = np.ones(len(jobs))
    fast = ClusterLedger(cluster, placement)
    lk.grant_in_order(fast.state, np.arange(len(jobs), dtype=np.int64), gpus, cpu, mem, tput, True)
    slow = ClusterLedger(cluster, placement)
    for j in range(len(jobs)):
        if slow.free_gpus_total == 0:
            break
        parts = slow.find(int(gpus[j]), float(cpu[j]), float(mem[j]))
        if parts is not None:
            slow.grant(j, parts, float(cpu[j]), float(mem[j]), 1.0)
    assert fast.jobs.tolist() == slow.jobs.tolist() and fast.parts == slow.parts
    assert fast.free_cpu.tolist() == slow.free_cpu.tolist() and fast.free_mem.tolist() == slow.free_mem.tolist()
