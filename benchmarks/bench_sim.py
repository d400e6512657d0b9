"""Simulator speed on the authors' replayed load-9 workload (19,407 jobs, 128 GPUs).

Prints, per policy, the best wall time over ``--repeat`` runs, the simulated
rounds per second (simulated time / round length, skipped rounds included), the
rounds actually planned per second, and the speed-up over the authors'
simulator (about 230 s for fifo+tune on this kind of machine). The first line names
the machine, the cores the run may use and the load average.

    python benchmarks/bench_sim.py [--workload CSV] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from arg_types import positive_int  # benchmarks/arg_types.py, beside this script
from machine import machine_line  # benchmarks/machine.py, beside this script

from synergy_gym import ClusterSpec, Simulator
from synergy_gym.baselines import make_policy
from synergy_gym.errors import SynergyGymError
from synergy_gym.traces.replay import read_workload_csv

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "synergy" / "reference_workloads" / "workload_single_gpu_load9.csv"
REFERENCE_S = 230.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--policies", default="fifo+fair,fifo+greedy,fifo+tune")
    args = parser.parse_args()
    names = args.policies.split(",")
    for name in names:
        if not name.strip():
            parser.error(f"argument --policies: an empty policy name in {args.policies!r}")
        try:
            make_policy(name)
        except SynergyGymError as e:
            parser.error(f"argument --policies: {e}")
    t0 = time.perf_counter()
    try:
        workload = read_workload_csv(args.workload)
    except SynergyGymError as e:
        parser.error(f"argument --workload: {e}")
    read_s = time.perf_counter() - t0
    print(machine_line())
    print(f"workload: {args.workload.name}, {len(workload)} jobs (read in {read_s:.2f} s)")
    print(
        f"{'policy':<12}{'wall s':>9}{'sim rounds':>12}{'rounds/s':>11}{'planned':>9}{'planned/s':>11}{'vs ref':>9}"
        f"{'mean JCT h':>12}"
    )
    for name in names:
        best = None
        for _ in range(args.repeat):
            sim = Simulator(ClusterSpec(), workload, make_policy(name))
            start = time.perf_counter()
            result = sim.run()
            wall = time.perf_counter() - start
            if best is None or wall < best[0]:
                best = (wall, sim, result)
        wall, sim, result = best
        rounds = sim.now / sim.config.round_s
        print(
            f"{name:<12}{wall:>9.3f}{rounds:>12.0f}{rounds / wall:>11.0f}{sim.rounds_planned:>9}"
            f"{sim.rounds_planned / wall:>11.0f}{REFERENCE_S / wall:>8.0f}×{result.summary.mean_jct_h:>12.2f}"
        )


if __name__ == "__main__":
    main()
