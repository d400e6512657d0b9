"""The synthetic generator draws the paper's random stream, so seed 42 is the authors' workload."""

import re

import numpy as np
import pandas as pd
import pytest

from synergy_gym.cli import main
from synergy_gym.sim.generator import SyntheticWorkload

# Published by the authors (ae-readme) and reproduced by replaying their load-9 workload.
PUBLISHED = {"fifo+fair": 81.09, "fifo+greedy": 24.98, "fifo+tune": 21.88}
PUBLISHED_TUNE_P99_H = 156.9


def _jobs(spec: SyntheticWorkload, n: int):
    first, more = spec.stream()
    w = first
    while len(w) < n:
        w = w.concat(next(more))
    return w


@pytest.mark.parametrize("load", [5, 7, 9])
def test_seed_42_is_the_reference_workload_job_for_job(shared_dir, load):
    frame = pd.read_csv(shared_dir / "synergy" / "reference_workloads" / f"workload_single_gpu_load{load}.csv")
    n = len(frame)
    w = _jobs(SyntheticWorkload(jobs_per_hour=load, seed=42), n)
    assert w.job_id[:n].tolist() == frame["job_id"].tolist()
    assert w.arrival_s[:n].tolist() == frame["arrival_s"].astype(float).tolist()
    assert w.total_iters[:n].tolist() == frame["total_iters"].tolist()
    assert w.model_names[:n].tolist() == frame["model"].tolist()
    assert w.gpus[:n].tolist() == frame["gpus"].tolist()
    assert w.measured[:n].tolist() == frame["in_measured_window"].astype(bool).tolist()
    assert np.allclose(w.fair_duration_s[:n], frame["fair_duration_s"], rtol=0, atol=0.01)


def test_first_jobs_of_seed_42_without_shared():
    # Job 0 of the authors' load-9 workload: arrival ceil(3600·Exp/9) = 409 s and a 2,068.6 s
    # alexnet job (3,447 iterations); job 1 a gnmt job of 34,181 iterations at 951 s.
    w = SyntheticWorkload(jobs_per_hour=9, seed=42, num_jobs=3).build()
    assert w.arrival_s.tolist() == [409.0, 951.0, 1053.0]
    assert w.model_names.tolist() == ["alexnet", "gnmt", "transformer"]
    assert w.total_iters.tolist() == [3447, 34181, 29317]


def test_other_seeds_and_loads_give_other_jobs():
    a = SyntheticWorkload(jobs_per_hour=9, seed=42, num_jobs=50).build()
    b = SyntheticWorkload(jobs_per_hour=9, seed=43, num_jobs=50).build()
    c = SyntheticWorkload(jobs_per_hour=5, seed=42, num_jobs=50).build()
    assert not np.array_equal(a.total_iters, b.total_iters)
    assert np.array_equal(a.total_iters, c.total_iters)  # durations come from their own stream
    assert np.all(c.arrival_s > a.arrival_s)  # the same draws, spread over a lower rate


def test_multigpu_keeps_the_arrivals_and_models_of_the_single_gpu_workload():
    single = SyntheticWorkload(seed=42, num_jobs=500).build()
    multi = SyntheticWorkload(seed=42, num_jobs=500, multigpu=True).build()
    assert np.array_equal(single.arrival_s, multi.arrival_s)
    assert np.array_equal(single.model, multi.model)
    assert (multi.gpus > 1).any()
    # The GPU draw follows each job's duration in the size stream: job 0's duration is unchanged.
    assert single.total_iters[0] == multi.total_iters[0]


def _drawn_with_random_api(spec: SyntheticWorkload, n: int):
    """The docstring's draws written with :mod:`random`'s own ``randint`` and ``uniform``: (arrivals, durations, GPUs)."""
    import bisect
    import math
    import random

    from synergy_gym.sim.philly_gpu_mix import gpu_mix
    from synergy_gym.sim.profiles import ModelZoo

    size, arrival = random.Random(spec.seed), random.Random(spec.seed)
    counts, probs = gpu_mix(spec.max_gpus)
    cdf = np.cumsum(probs).tolist()
    num_models = len(ModelZoo.default())
    clock, arrivals, durations, gpus = 0, [], [], []
    for _ in range(n):
        clock += math.ceil(-math.log(1.0 - arrival.random()) / spec.jobs_per_hour * 60 * 60)
        arrival.randint(0, num_models - 1)
        arrivals.append(float(clock))
        long_job = size.random() >= spec.short_job_fraction
        durations.append(60.0 * (10.0 ** (size.uniform(3.0, 4.0) if long_job else size.uniform(1.5, 3.0))))
        if spec.multigpu:
            gpus.append(int(counts[min(bisect.bisect_right(cdf, size.random()), len(counts) - 1)]))
        else:
            gpus.append(1)
    return arrivals, durations, gpus


@pytest.mark.parametrize("seed", [0, 42, 12345])
@pytest.mark.parametrize("multigpu", [False, True])
def test_inlined_draws_are_the_random_modules_randint_and_uniform(seed, multigpu):
    # The generator inlines randint (a rejection loop over getrandbits) and uniform for speed; on
    # this Python they must draw exactly what the random module's own functions draw.
    spec = SyntheticWorkload(jobs_per_hour=7, seed=seed, num_jobs=3000, multigpu=multigpu, max_gpus=16)
    w = spec.build()
    arrivals, durations, gpus = _drawn_with_random_api(spec, 3000)
    assert w.arrival_s.tolist() == arrivals
    assert w.gpus.tolist() == gpus
    assert w.total_iters.tolist() == [int(d / t) for d, t in zip(durations, w.iter_time_s.tolist())]


def test_generator_is_picklable_mid_stream():
    import pickle

    first, more = SyntheticWorkload(seed=7, window=(0, 10)).stream()
    next(more)
    clone = pickle.loads(pickle.dumps(more))
    a, b = next(more), next(clone)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.total_iters, b.total_iters)


@pytest.mark.slow
def test_compare_with_no_options_prints_the_published_figures(tmp_path, capsys):
    assert main(["compare", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^(fifo\+\w+)\s+9\s+42\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            rows[m.group(1)] = (float(m.group(2)), float(m.group(4)))
    assert {p: mean for p, (mean, _) in rows.items()} == PUBLISHED
    assert round(rows["fifo+tune"][1], 1) == PUBLISHED_TUNE_P99_H
