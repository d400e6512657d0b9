"""The cells of ``synergy-gym sweep``: one simulation each, run in this process or as Ray tasks.

Each finished cell is written at once, atomically, to ``<out>/cells/<key>.json``
(:func:`run_sweep`), so an interrupted or killed sweep resumes where it stopped
(:func:`finished_cells`). Each cell records the settings it was run with (:func:`cell_settings`:
``--jobs``, ``--cluster``); a folder whose cells were made with other settings is refused
(:func:`check_cell_settings`), and a cell file that is unreadable or not a cell of this sweep is
run again. On Ray a cell whose worker dies is retried (:data:`CELL_RETRIES`); only this process
writes the cells' files, once per cell.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import ModuleType
from typing import TypeGuard

import pandas as pd

from synergy_gym.baselines.compare_runs import load_text
from synergy_gym.baselines.registry import make_policy
from synergy_gym.cli.files import atomic_write_text
from synergy_gym.errors import SynergyGymError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.generator import SyntheticWorkload
from synergy_gym.sim.metrics import RunSummary
from synergy_gym.sim.simulator import Simulator

#: Times Ray runs a cell again when its worker process dies (killed, out of memory).
CELL_RETRIES = 3


class CellFailed(SynergyGymError):
    """A cell whose Ray worker died on every attempt."""


@dataclass(frozen=True)
class SweepCell:
    """One simulation of a sweep."""

    policy: str
    load: float
    seed: int
    num_jobs: int | None = None
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    config: SimulationConfig = field(default_factory=SimulationConfig)

    @property
    def key(self) -> str:
        """The cell's file name (no suffix); exact, so that two loads never share one (:func:`load_text`)."""
        return f"{self.policy}__load{load_text(self.load)}__seed{self.seed}"

    @property
    def settings(self) -> dict:
        return cell_settings(self.num_jobs, self.cluster)


def cell_settings(num_jobs: int | None, cluster: ClusterSpec) -> dict:
    """What the command line sets, besides policy, load and seed, that decides a cell's result (``--jobs``,
    ``--cluster``); recorded in its file (JSON-ready). The simulation settings are the command's own."""
    return {"jobs": num_jobs, "cluster": asdict(cluster)}


def run_cell(cell: SweepCell) -> dict:
    """Simulate one cell; returns its summary and the measured jobs' JCTs (a JSON-ready dict)."""
    spec = SyntheticWorkload(
        jobs_per_hour=cell.load, seed=cell.seed, num_jobs=cell.num_jobs, max_gpus=cell.cluster.total_gpus
    )
    workload, more = spec.stream()
    result = Simulator(cell.cluster, workload, make_policy(cell.policy), cell.config, more_jobs=more).run()
    summary = result.summary.as_dict()
    summary.pop("policy")
    return {
        "policy": cell.policy,
        "load": cell.load,
        "seed": cell.seed,
        **summary,
        "jct_h": result.measured_jct_h().tolist(),
    }


def _cell_path(out: Path, cell: SweepCell) -> Path:
    return out / "cells" / f"{cell.key}.json"


