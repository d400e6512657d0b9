"""The class split: only its proportions count, and it takes numpy's numbers but not bools."""

import numpy as np
import pytest

from synergy_gym import SyntheticWorkload, WorkloadError
from synergy_gym.sim.model_mix import ModelAssigner


def test_proportional_splits_build_identical_workloads():
    # (0.2, 0.7, 0.1) sums to 0.9999999999999999 in floating point: its shares used to differ from (20, 70, 10)'s
    # in the last bit, and about a third of the jobs got another model.
    splits = [(20, 70, 10), (0.2, 0.7, 0.1), (2, 7, 1), (20.0, 70.0, 10.0), np.array([20, 70, 10]), np.array([0.2, 0.7, 0.1])]
    built = [SyntheticWorkload(num_jobs=2000, class_split=split).build() for split in splits]
    for w in built[1:]:
        assert np.array_equal(w.model, built[0].model)
    # Whole-number splits (the paper's, the scarce scenario's) keep their shares bit for bit: w / sum.
    for split in [(20, 70, 10), (60.0, 20.0, 20.0), (1, 2, 1)]:
        total = float(sum(split))
        assert ModelAssigner(built[0].zoo, split)._share == [w / total for w in split]


def test_numpy_weights_are_plain_numbers_and_bools_are_refused():
    spec = SyntheticWorkload(num_jobs=10, class_split=np.array([20, 70, 10]))  # int64 weights: used to be refused
    assert spec.class_split == (20, 70, 10) and all(type(w) is int for w in spec.class_split)
    assert SyntheticWorkload(num_jobs=10, class_split=[np.float32(0.5), 1, 1]).class_split == (0.5, 1, 1)
    for split in [(True, 70, 10), (np.bool_(True), 1, 1), "20,70,10", 5]:
        with pytest.raises(WorkloadError, match=r"^class split .* must be three non-negative weights"):
            SyntheticWorkload(num_jobs=10, class_split=split)
