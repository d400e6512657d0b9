"""Start-up: what a ``synergy-gym`` command costs before (and around) its own work, one core.

Prints the best of ``--repeat`` wall times, each a fresh process, of

* ``python -c pass`` (the interpreter alone),
* ``python -c "import synergy_gym"`` (the package, which registers the environments),
* ``synergy-gym --help`` (the parser of every installed command),
* ``synergy-gym compare --policies fifo+tune --workload <load-9 file> --quiet --out <tmp>``
  (the whole process: reading the workload, the simulation, the tables),
* the same with ``--plots`` (and the two figures),

and, in one fresh process that is then timed in-process, the simulation of the same run
(``Simulator(...).run()`` on the replayed workload, best of ``--repeat`` after a first, untimed
run that loads the compiled kernels). It prints the simulation's share of the whole process, and
the seconds of the whole process that are not the simulation (start-up, reading and writing).
With ``--before DIR`` every measurement is also taken with ``PYTHONPATH=DIR`` (a source tree of
the code before a change, whose ``synergy_gym`` folder holds ``agents``, ``baselines`` and
``traces`` and beside which a ``synergy_gym-*.dist-info`` names its commands; a DIR without such
a ``synergy_gym`` package is refused),
alternating with the current code, and the ratio before/now is printed (a tree from before
``--plots`` drew the figures by default: its ``compare --plots`` row runs it without the flag). The machine and the
cores the runs may use are named in the header (pin them to one core with ``taskset``; the child
processes inherit it). Nothing is asserted: on a shared machine run it when the machine is idle.

    taskset -c 1 python benchmarks/bench_startup.py [--repeat 5] [--workload CSV] [--before DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from arg_types import positive_int  # benchmarks/arg_types.py, beside this script
from machine import machine_line  # benchmarks/machine.py, beside this script

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "synergy" / "reference_workloads" / "workload_single_gpu_load9.csv"

#: In-process timing of the simulation, run in a fresh interpreter (so that ``--before`` applies to it).
SIMULATION = """
import sys, time
from synergy_gym import ClusterSpec, Simulator
from synergy_gym.baselines import make_policy
from synergy_gym.traces.replay import read_workload_csv
workload = read_workload_csv(sys.argv[1])
walls = []
for _ in range(int(sys.argv[2]) + 1):
    sim = Simulator(ClusterSpec(), workload, make_policy("fifo+tune"))
    start = time.perf_counter()
    sim.run()
    walls.append(time.perf_counter() - start)
print(min(walls[1:]))
"""


def command() -> list[str]:
    """The ``synergy-gym`` script beside this Python, else ``python -m synergy_gym``."""
    script = Path(sys.executable).parent / "synergy-gym"
    return [str(script)] if script.exists() else [sys.executable, "-m", "synergy_gym"]


def environment(pythonpath: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def wall(argv: list[str], pythonpath: Path | None, folder: Path) -> float:
    """Seconds ``argv`` takes as a fresh process run in ``folder`` (outside the repository)."""
    start = time.perf_counter()
    subprocess.run(argv, cwd=folder, env=environment(pythonpath), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def plots_flag(tree: Path) -> bool:
    """Whether the ``compare`` of the source tree ``tree`` has ``--plots`` (before it, the figures were always drawn)."""
    return any("--plots" in path.read_text() for path in (tree / "synergy_gym" / "baselines").glob("*.py"))


def before_problem(tree: Path) -> str | None:
    """Why ``tree`` is not a source tree to time with ``PYTHONPATH`` (see the docstring), else None."""
    if not tree.is_dir():
        return "not a folder"
    package = tree / "synergy_gym"
    if not (package / "__init__.py").is_file():
        return "holds no synergy_gym package (synergy_gym/__init__.py)"
    missing = [sub for sub in ("agents", "baselines", "traces") if not (package / sub).is_dir()]
    if missing:
        return f"its synergy_gym folder lacks {', '.join(missing)}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=positive_int, default=5, help="runs of each measurement; the best is shown")
    parser.add_argument("--before", type=Path, default=None, help="also time the code in this source tree")
    args = parser.parse_args()
    if args.before is not None:
        problem = before_problem(args.before)
        if problem:
            parser.error(f"argument --before: {str(args.before)!r}: {problem}")
    from synergy_gym.errors import SynergyGymError
    from synergy_gym.traces.replay import read_workload_csv

    try:
        read_workload_csv(args.workload)  # a bad file ends here, not in a child process
    except SynergyGymError as e:
        parser.error(f"argument --workload: {e}")
    workload = args.workload.resolve()
    trees: dict[str, Path | None] = {"now": None} if args.before is None else {"before": args.before.resolve(), "now": None}
    print(f"{machine_line()}; best of {args.repeat}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        out = folder / "out"
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "import synergy_gym": [sys.executable, "-c", "import synergy_gym"],
            "synergy-gym --help": [*command(), "--help"],
            "compare, whole process": [*command(), "compare", "--policies", "fifo+tune", "--workload", str(workload),
                                       "--quiet", "--out", str(out)],
        }
        cases["compare --plots, whole process"] = [*cases["compare, whole process"], "--plots"]
        best: dict[tuple[str, str], float] = {}
        for _ in range(args.repeat):
            for name, argv in cases.items():
                for tree, path in trees.items():  # alternating, so that both see the same load
                    shutil.rmtree(out, ignore_errors=True)
                    plots_by_default = path is not None and not plots_flag(path)
                    seconds = wall([a for a in argv if a != "--plots"] if plots_by_default else argv, path, folder)
                    best[name, tree] = min(best.get((name, tree), seconds), seconds)
        for tree, path in trees.items():
            done = subprocess.run([sys.executable, "-c", SIMULATION, str(workload), str(args.repeat)], cwd=folder,
                                  env=environment(path), check=True, capture_output=True, text=True)
            best["simulation, in-process", tree] = float(done.stdout.split()[-1])
    names = [*cases, "simulation, in-process"]
    head = "".join(f"{tree + ' s':>11}" for tree in trees) + (f"{'before/now':>12}" if args.before else "")
    print(f"{'':<32}{head}")
    for name in names:
        row = "".join(f"{best[name, tree]:>11.3f}" for tree in trees)
        if args.before is not None:
            row += f"{best[name, 'before'] / best[name, 'now']:>11.2f}×"
        print(f"{name:<32}{row}")
    for tree in trees:
        whole, sim = best["compare, whole process", tree], best["simulation, in-process", tree]
        print(f"{tree}: the simulation is {sim / whole:.0%} of the whole compare process; "
              f"{whole - sim:.2f} s is start-up, reading and writing; the interpreter alone "
              f"{best['python -c pass', tree]:.3f} s")


if __name__ == "__main__":
    main()
