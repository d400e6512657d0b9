"""Start-up imports only what it uses (not timed: which modules a fresh process has loaded).

``import synergy_gym`` (which registers the environments) and building the ``synergy-gym``
parser (every command line and ``--help`` does) load none of pandas, matplotlib, scipy, numba,
PyTorch, Stable-Baselines3 or Ray; a command's own module is imported when it runs
(:class:`~synergy_gym.cli.command.RunLater`), and the compiled kernels, with numba, when one is
first called (without ``scipy.linalg``, which numba's BLAS check would import). ``compare`` on a
workload file reads, writes and draws without pandas, SciPy's linalg or stats, or pyplot. Each check runs in a fresh
interpreter outside the repository.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from synergy_gym.cli import build_parser
from synergy_gym.cli.command import RunLater
from tests.test_import_direction import python_outside

#: Libraries that cost a tenth of a second or more to import.
HEAVY = ("pandas", "matplotlib", "scipy", "numba", "torch", "stable_baselines3", "sb3_contrib", "ray")
#: The modules of the commands themselves.
COMMAND_MODULES = ("synergy_gym.baselines.compare", "synergy_gym.baselines.sweep", "synergy_gym.agents.train",
                   "synergy_gym.agents.evaluate", "synergy_gym.agents.benchmark", "synergy_gym.traces.trace_stats")


def loaded(folder: Path, setup: str, names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` in ``sys.modules`` after ``setup`` ran in a fresh interpreter in ``folder``."""
    code = f"import json, sys\n{setup}\nprint(json.dumps(sorted(m for m in {names!r} if m in sys.modules)))\n"
    return json.loads(python_outside(folder, code)[-1])


def test_import_synergy_gym_loads_no_heavy_library(tmp_path):
    assert loaded(tmp_path, "import synergy_gym", HEAVY) == []


def test_building_the_parser_loads_no_heavy_library_and_no_command_module(tmp_path):
    setup = "from synergy_gym.cli import build_parser\nbuild_parser()"
    assert loaded(tmp_path, setup, HEAVY + COMMAND_MODULES) == []


def test_help_loads_no_heavy_library(tmp_path):
    setup = (
        "import contextlib, io\nfrom synergy_gym.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass"
    )
    assert loaded(tmp_path, setup, HEAVY + COMMAND_MODULES) == []


def test_every_command_runs_a_function_of_its_own_module():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert set(commands) == {"benchmark", "compare", "evaluate", "sweep", "trace-stats", "train"}
    targets = set()
    for name, sub in commands.items():
        run = sub.get_default("run")
        assert isinstance(run, RunLater), name
        assert callable(getattr(importlib.import_module(run.module), run.function)), name
        targets.add(run.module)
    assert targets == set(COMMAND_MODULES)


@pytest.mark.parametrize("run_a_kernel", [False, True])
def test_the_kernels_load_numba_when_first_called_and_are_numbas_dispatchers_then(tmp_path, run_a_kernel):
    code = (
        "import json, sys\nimport numpy as np\nfrom synergy_gym.sim import kernels\n"
        + ("kernels.pairwise_sum(np.arange(3.0))\n" if run_a_kernel else "")
        + "print(json.dumps(['numba' in sys.modules, sorted({type(kernels.run_rounds).__name__, "
        "type(kernels.pairwise_sum).__name__})]))\n"
    )
    numba_loaded, kinds = json.loads(python_outside(tmp_path, code)[-1])
    if run_a_kernel:
        assert numba_loaded and kinds == ["CPUDispatcher"]  # every kernel, not only the one called
    else:
        assert not numba_loaded and kinds == ["LazyKernel"]


def test_the_kernels_pass_numbas_blas_check_without_importing_scipy_linalg(tmp_path):
    code = (
        "import json, sys\nimport numpy as np\nfrom synergy_gym.sim import kernels\n"
        "kernels.pairwise_sum(np.arange(3.0))\nimport numba.np.arraymath\n"
        "state = [numba.np.arraymath._HAVE_BLAS, 'scipy.linalg' in sys.modules, 'scipy.linalg.cython_blas' in sys.modules]\n"
        "import scipy.linalg.cython_blas as blas\n"  # the placeholder is gone: the real module comes
        "print(json.dumps(state + [hasattr(blas, '__pyx_capi__')]))\n"
    )
    have_blas, linalg_loaded, placeholder_left, real_module = json.loads(python_outside(tmp_path, code)[-1])
    assert have_blas and not linalg_loaded and not placeholder_left and real_module


@pytest.mark.parametrize("plots", [False, True])
def test_compare_on_a_workload_file_loads_neither_pandas_nor_scipy(tmp_path, plots):
    from synergy_gym.sim.cluster import load_cluster
    from synergy_gym.sim.generator import SyntheticWorkload
    from synergy_gym.traces.replay import write_workload_csv

    cluster = load_cluster("small")
    workload, _ = SyntheticWorkload(jobs_per_hour=2.0, seed=1, num_jobs=40, max_gpus=cluster.total_gpus).stream()
    path = write_workload_csv(workload, tmp_path / "w.csv", cluster)
    out = tmp_path / "out"
    setup = (
        "import contextlib, io\nfrom synergy_gym.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['compare', '--policies', 'fifo+tune', '--cluster', 'small', '--workload', {str(path)!r}, "
        f"'--quiet', '--out', {str(out)!r}{', ' + repr('--plots') if plots else ''}]) == 0"
    )
    figures = ["avg_jct.png", "jct_cdf.png"] if plots else []  # matplotlib only for the figures
    assert loaded(tmp_path, setup, ("pandas", "scipy.linalg", "scipy.stats", "matplotlib", "matplotlib.pyplot", "numba")) == [
        *(["matplotlib"] if plots else []), "numba"]
    assert sorted(p.name for p in out.iterdir()) == [*figures, "jobs.csv", "results.csv"]