def _read_cell(path: Path) -> object:
    """The JSON in a cell file; None if it cannot be read or decoded."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None


#: The fields a cell file must have: its cell, settings and measured JCTs, and the run's summary (:class:`RunSummary`).
_CELL_FIELDS = frozenset({"policy", "load", "seed", "jct_h", "settings"} | {f.name for f in fields(RunSummary)})


def _is_result_of(row: object, cell: SweepCell) -> TypeGuard[dict]:
    """``row`` is a whole result of ``cell``, run with its settings (else the cell is run again)."""
    if not isinstance(row, dict) or not _CELL_FIELDS <= row.keys():
        return False
    number = isinstance(row["mean_jct_h"], (int, float)) and not isinstance(row["mean_jct_h"], bool)
    return (number and isinstance(row["jct_h"], list) and row["settings"] == cell.settings
            and (row["policy"], row["load"], row["seed"]) == (cell.policy, cell.load, cell.seed))


def finished_cells(out: Path, cells: Iterable[SweepCell]) -> dict[str, dict]:
    """Cells of ``cells`` whose result file is already in ``out``.

    A file that cannot be read or decoded, or that is not a whole result of its cell with the cell's
    settings (malformed, cut short, or written by an older synergy-gym without settings), counts as
    missing: the cell runs again and its file is replaced.
    """
    done = {}
    for cell in cells:
        path = _cell_path(out, cell)
        if path.is_file():
            row = _read_cell(path)
            if _is_result_of(row, cell):
                done[cell.key] = row
    return done


def check_cell_settings(out: Path, settings: dict) -> None:
    """Refuse, in one line, an ``out`` whose cells were made with other settings (:func:`cell_settings`)."""
    folder = out / "cells"
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.json")):
        row = _read_cell(path)
        other = row.get("settings") if isinstance(row, dict) else None
        if not isinstance(other, dict) or other.keys() != settings.keys() or not isinstance(other["cluster"], dict):
            continue  # a malformed cell is not reused (finished_cells): it runs again
        if other != settings:
            raise SynergyGymError(f"--out {out}: its cells were made with {_differs(other, settings)}; "
                                  "use another --out for other settings (the same settings resume it)")


def _differs(old: dict, new: dict) -> str:
    """The first setting of ``old`` that is not that of ``new``, as ``--jobs 40, not --jobs 200``."""
    if old["jobs"] != new["jobs"]:
        was, now = ("the open-ended run (no --jobs)" if n is None else f"--jobs {n}" for n in (old["jobs"], new["jobs"]))
        return f"{was}, not {now}"
    names = [k for k in new["cluster"] if old["cluster"].get(k) != new["cluster"][k]] or ["cluster"]
    try:
        was, now = ClusterSpec(**old["cluster"]).describe(), ClusterSpec(**new["cluster"]).describe()
    except (TypeError, ValueError, SynergyGymError):
        was = now = ""
    if was == now:
        was, now = (", ".join(f"{k} {c.get(k)}" for k in names) for c in (old["cluster"], new["cluster"]))
    return f"--cluster {was}, not {now}"


def interrupted_message(out: Path, cells: list[SweepCell], same_out: bool) -> str:
    """What an interrupted sweep kept, and how to resume it (``same_out``: ``--out`` was given)."""
    kept = len(finished_cells(out, cells))
    if not kept:
        return "no cell had finished; nothing written"
    again = "re-run the same command to resume" if same_out else f"re-run it with --out {out} to resume"
    return f"{kept} of {len(cells)} cells kept in {out / 'cells'}; {again}"


def connect_ray(address: str | None) -> ModuleType | None:
    """The ``ray`` module, initialised locally or at ``address``; errors are one line."""
    try:
        import ray
    except ImportError:
        return None
    if address and address != "auto" and not address.startswith("ray://"):
        _check_reachable(address)
    sigterm = signal.getsignal(signal.SIGTERM)  # ray.init installs its own, which would crash rather than interrupt
    try:
        with _quiet_stderr():  # Ray's C++ client logs every retry to stderr; the error below says it in one line
            if address:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level=logging.ERROR)
            else:
                ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as exc:  # ConnectionError, RuntimeError, ValueError depending on the failure
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = f"--address {address!r}: cannot connect to Ray" if address else "cannot start a local Ray"
        raise SynergyGymError(f"{where}: {first}") from None
    finally:
        if sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, sigterm)  # SIGTERM stops the sweep as Ctrl-C does (exit 130, cells kept)
    return ray


def _check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail fast, in one line, when nothing listens at HOST:PORT (Ray would retry for 20 s)."""
    import socket

    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except ValueError:
        raise SynergyGymError(f"--address {address!r}: expected auto or HOST:PORT") from None
    except OSError as exc:
        raise SynergyGymError(f"--address {address!r}: cannot connect to Ray: {exc.strerror or exc}") from None


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null (native libraries write there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def run_sweep(
    cells: list[SweepCell],
    out: Path,
    ray_module: ModuleType | None = None,
    on_cell: Callable[[dict, int, int], None] | None = None,
    cell_fn: Callable[[SweepCell], dict] | None = None,
) -> tuple[pd.DataFrame, list[dict]]:
    """Run the cells not yet in ``out`` (on Ray if given), write each as it finishes, return the table.

    ``cell_fn`` simulates a cell (default :func:`run_cell`). On Ray a cell whose worker process dies
    (killed, out of memory) is run again, up to :data:`CELL_RETRIES` times; writing a cell's file is
    idempotent (each cell is written once, atomically, by this process, whatever its attempts).
    A cell that fails on every attempt raises :class:`CellFailed`; the cells already written stay.
    """
    fn = cell_fn or run_cell
    done = finished_cells(out, cells)
    todo = [c for c in cells if c.key not in done]
    total = len(cells)

    def record(cell: SweepCell, row: dict) -> None:
        if cell.key in done:  # a result that arrives twice is written once
            return
        row = {**row, "settings": cell.settings}
        atomic_write_text(_cell_path(out, cell), json.dumps(row) + "\n")
        done[cell.key] = row
        if on_cell is not None:
            on_cell(row, len(done), total)

    if ray_module is not None and todo:
        _run_on_ray(ray_module, fn, todo, record)
    else:
        for cell in todo:
            record(cell, fn(cell))
    rows = [done[c.key] for c in cells]
    return pd.DataFrame([{k: v for k, v in r.items() if k not in ("jct_h", "settings")} for r in rows]), rows


def _run_on_ray(ray_module: ModuleType, fn: Callable[[SweepCell], dict], todo: list[SweepCell],
                record: Callable[[SweepCell, dict], None]) -> None:
    """Every cell of ``todo`` as a Ray task (retried when its worker dies), recorded as each finishes."""
    from ray.exceptions import RayError, RayTaskError

    remote = ray_module.remote(max_retries=CELL_RETRIES, retry_exceptions=False)(fn)
    pending = {remote.remote(c): c for c in todo}
    try:
        while pending:
            ready, _ = ray_module.wait(list(pending), num_returns=1)
            cell = pending.pop(ready[0])
            try:
                row = ray_module.get(ready[0])
            except RayTaskError as exc:  # the cell itself raised: the cause, as without Ray
                cause = getattr(exc, "cause", None)
                if isinstance(cause, SynergyGymError):
                    raise cause from None
                raise
            except RayError as exc:  # its worker died on every attempt
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise CellFailed(f"cell {cell.key} failed on Ray {_times(CELL_RETRIES + 1)} "
                                 f"({type(exc).__name__}: {first[:200]})") from None
            record(cell, row)
    finally:
        for ref in pending:  # stop what is left (an error or Ctrl-C)
            try:
                ray_module.cancel(ref, force=True)
            except Exception:  # already finished or gone: nothing to stop
                pass


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"
