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
    with pytest.raises(WorkloadError, match="job 0 asks for 129 GPUs but the cluster has 128"):
        w.check_fits(ClusterSpec())


def test_concat_keeps_order_and_rejects_earlier_jobs(make_workload, zoo):
    a = make_workload(["gnmt", "lstm"], [0, 10], [1, 1])
    b = Workload.build(zoo, job_id=[2], model=[0], gpus=[1], arrival_s=[20], total_iters=[3])
    joined = a.concat(b)
    assert joined.job_id.tolist() == [0, 1, 2] and joined.arrival_s.tolist() == [0, 10, 20]
    early = Workload.build(zoo, job_id=[5], model=[0], gpus=[1], arrival_s=[5], total_iters=[3])
    with pytest.raises(WorkloadError, match="must arrive after"):
        a.concat(early)
    assert np.shares_memory(a.job_id, joined.job_id) is False
