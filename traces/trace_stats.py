"""``synergy-gym trace-stats PATH``: what a job trace contains.

Prints the number of usable jobs (and of rows skipped or filtered), the time
span and arrival rate, the GPU-count mix, duration quantiles and – where the
trace has them – the requested CPUs and memory per GPU; writes a histogram of
durations and the GPU-count mix (``trace_stats.png``) to ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from synergy_gym.cli.files import atomic_write_bytes, check_output_dir, timestamped_dir
from synergy_gym.cli.guards import BASE_BYTES, Estimate, check_size, format_bytes, format_duration
from synergy_gym.cli.plots import figure_png, label_log_axis, pyplot
from synergy_gym.cli.staging import is_new, staged_outputs
from synergy_gym.traces.csv_table import compression
from synergy_gym.traces.loader import load_trace
from synergy_gym.traces.trace_jobs import FilteredJobsWarning, TraceJobs

if TYPE_CHECKING:
    from matplotlib.figure import Figure

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


def summary(trace: TraceJobs) -> str:
    n = len(trace)
    span_h = float(trace.submit_s[-1] - trace.submit_s[0]) / 3600.0
    lines = [f"trace: {trace.source}", f"jobs: {n:,}"]
    if trace.skipped:
        lines.append("skipped (malformed): " + ", ".join(f"{v:,} {k}" for k, v in sorted(trace.skipped.items())))
    if trace.filtered:
        lines.append(f"filtered (duration outside the paper's range): {trace.filtered:,}")
    rate = f"{n / span_h:.2f} jobs/h" if span_h > 0 else "-"
    lines.append(f"span: {span_h / 24:.1f} days, arrival rate {rate}")
    gpus, counts = np.unique(trace.gpus, return_counts=True)
    lines.append("GPU-count mix: " + ", ".join(f"{g}: {c:,} ({100 * c / n:.1f}%)" for g, c in zip(gpus, counts)))
    q = np.quantile(trace.duration_s / 3600.0, QUANTILES)
    lines.append("duration h: " + ", ".join(f"p{int(100 * p)} {v:.2f}" for p, v in zip(QUANTILES, q)))
    for name, values in (("requested CPUs per GPU", trace.cpu_per_gpu), ("requested GB per GPU", trace.mem_per_gpu)):
        known = values[np.isfinite(values)]
        if known.size:
            med = np.quantile(known, [0.1, 0.5, 0.9])
            lines.append(f"{name} ({known.size:,} jobs): p10 {med[0]:.1f}, p50 {med[1]:.1f}, p90 {med[2]:.1f}")
    return "\n".join(lines)


def make_histogram_figure(trace: TraceJobs) -> Figure:
    """Job durations (log histogram) and the GPU-count mix of ``trace``, not yet saved."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    hours = trace.duration_s / 3600.0
    shown = hours[hours > 0]  # (a log axis has no place for a duration of 0: said in the title)
    lo = float(shown.min()) if shown.size else 1e-3
    hi = max(float(shown.max()) * 1.01 if shown.size else lo, lo * 1.1)
    left.hist(shown, bins=np.logspace(np.log10(lo), np.log10(hi), 40))
    left.set_xscale("log")
    left.set_xlim(lo, hi)
    label_log_axis(left.xaxis, lo, hi)
    left.set_ylim(bottom=0)
    left.set_xlabel("duration (hours, log scale)")
    left.set_ylabel("jobs")
    zero = f"; {hours.size - shown.size:,} of 0 s not shown" if shown.size < hours.size else ""
    left.set_title(f"job durations (median {np.median(hours):.2f} h{zero})")
    left.grid(alpha=0.3)
    gpus, counts = np.unique(trace.gpus, return_counts=True)
    bars = right.bar([str(g) for g in gpus], counts)
    shares = [f"{100 * c / len(trace):.1f}%" if c >= len(trace) / 1000 else "<0.1%" for c in counts]
    right.bar_label(bars, labels=shares, padding=2, fontsize=8)
    right.set_yscale("log")
    label_log_axis(right.yaxis, max(counts.min() * 0.8, 0.8), counts.max() * 2)
    right.set_ylim(0.8, counts.max() * 2)
    right.set_xlabel("GPUs per job")
    right.set_ylabel("jobs (log scale)")
    right.set_title("GPU-count mix")
    right.grid(axis="y", alpha=0.3)
    span_d = float(trace.submit_s[-1] - trace.submit_s[0]) / 86400.0 if len(trace) else 0.0
    fig.suptitle(f"Trace {Path(trace.source).name}: {len(trace):,} jobs over {span_d:.1f} days")
    fig.tight_layout()
    return fig


