"""``compare``'s "vs fair" column by value: the same case's fair mean JCT over the row's (docs/cli.md).

"vs fair" is the mean JCT of the same ordering's ``fair`` run (else ``fifo+fair``) divided by the
policy's, within one case (load and seed) – never another case's fair run, never the ratio upside down.
"""

from __future__ import annotations

import csv

import pytest

from synergy_gym.cli import main

POLICIES = ("fifo+fair", "fifo+tune", "srtf+fair", "srtf+tune", "las+tune")  # las: no las+fair, so fifo+fair


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[dict[str, str]]:
    out = tmp_path_factory.mktemp("compare_values") / "out"
    args = ["compare", "--policies", ",".join(POLICIES), "--load", "20,30", "--seed", "1..2", "--jobs", "40",
            "--cluster", "small", "--quiet", "--out", str(out)]
    assert main(args) == 0
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def _fair_reference(rows: list[dict[str, str]], row: dict[str, str]) -> float:
    """The mean JCT of the same case's run of the row's ordering with ``fair``, else of ``fifo+fair``."""
    order = row["policy"].split("+")[0]
    case = [r for r in rows if (r["load"], r["seed"], r["sensitivity"]) == (row["load"], row["seed"], row["sensitivity"])]
    by_policy = {r["policy"]: float(r["mean_jct_h"]) for r in case}
    return by_policy.get(f"{order}+fair", by_policy["fifo+fair"])


def test_every_case_has_each_policy_once(rows):
    cases = {(r["load"], r["seed"]) for r in rows}
    assert len(cases) == 4
    assert sorted((r["load"], r["seed"], r["policy"]) for r in rows) == sorted(
        (load, seed, p) for load, seed in cases for p in POLICIES)


def test_vs_fair_is_the_same_case_s_fair_mean_jct_over_the_row_s(rows):
    for row in rows:
        expected = _fair_reference(rows, row) / float(row["mean_jct_h"])
        assert float(row["speedup_vs_fair"]) == pytest.approx(expected, rel=1e-12, abs=0), row


def test_the_workload_makes_the_rule_matter(rows):
    """The checks above could not tell the rules apart if these numbers were equal."""
    fair = {(r["load"], r["seed"]): float(r["mean_jct_h"]) for r in rows if r["policy"] == "fifo+fair"}
    srtf_fair = {(r["load"], r["seed"]): float(r["mean_jct_h"]) for r in rows if r["policy"] == "srtf+fair"}
    assert len(set(fair.values())) == len(fair)  # each case's fair run differs from the others'
    assert any(srtf_fair[k] != fair[k] for k in fair)  # srtf+tune against srtf+fair is not against fifo+fair
    # tune beats fair, so the ratio is above 1 (and an inverted one below).
    assert all(float(r["speedup_vs_fair"]) > 1.01 for r in rows if r["policy"].endswith("+tune"))


def test_rows_of_an_ordering_with_its_own_fair_run_and_without_one(rows):
    for row in rows:
        case = {r["policy"]: float(r["mean_jct_h"]) for r in rows if (r["load"], r["seed"]) == (row["load"], row["seed"])}
        mine = float(row["mean_jct_h"])
        if row["policy"] == "srtf+tune":  # its own ordering's fair run
            assert float(row["speedup_vs_fair"]) == pytest.approx(case["srtf+fair"] / mine, rel=1e-12)
        elif row["policy"] == "las+tune":  # no las+fair: the fifo+fair run of the case
            assert float(row["speedup_vs_fair"]) == pytest.approx(case["fifo+fair"] / mine, rel=1e-12)
        elif row["policy"].endswith("+fair"):
            assert float(row["speedup_vs_fair"]) == 1.0
