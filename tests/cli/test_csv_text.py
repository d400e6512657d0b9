"""Tables are written as CSV exactly as pandas' ``to_csv(index=False)`` writes them, without pandas (``cli/csv_text.py``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from synergy_gym.cli.csv_text import csv_text
from synergy_gym.sim.cluster import load_cluster
from synergy_gym.sim.generator import SyntheticWorkload
from synergy_gym.traces.replay import workload_frame, workload_table


def test_columns_of_every_kind_are_written_as_pandas_writes_them():
    rng = np.random.default_rng(3)
    n = 400
    floats = rng.standard_normal(n) * 10.0 ** rng.integers(-12, 20, n)
    floats[::7] = np.nan
    floats[::11] = np.round(floats[::11])
    columns = {
        "float": floats,
        "int": rng.integers(-(10**12), 10**12, n),
        "bool": rng.random(n) < 0.5,
        "text": np.array([["plain", "with,comma", 'with "quote"', "two\nlines", ""][i % 5] for i in range(n)], dtype=object),
        "nothing": [None] * n,
        "int or none": [None if i % 3 == 0 else i for i in range(n)],
        "ints": list(range(n)),
        "float or none": [None if i % 4 == 0 else i / 3 for i in range(n)],
        "label": ["fifo+tune"] * n,
        "float32s": [np.float32(x) for x in rng.random(n)],  # pandas keeps float32: 0.1, not 0.100000001
    }
    assert csv_text(columns) == pd.DataFrame(columns).to_csv(index=False)


def test_a_workload_is_written_as_its_frame_would_be():
    cluster = load_cluster("small")
    workload, _ = SyntheticWorkload(jobs_per_hour=3.0, seed=5, num_jobs=80, max_gpus=cluster.total_gpus,
                                    multigpu=True).stream()
    assert csv_text(workload_table(workload, cluster)) == workload_frame(workload, cluster).to_csv(index=False)