def histogram_png(trace: TraceJobs) -> bytes:
    return figure_png(make_histogram_figure(trace))


#: Reading a trace: bytes a second, and memory per byte of the file (pandas' frame and the job arrays).
READ_BYTES_S, MEMORY_PER_BYTE = 20e6, 12.0
#: A trace at least this large says that it is being read (it takes a few seconds).
ANNOUNCE_BYTES = 50e6


def trace_estimate(path: Path) -> Estimate:
    """What reading the trace at ``path`` (a file, or an Alibaba folder's files) will take, from its size on disk.

    Measured: the 3.4 MB Philly trace of ``../shared`` reads in 0.09 s (36 MB/s) on one core of a 2-core
    AMD EPYC VM; the constants are rounded to err high.
    """
    files = [f for f in path.iterdir() if f.is_file()] if path.is_dir() else [path] if path.is_file() else []
    size = float(sum(_unpacked_size(f) for f in files))
    return Estimate(f"a trace of {format_bytes(size)}", BASE_BYTES + MEMORY_PER_BYTE * size, size / READ_BYTES_S)


#: How many times its size a bzip2 or xz file is taken to hold (text traces pack 5–10×; the guard errs high).
PACKED_RATIO = 10.0
#: The most a deflate stream expands (1032:1): a gzip file's recorded size beyond it is not a size.
DEFLATE_MAX_RATIO = 1032.0


def _unpacked_size(path: Path) -> float:
    """The bytes the file holds once decompressed (what the reader reads): a gzip file's recorded size (its last
    four bytes, modulo 4 GiB, so never below its own size, nor above what deflate can expand to), a zip file's
    members', :data:`PACKED_RATIO` × the size of a bzip2 or xz file; a plain file's size, and that of a file that
    is not what its name says (the reader says so)."""
    size = float(path.stat().st_size)
    kind = compression(path)
    try:
        if kind == "gzip" and size >= 18:  # a header of 10 bytes, a trailer of 8
            with path.open("rb") as fh:
                magic = fh.read(2)
                fh.seek(-4, 2)
                recorded = float(int.from_bytes(fh.read(4), "little"))
            return max(size, min(recorded, size * DEFLATE_MAX_RATIO)) if magic == b"\x1f\x8b" else size
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                return max(size, float(sum(m.file_size for m in archive.infolist())))
    except (OSError, zipfile.BadZipFile):
        return size  # the reader says what is wrong with the file
    return size * PACKED_RATIO if kind in ("bzip2", "xz") else size


def main(args: argparse.Namespace) -> int:
    out = args.out or timestamped_dir("trace-stats")
    check_output_dir(out, "--out", ("trace_stats.png",), create_parents=args.out is None)
    new = is_new(out)  # a folder made by another command while this one runs is not written into
    estimate = trace_estimate(args.path)
    check_size(estimate, args.allow_large)
    if estimate.memory_bytes - BASE_BYTES > MEMORY_PER_BYTE * ANNOUNCE_BYTES:
        print(f"synergy-gym trace-stats: reading {estimate.what} (about {format_duration(estimate.seconds)})…",
              file=sys.stderr, flush=True)
    with warnings.catch_warnings():  # the summary counts the jobs the duration filter left out
        warnings.simplefilter("ignore", FilteredJobsWarning)
        trace = load_trace(args.path, args.fmt, philly_duration_filter=not args.all_durations)
    print(summary(trace))
    with staged_outputs(out, args.out is None, new) as staging:  # the folder appears with its file, or not at all
        atomic_write_bytes(staging.file(out / "trace_stats.png"), histogram_png(trace))
    print(f"wrote {staging.final / 'trace_stats.png'}")
    return 0
