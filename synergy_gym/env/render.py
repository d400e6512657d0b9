"""Rendering the cluster: a text table (``ansi``) and a labelled picture (``rgb_array``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.simulator import Simulator

if TYPE_CHECKING:  # matplotlib is imported on the first rgb_array render
    from matplotlib.figure import Figure


def _status(sim: Simulator) -> tuple[int, int]:
    """Running and waiting jobs."""
    running = sim.ledger.n_slots
    return running, max(0, sim.runnable.size - running)


def render_ansi(sim: Simulator | None, zoo: ModelZoo, finished: int, job: int) -> str:
    """Time, job counts and every server's free resources and jobs; ``job`` is the one being decided (or −1)."""
    if sim is None:
        return "(not reset)"
    ledger = sim.ledger
    running, waiting = _status(sim)
    lines = [
        f"t={sim.now / 3600:.2f} h  round {sim.rounds_elapsed}  running {running}  "
        f"waiting {waiting}  finished {finished}/{sim.jobs.n}",
        f"{'server':>6} {'free GPU':>8} {'free CPU':>8} {'free GB':>8}  jobs (id:model cpus/GB per GPU)",
    ]
    names = zoo.names
    on_server = ledger.slot_on_server
    for s in range(sim.cluster.num_servers):
        held = [
            f"{sim.jobs.job_id[ledger.jobs[slot]]}:{names[sim.jobs.model[ledger.jobs[slot]]]} "
            f"{ledger.cpu[slot]:g}/{ledger.mem[slot]:g}"
            for slot in on_server[s]
        ]
        lines.append(
            f"{s:>6} {ledger.free_gpu[s]:>8} {ledger.free_cpu[s]:>8.1f} {ledger.free_mem[s]:>8.1f}  {', '.join(held)}"
        )
    if job >= 0:
        gpus = int(sim.jobs.gpus[job])
        plural = "" if gpus == 1 else "s"
        lines.append(f"deciding job {sim.jobs.job_id[job]} ({names[sim.jobs.model[job]]}, {gpus} GPU{plural})")
    return "\n".join(lines)


def render_rgb(picture: ClusterPicture, sim: Simulator | None, zoo: ModelZoo, finished: int, job: int) -> np.ndarray:
    """The cluster as an RGB image (H × W × 3 uint8, at least 640 × 360).

    Three panels – GPUs, CPUs and memory in use – with one labelled bar per
    server (scaled to the server's capacity), and a header with the time,
    round, job counts and the job being decided. See :class:`ClusterPicture`.
    """
    c = picture.cluster
    if sim is None:
        zeros = np.zeros(c.num_servers)
        return picture.draw((zeros, zeros, zeros), "Synergy cluster (not reset)")
    ledger = sim.ledger
    used = (
        c.gpus_per_server - np.asarray(ledger.free_gpu, dtype=float),
        c.cpus_per_server - np.asarray(ledger.free_cpu, dtype=float),
        c.mem_gb_per_server - np.asarray(ledger.free_mem, dtype=float),
    )
    running, waiting = _status(sim)
    header = (f"t = {sim.now / 3600:.2f} h, round {sim.rounds_elapsed}: {running} running, "
              f"{waiting} waiting, {finished}/{sim.jobs.n} finished")
    if job >= 0:
        gpus = int(sim.jobs.gpus[job])
        header += (f"\ndeciding job {sim.jobs.job_id[job]} ({zoo.names[sim.jobs.model[job]]}, "
                   f"{gpus} GPU{'' if gpus == 1 else 's'})")
    return picture.draw(used, header)


