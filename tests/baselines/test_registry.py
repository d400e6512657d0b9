import pytest

from synergy_gym import SynergyGymError, UnknownNameError
from synergy_gym.baselines import make_policy, parse_policy_list, policy_names


def test_every_order_and_mechanism_combination_is_named():
    names = policy_names()
    assert len(names) == 7 * 5 and "fifo+tune" in names and "las+greedy" in names and "srtf+fair" in names
    assert {"drf+greedy", "tetris+greedy", "ftf+tune", "ftf_ref+tune", "fifo+opt", "fifo+opt_lp"} <= set(names)
    for name in names:
        policy = make_policy(name)
        assert policy.name == name


def test_unknown_policy_lists_the_valid_ones():
    with pytest.raises(UnknownNameError) as e:
        make_policy("fifo+magic")
    msg = str(e.value)
    assert msg.startswith("unknown policy 'fifo+magic'; valid: fifo+fair, fifo+greedy, fifo+tune")
    assert "\n" not in msg
    with pytest.raises(UnknownNameError):
        make_policy("tune")


def test_policy_lists_are_normalised_and_deduplicated():
    assert parse_policy_list(" FIFO+Tune, fifo+fair,fifo+tune ") == ("fifo+tune", "fifo+fair")
    with pytest.raises(SynergyGymError, match=r"^--policies 'fifo\+tune,': an empty item"):
        parse_policy_list("fifo+tune,", "--policies")  # named, not dropped
    with pytest.raises(UnknownNameError):
        parse_policy_list("fifo+tune,fifo+nothing")
    with pytest.raises(SynergyGymError, match=r"^policy list must be text, comma-separated values, got \['fifo\+tune'\]$"):
        parse_policy_list(["fifo+tune"])  # was: AttributeError: 'list' object has no attribute 'strip'
