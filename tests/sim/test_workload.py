import numpy as np
import pytest

from synergy_gym import ClusterSpec, Workload, WorkloadError


def test_build_sorts_by_arrival_and_fills_model_defaults(make_workload, zoo):
    w = make_workload(["gnmt", "alexnet", "m5"], arrivals=[50, 10, 10], iters=[5, 6, 7])
    assert w.job_id.tolist() == [1, 2, 0]
    assert w.iter_time_s.tolist() == [0.6, 0.6, 0.12]
    assert w.fair_duration_s.tolist() == pytest.approx([3.6, 4.2, 0.6])
    cpu, mem = w.demand_per_gpu(ClusterSpec())
    assert cpu.tolist() == [12.0, 6.0, 1.0] and mem.tolist() == [125.0, 187.5, 20.0]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"iters": [-5]}, "total_iters=-5 must be a positive integer"),
        ({"iters": [0]}, "total_iters=0 must be a positive integer"),
        ({"arrivals": [-1]}, "arrival_s=-1 must be ≥ 0"),
        ({"gpus": [0]}, "gpus=0 must be a positive integer"),
        ({"iter_time_s": [0.0]}, "iter_time_s=0 must be > 0"),
        ({"iters": [1e20]}, "total_iters=1e\\+20 must be a positive integer up to 2\\*\\*53"),  # overflowed int64
    ],
)
def test_invalid_jobs_are_rejected_naming_job_and_field(make_workload, kwargs, message):
    args = {"models": ["gnmt"], "arrivals": [0], "iters": [10]}
    args.update(kwargs)
    with pytest.raises(WorkloadError, match=f"job 0: {message}"):
        make_workload(**args)


def test_duplicate_ids_and_empty_window(zoo, make_workload):
    with pytest.raises(WorkloadError, match="job_id 3 appears more than once"):
        Workload.build(zoo, job_id=[3, 3], model=[0, 0], gpus=[1, 1], arrival_s=[0, 1], total_iters=[1, 1])
    w = make_workload(["gnmt"], [0], [10], measured=[False], run_until="window")
    with pytest.raises(WorkloadError, match="measured window is empty"):
        w.check_window()


def test_too_many_gpus_for_the_cluster(make_workload):
    w = make_workload(["gnmt"], [0], [10], gpus=[129])
    with pytest.raises(WorkloadError, match=r"^job 0 asks for 129 GPUs but the cluster has 128 \(it arrives at 0 s\)$"):
        w.check_fits(ClusterSpec())
    # In a long trace the first such job's position alone does not find it: its arrival, and how many there are.
    w = make_workload(["gnmt"] * 4, [0, 3600, 7200, 9000], [10] * 4, gpus=[1, 200, 1, 129])
    with pytest.raises(WorkloadError, match=r"^t.csv: job 1 asks for 200 GPUs but the cluster has 128 \(it arrives "
                                            r"at 3,600 s\); 2 of the 4 jobs ask for more than 128$"):
        w.check_fits(ClusterSpec(), "t.csv")


def test_concat_keeps_order_and_rejects_earlier_jobs(make_workload, zoo):
    a = make_workload(["gnmt", "lstm"], [0, 10], [1, 1])
    b = Workload.build(zoo, job_id=[2], model=[0], gpus=[1], arrival_s=[20], total_iters=[3])
    joined = a.concat(b)
    assert joined.job_id.tolist() == [0, 1, 2] and joined.arrival_s.tolist() == [0, 10, 20]
    early = Workload.build(zoo, job_id=[5], model=[0], gpus=[1], arrival_s=[5], total_iters=[3])
    with pytest.raises(WorkloadError, match="must arrive after"):
        a.concat(early)
    assert np.shares_memory(a.job_id, joined.job_id) is False


@pytest.mark.parametrize("field, values, shown", [
    ("job_id", [1.5, 1.7], "job_id must be a whole number below 2\\*\\*63, got 1.5"),  # both became id 1
    ("job_id", [1e30, 2], "job_id must be a whole number below 2\\*\\*63, got 1e\\+30"),  # overflowed
    ("job_id", ["a", "b"], "job_id must be a whole number below 2\\*\\*63, got 'a'"),
    ("job_id", [0, "b"], "job_id must be a whole number below 2\\*\\*63, got 'b'"),
    ("model", [0.7, 1.2], "job 0: model index must be a whole number below 2\\*\\*63, got 0.7"),  # truncated to 0, 1
])
def test_ids_and_model_indices_must_be_whole_numbers(zoo, field, values, shown):
    columns = {"job_id": [0, 1], "model": [0, 1], "gpus": [1, 1], "arrival_s": [0, 0], "total_iters": [100, 100]}
    with pytest.raises(WorkloadError, match=f"workload: {shown}$"):
        Workload.build(zoo, **{**columns, field: values})
    whole = Workload.build(zoo, **{**columns, field: [float(v) for v in columns[field]]})
    assert getattr(whole, field).dtype == np.int64 and getattr(whole, field).tolist() == columns[field]


def test_an_extension_may_not_repeat_job_ids(zoo):
    def jobs(ids, arrivals):
        return Workload.build(zoo, job_id=ids, model=[0, 0], gpus=[1, 1], arrival_s=arrivals, total_iters=[3, 3])

    with pytest.raises(WorkloadError, match="a workload extension repeats job_id 0 of the jobs it extends"):
        jobs([0, 1], [0, 10]).concat(jobs([7, 0], [20, 30]))
    assert jobs([5, 9], [0, 10]).concat(jobs([2, 7], [20, 30])).job_id.tolist() == [5, 9, 2, 7]  # ids need not grow
    # A tie in arrival with a smaller id would break Workload's order (arrival, ties by job id): refused.
    with pytest.raises(WorkloadError, match=r"first job \(job_id 1\) arrives with the last job it extends "
                                            r"\(job_id 6, at 10 s\) and must have a larger job_id"):
        jobs([5, 6], [0, 10]).concat(jobs([1, 8], [10, 30]))
    assert jobs([5, 6], [0, 10]).concat(jobs([7, 1], [10, 30])).job_id.tolist() == [5, 6, 7, 1]


def test_negative_job_ids_are_refused_as_the_csv_reader_refuses_them(zoo):
    # They crashed profiling with noise (numpy seeds must be non-negative).
    with pytest.raises(WorkloadError, match=r"^workload: job_id=-5 must be a non-negative integer$"):
        Workload.build(zoo, job_id=[-5], model=[0], gpus=[1], arrival_s=[0], total_iters=[3])