class ClusterPicture:
    """The ``rgb_array`` picture of a cluster: a matplotlib figure on its own Agg canvas.

    The frame (axes, server labels, capacity bars, panel titles) is drawn once;
    each :meth:`draw` restores it and draws only the bars in use and the texts
    (blitting), which keeps a render at a few milliseconds. The figure is not
    registered with pyplot, so renders leave no open figures behind; pickling
    drops it (it is rebuilt on the next render).
    """

    PANELS = (("GPUs", "tab:blue"), ("CPUs", "tab:orange"), ("memory GB", "tab:green"))

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self._fig: Figure | None = None

    def __getstate__(self) -> dict:
        return {"cluster": self.cluster, "_fig": None}

    def close(self) -> None:
        # The figure is not pyplot's: dropping it is enough. (Clearing it imports matplotlib modules, which fails
        # when a vector env's __del__ closes it at interpreter exit.)
        self._fig = None

    def _build(self) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        c = self.cluster
        n = c.num_servers
        height_in = min(max(3.6, 1.4 + 0.16 * n), 12.0)  # at 100 dpi: 640 × ≥360 pixels, taller for big clusters
        fig = Figure(figsize=(6.4, height_in), dpi=100, facecolor="white")
        canvas = FigureCanvasAgg(fig)
        axes = fig.subplots(1, 3, sharey=True)
        top_px, bottom_px = 62, 34  # room for the header and the totals, in pixels
        fig.subplots_adjust(left=0.14, right=0.98, bottom=bottom_px / (100 * height_in),
                            top=1 - top_px / (100 * height_in), wspace=0.12)
        y = np.arange(n)
        step = max(1, int(np.ceil(n / 24)))  # label at most ~24 servers
        fontsize = 7 if n <= 24 else 6
        self._bars, self._totals = [], []
        capacities = (c.gpus_per_server, c.cpus_per_server, c.mem_gb_per_server)
        for ax, (name, colour), capacity in zip(axes, self.PANELS, capacities):
            ax.barh(y, np.full(n, float(capacity)), color="0.9", height=0.8)
            bars = ax.barh(y, np.zeros(n), color=colour, height=0.8)
            for bar in bars.patches:
                bar.set_animated(True)
            self._bars.append(bars.patches)
            ax.set_xlim(0, capacity)
            ax.set_title(f"{name} in use (of {capacity:g})", fontsize=8)
            ax.set_xticks([0, capacity / 2, capacity], ["0", f"{capacity / 2:g}", f"{capacity:g}"])
            ax.tick_params(labelsize=fontsize, length=2, pad=1)
            self._totals.append(ax.text(0.5, -bottom_px * 0.45 / ax.bbox.height, "", transform=ax.transAxes,
                                        ha="center", va="top", fontsize=8, animated=True))
        axes[0].set_yticks(y[::step], [f"server {s}" for s in y[::step]])
        axes[0].set_ylim(n - 0.5, -0.5)  # server 0 at the top
        self._header = fig.text(0.5, 1 - 6 / (100 * height_in), "", ha="center", va="top", fontsize=9, animated=True)
        canvas.draw()
        self._background = canvas.copy_from_bbox(fig.bbox)
        self._fig, self._canvas, self._capacities = fig, canvas, capacities

    def draw(self, used: tuple[np.ndarray, np.ndarray, np.ndarray], header: str) -> np.ndarray:
        """The picture with ``used`` (GPUs, CPUs, GB in use per server) and ``header``, as H × W × 3 uint8."""
        if self._fig is None:
            self._build()
        fig, canvas = self._fig, self._canvas
        assert fig is not None
        canvas.restore_region(self._background)
        n = self.cluster.num_servers
        for patches, values, total_text, capacity in zip(self._bars, used, self._totals, self._capacities):
            values = np.clip(np.asarray(values, dtype=float), 0.0, capacity)
            for patch, value in zip(patches, values.tolist()):
                patch.set_width(value)
                fig.draw_artist(patch)
            total = float(values.sum())
            total_text.set_text(f"total {total:g} / {capacity * n:g} ({100 * total / (capacity * n):.0f}%)")
            fig.draw_artist(total_text)
        self._header.set_text(header)
        fig.draw_artist(self._header)
        return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()
