"""A workload file of plain cells is read without pandas, into exactly the columns pandas reads (``traces/plain_csv.py``)."""

from __future__ import annotations

import io
import random

import numpy as np
import pandas as pd
import pytest

from synergy_gym.traces import replay
from synergy_gym.traces.csv_table import read_file
from synergy_gym.traces.plain_csv import plain_columns
from synergy_gym.traces.replay import read_workload_csv

HEADER = "job_id,model,gpus,arrival_s,total_iters,in_measured_window"
ROWS = ["0,alexnet,1,409,3447,0", "1,gnmt,2,951.5,34181,1"]


def _pandas(text: str) -> dict[str, np.ndarray]:
    frame = pd.read_csv(io.StringIO(text), dtype={c: str for c in replay.TEXT if c in text.split("\n", 1)[0]})
    return {c: frame[c].to_numpy() for c in frame.columns}


def _plain(text: str) -> dict[str, np.ndarray] | None:
    return plain_columns(text, text.split("\n", 1)[0].rstrip("\r").split(","), replay.TEXT)


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        if a[name].dtype.kind == "O":
            assert a[name].tolist() == b[name].tolist(), name
        else:
            assert a[name].tobytes() == b[name].tobytes(), name  # bit for bit


def test_plain_decimals_are_read_as_pandas_reads_them_bit_for_bit():
    rng = random.Random(7)
    cells = []
    for _ in range(20_000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 14)))
        point = rng.randint(0, len(digits) - 1)
        cells.append(digits if point == 0 else f"{digits[:point]}.{digits[point:]}")
    text = "x,y\n" + "".join(f"{c},{rng.randint(0, 10**15 - 1)}\n" for c in cells)
    plain = _plain(text)
    assert plain is not None
    _same(plain, _pandas(text))
    assert plain["x"].dtype == np.float64 and plain["y"].dtype == np.int64


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_plain_workload_file_gets_pandas_columns(ending):
    text = ending.join([HEADER, *ROWS]) + ending
    plain = _plain(text)
    assert plain is not None
    _same(plain, _pandas(text))


@pytest.mark.parametrize("row", [
    '2,"resnet18",1,10,5,0',  # quoted
    "2,resnet18,1,,5,0",  # empty cell
    "2,resnet18,1,1e3,5,0",  # exponent
    "2,resnet18,1,nan,5,0",
    "2,resnet18,1,-3,5,0",  # a sign
    "2,resnet18,1,.5,5,0",
    "2,resnet18,1,5.,5,0",
    "2,resnet18,1,1.2.3,5,0",
    "2,resnet18,1,1234567890123456,5,0",  # more than 15 digits
    "2,resnet18,1,1_000,5,0",
    "2,NA,1,10,5,0",  # text pandas reads as missing
    "2,resnet18,1,10,5",  # too few cells
    "2,resnet18,1,10,5,0,7",  # too many
    "",  # a blank line
    "2,resnet18,1,10\r,5,0",  # a \r not at a line's end
])
def test_anything_but_plain_cells_is_left_to_pandas(row):
    assert _plain("\n".join([HEADER, *ROWS, row, "3,gnmt,1,12,5,1"]) + "\n") is None


def test_only_a_header_is_left_to_pandas():
    assert _plain(HEADER + "\n") is None


def test_the_reference_workloads_are_plain_and_read_as_with_pandas(shared_dir):
    files = sorted((shared_dir / "synergy" / "reference_workloads").glob("*.csv"))
    assert files
    for path in files:
        data = read_file(path, "workload file")
        lines = replay.Layout(path, data)
        header = lines.header()
        plain = plain_columns(data.decode("utf-8"), header, replay.TEXT)
        assert plain is not None, path
        _same(plain, replay._pandas_columns(path, data, lines, header))


def test_a_file_pandas_reads_gives_the_same_workload_as_its_plain_twin(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join([HEADER, *ROWS]) + "\n")
    quoted = tmp_path / "quoted.csv"  # quotes: read by pandas
    quoted.write_text("\n".join([HEADER, *(r.replace("alexnet", '"alexnet"') for r in ROWS)]) + "\n")
    assert _plain(quoted.read_text()) is None
    a, b = read_workload_csv(plain), read_workload_csv(quoted)
    for name in ("job_id", "model", "gpus", "arrival_s", "total_iters", "measured"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
