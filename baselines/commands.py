"""The command lines of ``synergy-gym compare`` and ``synergy-gym sweep`` (the ``synergy_gym.commands`` entry points).

Building a parser imports only these light modules; the command's own module
(:mod:`synergy_gym.baselines.compare`, :mod:`synergy_gym.baselines.sweep`), with pandas,
matplotlib and the simulator, is imported when the command runs (:class:`~synergy_gym.cli.command.RunLater`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from synergy_gym.baselines.registry import DEFAULT_POLICIES
from synergy_gym.cli.args import NonEmptyPath, OnceList
from synergy_gym.cli.command import RunLater
from synergy_gym.cli.guards import ALLOW_FLAG
from synergy_gym.sim.config import TIMINGS
from synergy_gym.sim.ledger import PLACEMENTS
from synergy_gym.sim.workload import MAX_JOBS
from synergy_gym.traces.formats import FORMATS

COMPARE_DESCRIPTION = "``synergy-gym compare``: run scheduling policies on identical workloads and compare JCTs."
SWEEP_DESCRIPTION = "``synergy-gym sweep``: every (policy, load, seed) simulation, on Ray when it is there."


def register_compare(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare scheduling policies on identical workloads (the main experiment)",
        description=COMPARE_DESCRIPTION,
    )
    p.add_argument(
        "--policies",
        action=OnceList,
        default=",".join(DEFAULT_POLICIES),
        help="comma-separated <order>+<alloc> names; orders fifo, srtf, las, drf, tetris, ftf, ftf_ref; "
        "allocations fair, greedy, tune, opt, opt_lp (default: %(default)s)",
    )
    p.add_argument("--load", action=OnceList, default=None, help="jobs per hour, comma-separated (default: 9)")
    p.add_argument("--seed", action=OnceList, default=None, help="workload seed(s): 42, 1,2,3 or 0..9 (default: 42)")
    p.add_argument("--jobs", type=int, default=None,
                   help=f"run exactly N jobs (1 to {MAX_JOBS:,}); the window becomes the middle half and the run ends "
                   "when all finish (--trace-mode sampled: 1,000 by default)")
    p.add_argument("--window", default=None, help="measured window A:B (job indices by arrival, B exclusive)")
    p.add_argument("--multigpu", action="store_true", help="draw GPU counts from the Philly trace's mix")
    p.add_argument("--split", default=None,
                   help="vision/language/speech class split in percent, summing to 100 (default: 20/70/10)")
    p.add_argument("--workload", type=Path, default=None, help="replay a workload CSV (reference format)")
    p.add_argument("--trace", type=Path, default=None,
                   help="a real job trace: Philly CSV or JSON log, Alibaba PAI job table (or its folder), Helios cluster_log")
    p.add_argument("--trace-format", default="auto", choices=FORMATS, help="trace format (default: from the file)")
    p.add_argument("--trace-mode", default="real", choices=("real", "sampled"),
                   help="real: the trace's submit times; sampled: (GPUs, duration) from the trace, Poisson arrivals at --load")
    p.add_argument("--arrival-scale", type=float, default=1.0, help="multiply the trace's submit times (0.5 = twice the rate)")
    p.add_argument("--all-durations", action="store_true",
                   help="keep a Philly trace's jobs outside the paper's duration range (31.6 min to 6.9 days)")
    p.add_argument("--cluster", default="default", help="preset (default, small, large) or TOML file (default: %(default)s)")
    p.add_argument("--round-s", type=float, default=300.0, help="round length in seconds (default: %(default)s)")
    p.add_argument("--placement", default="first_fit", choices=PLACEMENTS, help="GPU placement (default: %(default)s)")
    p.add_argument("--timing", default="round", choices=TIMINGS,
                   help="round: the paper's whole-round credit; exact: completion at the exact time")
    p.add_argument("--sensitivity", action=OnceList, default="true",
                   help="true, profiled, or true,profiled for both side by side")
    p.add_argument("--profile-noise", type=float, default=0.0, help="relative noise of profiling measurements (e.g. 0.05)")
    p.add_argument("--out", action=NonEmptyPath, default=None, help="output folder (default: runs/compare-<timestamp>)")
    p.add_argument("--json", action=NonEmptyPath, default=None, help="also write the results as JSON to this file")
    p.add_argument("--plots", action="store_true",
                   help="also draw avg_jct.png and jct_cdf.png (matplotlib: about half a second more)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument(ALLOW_FLAG, action="store_true",
                   help="run even when the estimated memory or time is past the limits (see docs: reliability)")
    p.set_defaults(run=RunLater("synergy_gym.baselines.compare"))


def register_sweep(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sweep", help="run policies × loads × seeds (on Ray when installed)",
                              description=SWEEP_DESCRIPTION)
    p.add_argument("--policies", action=OnceList, required=True, help="comma-separated <order>+<alloc> names")
    p.add_argument("--load", action=OnceList, required=True, help="jobs per hour, comma-separated, e.g. 5,7,9,11")
    p.add_argument("--seed", action=OnceList, required=True, help="seeds: 42, 1,2,3 or 0..9")
    p.add_argument("--jobs", type=int, default=None,
                   help=f"exactly N jobs per cell, 1 to {MAX_JOBS:,} (default: the paper's open-ended run)")
    p.add_argument("--cluster", default="default", help="preset or TOML file (default: %(default)s)")
    p.add_argument("--out", action=NonEmptyPath, default=None,
                   help="output folder; re-use it to resume (default: runs/sweep-<timestamp>)")
    p.add_argument("--address", default=None, help="Ray cluster: auto or HOST:PORT (default: a local Ray)")
    p.add_argument("--no-ray", action="store_true", help="run the cells in this process")
    p.add_argument("--json", action=NonEmptyPath, default=None, help="also write the results (results.json) to this file")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument(ALLOW_FLAG, action="store_true",
                   help="run even when the estimated memory or time is past the limits (see docs: reliability)")
    p.set_defaults(run=RunLater("synergy_gym.baselines.sweep"))
