"""Synergy-OPT solve time per round, integer program and LP relaxation.

Random round states – single-GPU jobs drawn from the paper's model zoo and
class split, all admitted – for 32, 128 and 512 admitted jobs on clusters of
32, 128 and 512 GPUs (jobs ≤ GPUs). Prints the median and
worst first-stage solve time over ``--rounds`` states, the time of the whole
round (solve + placement), and the throughput OPT reaches before placement
relative to Tune's on the same state. The first line names the machine, the cores the run
may use and the load average.

    python benchmarks/bench_opt.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from arg_types import positive_int  # benchmarks/arg_types.py, beside this script
from machine import machine_line  # benchmarks/machine.py, beside this script

from synergy_gym import ClusterSpec, Tune
from synergy_gym.baselines.opt import SynergyOpt
from synergy_gym.sim.allocation import admit_by_gpus
from synergy_gym.sim.generator import SyntheticWorkload
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.ledger import ClusterLedger


def round_state(gpus: int, jobs: int, seed: int) -> tuple[JobTable, list[int]]:
    cluster = ClusterSpec(num_servers=gpus // 8)
    w = SyntheticWorkload(seed=seed, num_jobs=jobs).build()
    table = JobTable(cluster, w)
    admitted = admit_by_gpus(list(range(table.n)), table.gpus_l, cluster.total_gpus)[:jobs]
    return table, admitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=positive_int, default=20)
    args = parser.parse_args()
    print(machine_line())
    print(f"{'GPUs':>5}{'jobs':>6}{'MILP ms (med/max)':>20}{'LP ms (med/max)':>18}{'round ms':>10}{'OPT/Tune tput':>15}")
    for gpus in (32, 128, 512):
        for n in (32, 128, 512):
            if n > gpus:
                continue
            solve = {False: [], True: []}
            whole, ratio = [], []
            for seed in range(args.rounds):
                jobs, admitted = round_state(gpus, n, seed)
                for relax in (False, True):
                    solve[relax].append(SynergyOpt(relax=relax).solve(jobs, admitted).solve_s * 1e3)
                ledger = ClusterLedger(jobs.cluster)
                started = time.perf_counter()
                SynergyOpt().allocate(ledger, jobs, admitted)
                whole.append((time.perf_counter() - started) * 1e3)
                tune = ClusterLedger(jobs.cluster)
                Tune().allocate(tune, jobs, admitted)
                ratio.append(SynergyOpt().solve(jobs, admitted).objective / sum(tune.tput))
            fmt = lambda x: f"{np.median(x):.1f}/{np.max(x):.1f}"  # noqa: E731
            print(f"{gpus:>5}{len(admitted):>6}{fmt(solve[False]):>20}{fmt(solve[True]):>18}{np.median(whole):>10.1f}"
                  f"{np.mean(ratio):>15.3f}")


if __name__ == "__main__":
    main()
