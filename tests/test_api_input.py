"""Bad input to the experiment helpers, ``make_policy`` and ``allocation_levels`` is refused in one line.

Each case used to give wrong numbers (a 2-D table pooled into one mean, a negative half-width,
levels for 0 or 2.5 GPUs), an empty result for nothing to run, or a raw Python error mid-run.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from synergy_gym import (
    ClusterSpec,
    ConfigError,
    ModelZoo,
    SyntheticWorkload,
    UnknownNameError,
    WorkloadCase,
    cluster_preset,
    run_cases,
)
from synergy_gym.baselines import make_policy, policy_names
from synergy_gym.env.levels import allocation_levels
from synergy_gym.experiments.statistics import ci95_half_width, mean_ci95

NAN = float("nan")


# -- 4. confidence intervals -------------------------------------------------------------------


@pytest.mark.parametrize("values, message", [
    ([[1, 2], [3, 4]], "mean_ci95() values must be a 1-D sequence of numbers, got an array of shape (2, 2)"),  # was n=4
    (3, "mean_ci95() values must be a 1-D sequence of numbers, got a single number"),
    (None, "mean_ci95() values must be real numbers, got None"),  # was (nan, nan)
    (["1", "2"], "mean_ci95() values must be real numbers, got ['1', '2']"),  # was (1.5, 6.35)
    ([True, False, True], "mean_ci95() values must be real numbers, got [True, False, True]"),
    ({1, 2, 3}, "mean_ci95() values must be real numbers, got {1, 2, 3}"),
    ([], "mean_ci95() values must hold at least one number, got none"),  # was NaN with two warnings
])
def test_mean_ci95_refuses_what_is_not_a_sequence_of_numbers(values, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        mean_ci95(values)


def test_mean_ci95_keeps_its_results():
    assert mean_ci95([1, 2, 3]) == mean_ci95(np.array([1.0, 2.0, 3.0])) == mean_ci95((np.int64(1), 2, 3.0))
    assert mean_ci95([1, 2, 3]) == pytest.approx((2.0, 2.4841377117503303), rel=1e-15)
    assert mean_ci95([5])[0] == 5.0 and np.isnan(mean_ci95([5])[1])  # one value: no interval
    assert all(np.isnan(mean_ci95([1, NAN, 3])))  # a NaN value passes through
    with np.errstate(all="raise"):
        mean, half = mean_ci95([1.0, float("inf")])  # no warning
    assert mean == float("inf") and np.isnan(half)


@pytest.mark.parametrize("std, n, message", [
    (-1.0, 3, "ci95_half_width() std must be ≥ 0 (a standard deviation), got -1.0"),  # was -2.48
    ("1", 3, "ci95_half_width() std must be real numbers, got '1'"),
    (1.0, 2.5, "ci95_half_width() n must be a whole number ≥ 0 (a count of values), got 2.5"),
    (1.0, -3, "ci95_half_width() n must be a whole number ≥ 0 (a count of values), got -3"),
    (1.0, np.array([3, 1.5]), "ci95_half_width() n must be a whole number ≥ 0 (a count of values), got 1.5"),
    (1.0, True, "ci95_half_width() n must be real numbers, got True"),
    ([1, 2], [3, 4, 5], "ci95_half_width(): std of shape (2,) and n of shape (3,) do not match"),
])
def test_ci95_half_width_refuses_impossible_inputs(std, n, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        ci95_half_width(std, n)


@pytest.mark.parametrize("function, args, message", [
    (mean_ci95, ([True, 2.0],), "mean_ci95() values must be real numbers, got [True, 2.0]"),  # was (1.5, 6.35)
    (mean_ci95, ((1, 2, np.True_),), f"mean_ci95() values must be real numbers, got {(1, 2, np.True_)!r}"),
    (ci95_half_width, ([1.0, 2.0], [2, True]), "ci95_half_width() n must be real numbers, got [2, True]"),  # was [8.98, nan]
    (ci95_half_width, ([[False], [2.0]], 3), "ci95_half_width() std must be real numbers, got [[False], [2.0]]"),
])
def test_a_bool_among_numbers_is_refused_though_numpy_reads_the_list_as_numbers(function, args, message):
    # np.asarray([True, 2.0]) is a float array: the bool was counted as 1 where the docstrings say bools are refused.
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        function(*args)


def test_ci95_half_width_keeps_nan_for_counts_below_two_and_unknown_stds():
    # The sweep and plot tables pass pandas' std (NaN for one seed) and count (0 for a group of NaNs).
    half = ci95_half_width(np.array([NAN, 1.0, 2.0, 1.0]), np.array([1, 0, 5, 3]))
    assert np.isnan(half[:2]).all() and half[3] == pytest.approx(2.4841377117503303, rel=1e-15)
    assert np.isnan(ci95_half_width(0.0, 1)) and ci95_half_width(1.0, 10**20) > 0


# -- 5. run_cases ------------------------------------------------------------------------------


SPEC = SyntheticWorkload(num_jobs=6, seed=1)
CLUSTER = cluster_preset("small")
POLICIES = {"f": make_policy("fifo+fair")}


def test_run_cases_refuses_empty_inputs_and_hooks_that_are_not_functions():
    case = WorkloadCase("a", SPEC.stream)
    for args, kwargs, message in [
        (([], POLICIES, CLUSTER), {}, "cases is empty; give at least one WorkloadCase"),  # was []
        (([case], {}, CLUSTER), {}, "policies is empty; give at least one name: SchedulingPolicy"),  # was []
        (([case], POLICIES, CLUSTER), {"progress": 5}, "progress must be None or a function, got 5"),
        (([case], POLICIES, CLUSTER), {"on_done": 5}, "on_done must be None or a function, got 5"),
    ]:
        with pytest.raises(ConfigError, match=f"^run_cases\\(\\): {re.escape(message)}$"):
            run_cases(*args, **kwargs)


@pytest.mark.parametrize("make, got", [
    (SPEC.build(), "a Workload"),
    (SPEC, "a SyntheticWorkload; give its stream method (spec.stream), not the spec"),
])
def test_run_cases_refuses_a_make_that_is_not_callable_before_any_run(make, got):
    ran = []
    cases = [WorkloadCase("good", SPEC.stream), WorkloadCase("bad", make)]
    with pytest.raises(ConfigError, match=f"^run_cases\\(\\): case 'bad': make must be a function returning "
                                          f"\\(workload, more_jobs\\), got {re.escape(got)}$"):
        run_cases(cases, POLICIES, CLUSTER, on_done=ran.append)
    assert ran == []  # was: TypeError after the good case ran


@pytest.mark.parametrize("make, got", [
    (SPEC.build, "a Workload; return (workload, None) for a fixed workload (SyntheticWorkload.stream, not .build, "
                 "returns both)"),
    (lambda: (SPEC.build(),), "a tuple of (Workload)"),
    (lambda: (SPEC.build(), 5), "a tuple of (Workload, int)"),
    (lambda: None, "None"),
])
def test_run_cases_names_the_case_whose_make_returns_the_wrong_thing(make, got):
    # was: TypeError: cannot unpack non-iterable Workload object
    with pytest.raises(ConfigError, match=f"^run_cases\\(\\): case 'c': make\\(\\) must return "
                                          f"\\(workload, more_jobs or None\\), got {re.escape(got)}$"):
        run_cases([WorkloadCase("c", make)], POLICIES, CLUSTER)


def test_run_cases_still_takes_a_list_pair_and_a_stream():
    w = SPEC.build()
    out = run_cases([WorkloadCase("l", lambda: [w, None]), WorkloadCase("s", SPEC.stream)], POLICIES, CLUSTER)
    assert [r.case.label for r in out] == ["l", "s"]
    assert out[0].result.summary.mean_jct_h == out[1].result.summary.mean_jct_h


# -- 6. make_policy ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [None, 5, b"fifo+fair", ["fifo+fair"]])
def test_make_policy_refuses_a_name_that_is_not_text_listing_the_valid_ones(name):
    # was: AttributeError ('NoneType' object has no attribute 'strip') or TypeError
    with pytest.raises(UnknownNameError, match=f"^unknown policy {re.escape(repr(name))}; valid: fifo\\+fair, ") as e:
        make_policy(name)
    assert e.value.valid == policy_names()
    assert make_policy(np.str_("fifo+tune")).name == "fifo+tune"


# -- 9. allocation_levels ----------------------------------------------------------------------


ZOO = ModelZoo.default()


@pytest.mark.parametrize("model, gpus, message", [
    (0, 0, "gpus must be a positive integer, got 0"),  # were levels, a division by zero warned
    (0, -4, "gpus must be a positive integer, got -4"),
    (0, 2.5, "gpus must be a positive integer, got 2.5"),
    (0, NAN, "gpus must be a positive integer, got nan"),
    (0, True, "gpus must be a positive integer, got True"),
    (10, 1, "model must be a model index 0..9 of the zoo, got 10"),  # was IndexError
    (-1, 1, "model must be a model index 0..9 of the zoo, got -1"),  # was the last model's levels
    (1.5, 1, "model must be a model index 0..9 of the zoo, got 1.5"),
    ("alexnet", 1, "model must be a model index 0..9 of the zoo, got 'alexnet'"),
])
def test_allocation_levels_refuses_a_bad_model_or_gpu_count(model, gpus, message):
    with pytest.raises(ConfigError, match=f"^allocation_levels\\(\\): {re.escape(message)}$"):
        allocation_levels(ZOO, ClusterSpec(), model, gpus)


def test_allocation_levels_refuses_a_zoo_or_cluster_by_name_and_takes_numpy_integers():
    with pytest.raises(ConfigError, match=r"^allocation_levels\(\): zoo must be a ModelZoo .*got 'default'$"):
        allocation_levels("default", ClusterSpec(), 0, 1)
    with pytest.raises(ConfigError, match=r"^allocation_levels\(\): cluster must be a ClusterSpec .*got 'small'$"):
        allocation_levels(ZOO, "small", 0, 1)
    assert allocation_levels(ZOO, ClusterSpec(), np.int64(3), np.int64(2)) == allocation_levels(ZOO, ClusterSpec(), 3, 2)
    assert allocation_levels(ZOO, ClusterSpec(), 3, 2.0) == allocation_levels(ZOO, ClusterSpec(), 3, 2)


# -- errors cross process boundaries ------------------------------------------------------------


def test_every_error_survives_pickling_with_its_message_and_fields():
    import pickle

    from synergy_gym.errors import PathError, WorkloadError

    errors = [UnknownNameError("policy", "nope", ("fifo", "srtf")), ConfigError("gpus must be positive, got 0"),
              WorkloadError("num_jobs 0"), PathError("--out x")]
    for error in errors:  # a worker process (ProcessPoolExecutor, ray) returns its error pickled
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error) and back.args == error.args
    back = pickle.loads(pickle.dumps(errors[0]))
    assert (back.kind, back.name, back.valid) == ("policy", "nope", ("fifo", "srtf"))
