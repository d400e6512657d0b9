"""``env_heuristics``' seed and price: a bad one is a one-line ConfigError naming it; NumPy's numbers count as Python's."""

from __future__ import annotations

import numpy as np
import pytest

from synergy_gym.baselines.env_heuristics import PriceAllocator, RandomValid, env_heuristics
from synergy_gym.errors import ConfigError


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"seed": -1}, "seed must be a non-negative integer, got -1"),
    ({"seed": 1.5}, "seed must be a non-negative integer, got 1.5"),
    ({"seed": "a"}, "seed must be a non-negative integer, got 'a'"),
    ({"seed": True}, "seed must be a non-negative integer, got True"),
    ({"price": "0.5"}, "price must be a non-negative number, got '0.5'"),
    ({"price": float("nan")}, "price must be a non-negative number, got nan"),
    ({"price": float("inf")}, "price must be a non-negative number, got inf"),
    ({"price": -1}, "price must be a non-negative number, got -1"),
])
def test_a_bad_seed_or_price_is_one_line(kwargs, message):
    with pytest.raises(ConfigError) as e:
        env_heuristics(**kwargs)
    assert str(e.value) == message


def test_the_classes_check_them_too():
    with pytest.raises(ConfigError, match="price must be a non-negative number, got nan"):
        PriceAllocator("fifo+price", False, price=float("nan"))
    with pytest.raises(ConfigError, match="seed must be a non-negative integer, got -1"):
        RandomValid(-1)


def test_numpy_numbers_and_none_are_taken():
    heuristics = env_heuristics(seed=np.int64(3), price=np.float32(1.5))
    assert heuristics["fifo+price"].price == 1.5 and type(heuristics["fifo+price"].price) is float
    assert env_heuristics(seed=None, price=0)["srtf+price"].price == 0.0
    a, b = RandomValid(np.int64(7)), RandomValid(7)
    assert a.rng.integers(1 << 30) == b.rng.integers(1 << 30)
