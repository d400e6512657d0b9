"""Does the environment's default level set (five levels per job) lose anything against the full grid?

For ``docs/levels.md``: how many of the five default levels are distinct per (model, GPU count) on the
paper's and the scarce servers, and the mean JCT of the level-choosing environment heuristics
(``srtf+price``, ``fifo+price``, ``tetris``) with ``levels="default"`` and ``levels="grid"`` on tuning
workload seeds 0–19 of the two small ids.

    python -m synergy_gym.baselines.level_study [--seeds 0..19]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from synergy_gym import ModelZoo, evaluate
from synergy_gym.baselines.env_heuristics import PriceAllocator, TetrisPacker
from synergy_gym.cli.args import parse_seed_list, usage_error
from synergy_gym.env.levels import allocation_levels
from synergy_gym.errors import SynergyGymError
from synergy_gym.sim.cluster import ClusterSpec

GPU_COUNTS = (1, 2, 4, 8)


def distinct_levels(cluster: ClusterSpec, zoo: ModelZoo) -> list[int]:
    """Per (model, GPU count): how many of the default levels are different points."""
    return [
        len({(lv.cpus_per_gpu, lv.mem_gb_per_gpu) for lv in allocation_levels(zoo, cluster, m, g)})
        for m in range(len(zoo)) for g in GPU_COUNTS
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m synergy_gym.baselines.level_study", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seeds", default="0..19", help="tuning workload seeds (default 0..19)")
    args = parser.parse_args(argv)
    try:
        seeds = parse_seed_list(args.seeds, "--seeds")
    except SynergyGymError as exc:
        return usage_error(parser, exc)
    zoo = ModelZoo.default()
    clusters = (
        ("24 CPUs per server", ClusterSpec(num_servers=4)),
        ("16 CPUs per server", ClusterSpec(num_servers=4, cpus_per_server=16.0)),
    )
    for name, cluster in clusters:
        d = distinct_levels(cluster, zoo)
        print(f"{name}: distinct default levels per (model, GPUs): mean {np.mean(d):.2f}, min {min(d)}, max {max(d)}")
    print(f"{'env':<25}{'heuristic':<12}{'default h':>11}{'grid h':>10}")
    for env_id in ("Synergy-small-scarce-v0", "Synergy-small-v0"):
        for policy in (PriceAllocator("srtf+price", True), PriceAllocator("fifo+price", False), TetrisPacker()):
            jct = [evaluate(policy, env_id, seeds=seeds, levels=kind).mean_jct_h.mean() for kind in ("default", "grid")]
            print(f"{env_id:<25}{policy.name:<12}{jct[0]:>11.3f}{jct[1]:>10.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
