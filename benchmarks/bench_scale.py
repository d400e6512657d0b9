"""Simulator scale: wall time, ms per round and peak memory as the jobs and the cluster grow.

Two axes, fifo+tune, synthetic single-GPU workloads of exactly N jobs
(``SyntheticWorkload(jobs_per_hour, num_jobs=N)``, seed 42; a run ends when all N jobs have
finished, so the drain after the last arrival is included):

* ``jobs``: 1k, 10k, 100k and 1M jobs at 6 and 9 jobs/h on 128 GPUs (16 servers of 8 GPUs);
  6 jobs/h keeps the cluster below capacity, at 9 jobs/h it is overloaded and the queue grows
  with the run;
* ``cluster``: 128, 512, 2,048 and 8,192 GPUs (16 to 1,024 servers of 8 GPUs) at the same load
  per GPU (9 jobs/h per 128 GPUs: 9, 36, 144 and 576 jobs/h) with ``--jobs-per-gpu`` jobs (20 by
  default: 2,560 to 163,840 jobs, about 12 simulated days of arrivals, longer than the longest
  job's 7 days).

Every case runs in a fresh child process (this script with ``--child``): it draws the workload
(``gen s``), runs a 200-job simulation untimed (numba loads its compiled kernels then), then times
``Simulator(...).run()`` (``wall s``). ``rounds`` are the rounds planned (stretches of identical
rounds skipped by the simulator count once), ``ms/round`` is wall time per planned round, ``µs/job``
wall time per job, ``peak MiB`` the child's peak resident memory (``ru_maxrss``: the interpreter,
the workload and the simulation), ``JCT h`` the mean job completion time (the queue's growth shows
there). A case whose simulation passes ``--limit`` seconds is stopped and printed as ``> limit``,
with the rounds planned and jobs finished until then. The machine, the cores the run may use and
the load average are printed first; pin the run to one core with ``taskset`` (the children inherit
it). Nothing is asserted.

    taskset -c 0 python benchmarks/bench_scale.py [--cases jobs|cluster|all] [--limit 300] [--quick]
        [--jobs-per-gpu 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from arg_types import positive_float, positive_int  # benchmarks/arg_types.py, beside this script
from machine import load_average, machine_line  # benchmarks/machine.py, beside this script

POLICY = "fifo+tune"
GPUS_PER_SERVER = 8
#: Load per GPU on the cluster axis: 9 jobs/h per 128 GPUs.
LOAD_PER_GPU = 9.0 / 128
JOBS_AXIS = [(n, rate) for rate in (6.0, 9.0) for n in (1_000, 10_000, 100_000, 1_000_000)]
JOBS_AXIS_QUICK = [(n, rate) for rate in (6.0, 9.0) for n in (1_000, 10_000)]
CLUSTER_AXIS = [16, 64, 256, 1024]  # servers
CLUSTER_AXIS_QUICK = [16, 64]
#: Seconds a child may take beyond the simulation's limit (imports, drawing 1M jobs, the warm-up).
SETUP_ALLOWANCE_S = 120.0


class _OverLimit(Exception):
    pass


def child(spec: dict) -> dict:
    """Run one case in this (fresh) process and return its numbers."""
    import resource

    from synergy_gym import ClusterSpec, Simulator, SyntheticWorkload
    from synergy_gym.baselines import make_policy

    servers, n, rate, limit = spec["servers"], spec["jobs"], spec["jobs_per_hour"], spec["limit_s"]
    cluster = ClusterSpec(num_servers=servers, gpus_per_server=GPUS_PER_SERVER)
    warm = SyntheticWorkload(jobs_per_hour=rate, num_jobs=200, max_gpus=cluster.total_gpus).build()
    Simulator(cluster, warm, make_policy(POLICY)).run()  # loads the compiled kernels, untimed
    t0 = time.perf_counter()
    workload = SyntheticWorkload(jobs_per_hour=rate, num_jobs=n, max_gpus=cluster.total_gpus).build()
    gen_s = time.perf_counter() - t0
    sim = Simulator(cluster, workload, make_policy(POLICY))
    finished = [0]

    def progress(done: int, total: int) -> None:
        finished[0] = done
        if time.perf_counter() - start > limit:
            raise _OverLimit

    start = time.perf_counter()
    over = False
    mean_jct_h = None
    try:
        result = sim.run(progress=progress)
        mean_jct_h = float(result.summary.mean_jct_h)
        finished[0] = n
    except _OverLimit:
        over = True
    wall = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {
        **spec, "gpus": cluster.total_gpus, "gen_s": gen_s, "wall_s": wall, "over_limit": over,
        "rounds_planned": sim.rounds_planned, "rounds_simulated": sim.rounds_elapsed,
        "jobs_finished": finished[0], "mean_jct_h": mean_jct_h, "peak_mib": peak_mib,
    }


def run_case(spec: dict) -> dict:
    """``child(spec)`` in a fresh interpreter; killed if it outlives the limit by the set-up allowance."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=spec["limit_s"] + SETUP_ALLOWANCE_S)
    except subprocess.TimeoutExpired:
        return {**spec, "gpus": spec["servers"] * GPUS_PER_SERVER, "over_limit": True, "killed": True}
    if proc.returncode != 0:
        raise SystemExit(f"case {spec} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


HEADER = (
    f"{'axis':<8}{'jobs':>10}{'GPUs':>7}{'jobs/h':>8}{'gen s':>7}{'wall s':>9}{'rounds':>11}"
    f"{'ms/round':>10}{'µs/job':>8}{'peak MiB':>10}{'JCT h':>8}"
)


def row(r: dict) -> str:
    head = f"{r['axis']:<8}{r['jobs']:>10,}{r['gpus']:>7,}{r['jobs_per_hour']:>8g}"
    if r.get("killed"):
        return head + f"{'':>7}{'> ' + format(r['limit_s'], 'g'):>9}   (killed: no numbers)"
    wall = f"> {r['limit_s']:g}" if r["over_limit"] else f"{r['wall_s']:.2f}"
    ms_round = 1e3 * r["wall_s"] / max(r["rounds_planned"], 1)
    per_job = "–" if r["over_limit"] else f"{1e6 * r['wall_s'] / r['jobs']:.0f}"
    jct = "–" if r["mean_jct_h"] is None else f"{r['mean_jct_h']:.2f}"
    line = (
        head + f"{r['gen_s']:>7.2f}{wall:>9}{r['rounds_planned']:>11,}{ms_round:>10.3f}{per_job:>8}"
        f"{r['peak_mib']:>10.0f}{jct:>8}"
    )
    if r["over_limit"]:
        line += f"   stopped: {r['jobs_finished']:,} jobs finished"
    return line


def cases(which: str, quick: bool, jobs_per_gpu: int, limit: float) -> list[dict]:
    out = []
    if which in ("jobs", "all"):
        for n, rate in JOBS_AXIS_QUICK if quick else JOBS_AXIS:
            out.append({"axis": "jobs", "servers": 16, "jobs": n, "jobs_per_hour": rate, "limit_s": limit})
    if which in ("cluster", "all"):
        for servers in CLUSTER_AXIS_QUICK if quick else CLUSTER_AXIS:
            gpus = servers * GPUS_PER_SERVER
            out.append({
                "axis": "cluster", "servers": servers, "jobs": jobs_per_gpu * gpus,
                "jobs_per_hour": LOAD_PER_GPU * gpus, "limit_s": limit,
            })
    return out


def json_problem(path: Path) -> str | None:
    """Why the numbers could not be written to ``path`` at the end (checked before any case runs), else None."""
    if path.is_dir():
        return "is a folder"
    folder = path.parent
    if not folder.is_dir():
        return f"no folder {str(folder)!r}"
    if not os.access(path if path.exists() else folder, os.W_OK):
        return "not writable"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", choices=("jobs", "cluster", "all"), default="all")
    parser.add_argument("--limit", type=positive_float, default=300.0, help="seconds of simulation per case (default 300)")
    parser.add_argument("--quick", action="store_true", help="a small subset (1k and 10k jobs; 128 and 512 GPUs)")
    parser.add_argument("--jobs-per-gpu", type=positive_int, default=20, help="jobs per GPU on the cluster axis (default 20)")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.json is not None:
        problem = json_problem(args.json)
        if problem:
            parser.error(f"argument --json: {str(args.json)!r}: {problem}")
    started = time.perf_counter()
    print(machine_line())
    print(f"policy {POLICY}, {GPUS_PER_SERVER} GPUs a server, single-GPU jobs, seed 42; limit {args.limit:g} s a case")
    print(HEADER)
    results = []
    for spec in cases(args.cases, args.quick, args.jobs_per_gpu, args.limit):
        r = run_case(spec)
        results.append(r)
        print(row(r), flush=True)
    total = time.perf_counter() - started
    print(f"total {total:.0f} s; load average now {load_average()}")
    summarise([r for r in results if not r.get("killed")])
    if args.json:
        payload = {"machine": machine_line().removeprefix("machine: "), "policy": POLICY, "total_s": total, "cases": results}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")


def summarise(results: list[dict]) -> None:
    """Ratios between the smallest and the largest case of each series (µs/job only if both finished)."""
    series = [
        (f"jobs axis, {rate:g} jobs/h", [r for r in results if r["axis"] == "jobs" and r["jobs_per_hour"] == rate])
        for rate in sorted({r["jobs_per_hour"] for r in results if r["axis"] == "jobs"})
    ]
    series.append(("cluster axis", [r for r in results if r["axis"] == "cluster"]))
    for label, pts in series:
        if len(pts) < 2:
            continue
        lo, hi = pts[0], pts[-1]
        per_round = [1e3 * p["wall_s"] / max(p["rounds_planned"], 1) for p in (lo, hi)]
        line = (
            f"{label}: {lo['jobs']:,} jobs on {lo['gpus']:,} GPUs → {hi['jobs']:,} on {hi['gpus']:,}: "
            f"ms/round {per_round[0]:.3f} → {per_round[1]:.3f} ({per_round[1] / per_round[0]:.1f}×)"
        )
        if not (lo["over_limit"] or hi["over_limit"]):
            per_job = [1e6 * p["wall_s"] / p["jobs"] for p in (lo, hi)]
            line += f", µs/job {per_job[0]:.0f} → {per_job[1]:.0f} ({per_job[1] / per_job[0]:.2f}×)"
        print(line)

if __name__ == "__main__":
    main()
