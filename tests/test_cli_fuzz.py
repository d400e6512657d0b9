"""A fuzz of the command line: malformed files and argument lists across the five commands.

A corpus of :data:`CASES` cases is drawn from :data:`SEED` (the same corpus on every run): for
``compare``, ``sweep``, ``trace-stats``, ``train`` and ``evaluate``, an argument list around a
valid one with one value made bad, or an input file (workload CSV and its gzip, Philly trace,
cluster TOML, train config in TOML/YAML/JSON, model zip, normalisation statistics) made malformed
in one of several ways. Each mutation is invalid by construction, so every case must be refused
with exit status 2, exactly one line on stderr and no traceback, within :data:`LIMIT_S` seconds,
and leave its working folder as it was: no output folder, no partial or temporary file.
"""

from __future__ import annotations

import gzip
import io
import random
import signal
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from synergy_gym.cli import main
from tests.support.cli_runs import snapshot

SEED = 20261202
CASES = 260
LIMIT_S = 60
pytestmark = pytest.mark.slow

WORKLOAD = """job_id,model,task,gpus,arrival_s,iter_time_s,total_iters,fair_duration_s,cpu_demand,mem_demand_gb,\
speedup_at_demand,in_measured_window
0,alexnet,vision,2,1225,0.6,3447,2068.2,24,250,2.94,0
1,gnmt,language,1,2849,0.12,34181,4101.72,1,20,1,1
2,res18,vision,1,3000,0.2,20000,4000.0,9,100,1.5,1
"""
TRACE = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,1,2951.0,6214e9
2017-10-09 08:13:03,951.0,2,1902.0,6214e9
"""
CLUSTER = "num_servers = 4\ngpus_per_server = 8\ncpus_per_server = 24.0\nmem_gb_per_server = 500.0\n"
CONFIG = 'algo = "maskable_ppo"\nenv_id = "Synergy-small-v0"\ntimesteps = 64\nn_envs = 1\nn_steps = 16\nbatch_size = 8\n'

#: Values that are wrong for a number, a name, a range or a path – tokens that look like options included.
BAD_VALUES = ["-1", "0", "-0.5", "nan", "inf", "-inf", "1e309", "abc", "", " ", "1..", "..5", "5..1", "-1:10", "10:5",
              "a:b", "1,,", "-10/100/10", "20/70", "1/2/3/4", "é", "\x00", "99999999999999999999", "1e-320",
              "--quiet", "-", "0x10", "1_0_", "[1]", "{}", "None"]
#: (option, value) pairs above that are valid after all.
VALID = {("--seed", "0"), ("--seeds", "0"), ("--checkpoint-freq", "0"), ("--profile-noise", "0"),
         ("--profile-noise", "1e-320"), ("--arrival-scale", "1e-320"), ("--bc-policy", "None")}
#: Cell values that no workload or trace column takes.
BAD_CELLS = ["", "nan", "inf", "-inf", "1e300", "-5", "abc", "0x1", "7", "quantum", "\xff", "1,2", '"', "None", "-0"]


@dataclass(frozen=True)
class Case:
    """One malformed input: the arguments, and the files they read (relative name → bytes)."""

    name: str
    argv: list[str]
    files: dict[str, bytes]


def mutate_table(text: str, rng: random.Random, checked: range, every_row: bool = False) -> tuple[str, bytes]:
    """A CSV made malformed one way (what, the bytes); ``checked``: the columns every row needs, by index.

    ``every_row``: a bad cell or row length in every row (a real trace skips malformed rows, counted in a warning;
    with none left it is refused).
    """
    lines = text.splitlines()
    header, rows = lines[0].split(","), [line.split(",") for line in lines[1:]]
    how = rng.choice(["cell", "cell", "cell", "drop-column", "short-row", "long-row", "binary", "empty", "header-only",
                      "not-utf8", "truncated"])
    if every_row and how == "truncated":  # a cut last row is one malformed row of several: skipped, not refused
        how = "short-row"
    chosen = range(len(rows)) if every_row else [rng.randrange(len(rows))]
    if how == "cell":
        c, value = rng.choice(checked), rng.choice(BAD_CELLS)
        for r in chosen:
            rows[r][c] = value
        how = f"cell {header[c]}={value!r}"
    elif how == "drop-column":
        c = rng.choice(checked)
        header.pop(c)
        for row in rows:
            row.pop(c)
        how = f"drop-column {c}"
    elif how == "short-row":
        for r in chosen:  # cut into the columns every row needs
            del rows[r][checked[-1]:]
    elif how == "long-row":
        for r in chosen:
            rows[r].append("1")
    elif how == "binary":
        return how, bytes(rng.randrange(256) for _ in range(200))
    elif how == "empty":
        return how, b""
    elif how == "header-only":
        return how, (",".join(header) + "\n").encode()
    elif how == "not-utf8":
        r, c = rng.randrange(len(rows)), rng.randrange(len(header))
        data = "\n".join(",".join(row) for row in [header, *rows]).encode()
        cell = ",".join(rows[r][: c + 1]).encode()
        return how, data.replace(cell, cell + b"\xff\xfe", 1) if cell in data else b"\xff\xfe" + data
    elif how == "truncated":
        data = "\n".join(",".join(row) for row in [header, *rows]).encode()
        cut = len(data) - rng.randrange(2, 20)
        while data[cut - 1:cut] in (b",", b"\n"):  # cut inside a cell of the last row: a row too short
            cut -= 1
        return how, data[:cut]
    return how, ("\n".join(",".join(row) for row in [header, *rows]) + "\n").encode()


def gzip_of(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """``data`` gzipped, then truncated, or not gzip at all."""
    packed = gzip.compress(data)
    if rng.random() < 0.5:
        return "gz-truncated", packed[: rng.randrange(10, len(packed) - 4)]
    return "gz-not-gzip", data


def mutate_toml(text: str, rng: random.Random, fields: list[str], empty_is_bad: bool = True) -> tuple[str, bytes]:
    """A TOML file made malformed one way (``empty_is_bad``: whether an empty file is a malformed one)."""
    how = rng.choice(["value", "value", "unknown", "syntax", "binary", "type", *(["empty"] if empty_is_bad else [])])
    if how == "value":
        field, value = rng.choice(fields), rng.choice(["-1", "0", "nan", "inf", "1e400", "-inf", "-0.5"])
        lines = [f"{field} = {value}" if line.startswith(f"{field} ") else line for line in text.splitlines()]
        return f"{field}={value}", ("\n".join(lines) + "\n").encode()
    if how == "unknown":
        return how, (text + "no_such_field_x = 1\n").encode()
    if how == "syntax":
        return how, (text + rng.choice(["x = ", "[", "= 3", "a = 'b", "y = [1, 2", "z = 1 2"]) + "\n").encode()
    if how == "binary":
        return how, bytes(rng.randrange(256) for _ in range(100)) + b"\xff"
    if how == "empty":
        return how, b""
    field = rng.choice(fields)
    value = rng.choice(['"eight"', "true", "[1, 2]", "{ a = 1 }", "1979-05-27"])
    lines = [f"{field} = {value}" if line.startswith(f"{field} ") else line for line in text.splitlines()]
    return f"type {field}={value}", ("\n".join(lines) + "\n").encode()


def mutate_zip(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """A model zip made malformed one way."""
    how = rng.choice(["truncated", "flipped", "other-zip", "text", "empty"])
    if how == "truncated":
        return how, data[: rng.randrange(10, len(data) - 10)]
    if how == "flipped":  # a byte inside the first member's compressed data: a CRC or zlib error
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            info = archive.infolist()[0]
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
        at = start + rng.randrange(max(1, info.compress_size))
        return how, data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
    if how == "other-zip":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            # (a fixed time: writestr with a bare name stamps the current second, and the corpus would change with it)
            archive.writestr(zipfile.ZipInfo("readme.txt", date_time=(2020, 1, 1, 0, 0, 0)), "not a model")
        return how, buffer.getvalue()
    if how == "text":
        return how, b"not a zip at all\n"
    return how, b""


def tiny_model() -> bytes:
    """A small saved MaskablePPO zip for Synergy-small-v0."""
    import gymnasium as gym
    from sb3_contrib import MaskablePPO

    import synergy_gym  # noqa: F401

    env = gym.make("Synergy-small-v0", num_jobs=10)
    buffer = io.BytesIO()
    MaskablePPO("MultiInputPolicy", env, n_steps=8, batch_size=8, policy_kwargs={"net_arch": [8]}, device="cpu").save(buffer)
    env.close()
    return buffer.getvalue()


def corpus(rng: random.Random, model: bytes) -> list[Case]:
    """:data:`CASES` cases, about a fifth per command."""
    compare = ["compare", "--jobs", "20", "--seed", "1", "--cluster", "small", "--quiet"]
    sweep = ["sweep", "--policies", "fifo+fair", "--load", "5", "--seed", "1", "--jobs", "20", "--cluster", "small",
             "--no-ray", "--quiet"]
    evaluate = ["evaluate", "--env", "Synergy-small-v0", "--env-kwargs", "num_jobs=10", "--seeds", "0",
                "--baselines", "env:fifo+tune", "--device", "cpu", "--quiet"]
    train = ["train", "--env", "Synergy-small-v0", "--timesteps", "64", "--env-kwargs", "num_jobs=10", "--no-progress"]
    options: dict[str, tuple[list[str], list[str]]] = {  # command: (valid argv, options whose value is made bad)
        "compare": (compare, ["--load", "--seed", "--jobs", "--window", "--split", "--arrival-scale", "--round-s",
                              "--profile-noise", "--sensitivity", "--placement", "--timing", "--cluster", "--policies",
                              "--trace-format", "--trace-mode"]),
        "sweep": (sweep, ["--policies", "--load", "--seed", "--jobs", "--cluster"]),
        "evaluate": (evaluate, ["--seeds", "--episodes", "--env", "--device", "--baselines", "--sim-policies",
                                "--env-kwargs", "--label"]),
        "train": (train, ["--timesteps", "--n-envs", "--seed", "--device", "--env", "--algo", "--eval-freq",
                          "--eval-episodes", "--env-kwargs", "--checkpoint-freq", "--bc-policy"]),
    }
    cases: list[Case] = []

    def add(name: str, argv: list[str], files: dict[str, bytes] | None = None) -> None:
        cases.append(Case(f"{len(cases):03d} {name}", argv, files or {}))

    makers: list[Callable[[], None]] = []

    def bad_option(command: str) -> Callable[[], None]:
        def make() -> None:
            base, names = options[command]
            option = rng.choice(names)
            value = rng.choice([v for v in BAD_VALUES if (option, v) not in VALID])
            if option == "--env-kwargs":
                value = rng.choice(["num_jobs=-1", "nope=1", "max_queue=0", "num_jobs", "=", "class_split=1/2",
                                    "render_mode=human", "cluster=nope", "num_jobs=1e9"])
            argv = list(base)
            if option in argv:
                argv[argv.index(option) + 1] = value
            else:
                argv += [option, value]
            add(f"{command} {option} {value!r}", argv)
        return make

    def bad_file(command: str, kind: str) -> Callable[[], None]:
        def make() -> None:
            if kind == "workload":
                how, data = mutate_table(WORKLOAD, rng, checked=range(1, 12))
                name = "w.csv"
                if rng.random() < 0.3:
                    how, data, name = f"{how}+{gzip_of(data, rng)[0]}", gzip_of(data, rng)[1], "w.csv.gz"
                add(f"{command} --workload {how}", ["compare", "--workload", name, "--cluster", "small", "--quiet"],
                    {name: data})
            elif kind == "trace":
                how, data = mutate_table(TRACE, rng, checked=range(1, 3), every_row=True)
                fmt = rng.choice(["auto", "philly-csv", "alibaba", "helios"])
                if command == "trace-stats":
                    add(f"trace-stats {fmt} {how}", ["trace-stats", "t.csv", "--format", fmt], {"t.csv": data})
                else:
                    add(f"compare --trace {fmt} {how}", ["compare", "--trace", "t.csv", "--trace-format", fmt,
                                                         "--jobs", "3", "--cluster", "small", "--quiet"], {"t.csv": data})
            elif kind == "cluster":
                how, data = mutate_toml(CLUSTER, rng, ["num_servers", "gpus_per_server", "cpus_per_server",
                                                       "mem_gb_per_server"])
                base = compare if command == "compare" else sweep
                argv = list(base)
                argv[argv.index("--cluster") + 1] = "c.toml"
                add(f"{command} --cluster {how}", argv, {"c.toml": data})
            elif kind == "config":
                suffix = rng.choice([".toml", ".toml", ".yaml", ".json"])
                if suffix == ".toml":
                    how, data = mutate_toml(CONFIG, rng, ["timesteps", "n_envs", "n_steps", "batch_size"],
                                            empty_is_bad=False)  # an empty config is the defaults
                elif suffix == ".yaml":
                    how, data = "yaml", rng.choice([b"timesteps: [1\n", b"- a\n- b\n", b"n_envs: -3\n", b"\xff\xfe: 1\n",
                                                    b"algo: quantum\n", b"batch_size: 100000\nn_steps: 8\n"])
                else:
                    how, data = "json", rng.choice([b"{", b"[]", b'{"timesteps": "many"}', b'{"gamma": 2}', b"\x00\x01",
                                                    b'{"seed": -1}', b'{"env_kwargs": 5}'])
                add(f"train --config {how}", ["train", "--config", f"c{suffix}", "--no-progress"], {f"c{suffix}": data})
            elif kind == "model":
                how, data = mutate_zip(model, rng)
                if command == "train":
                    add(f"train --resume {how}", [*train, "--resume", "m.zip"], {"m.zip": data})
                else:
                    add(f"evaluate --model {how}", [*evaluate, "--model", "m.zip", "--no-normalize"], {"m.zip": data})
            elif kind == "stats":
                data = rng.choice([b"", b"not a pickle", b"\x80\x04K\x01.", bytes(rng.randrange(256) for _ in range(64))])
                add("evaluate --vecnormalize", [*evaluate, "--model", "m.zip", "--vecnormalize", "s.pkl"],
                    {"m.zip": model, "s.pkl": data})
        return make

    makers += [bad_option(c) for c in options for _ in range(2)]
    makers += [bad_file("compare", k) for k in ("workload", "workload", "workload", "trace", "cluster")]
    makers += [bad_file("sweep", "cluster"), bad_file("trace-stats", "trace"), bad_file("trace-stats", "trace")]
    makers += [bad_file("train", "config"), bad_file("train", "config"), bad_file("train", "model")]
    makers += [bad_file("evaluate", "model"), bad_file("evaluate", "stats")]
    while len(cases) < CASES:
        rng.choice(makers)()
    return cases


class Hang(Exception):
    pass


def run_case(case: Case, folder: Path, capsys: pytest.CaptureFixture[str]) -> str | None:
    """Run one case in ``folder``; what is wrong with its outcome (None: one line, exit 2, nothing written)."""
    for name, data in case.files.items():
        (folder / name).write_bytes(data)
    before = snapshot(folder)
    capsys.readouterr()

    def alarm(_signum: int, _frame: object) -> None:
        raise Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(LIMIT_S)
    try:
        code: object = main(case.argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    except Hang:
        return f"no answer within {LIMIT_S} s"
    except BaseException as exc:  # noqa: BLE001 - any escape is a finding
        return f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    problems = []
    if code != 2:
        problems.append(f"exit {code}")
    if err.count("\n") != 1 or "Traceback" in err:
        problems.append(f"stderr has {err.count(chr(10))} lines")
    if snapshot(folder) != before:
        problems.append("wrote " + ", ".join(sorted(set(snapshot(folder)) - set(before))))
    return "; ".join(problems) + f" – {err.strip().splitlines()[0] if err.strip() else out[:200]!r}" if problems else None


def test_malformed_inputs_get_one_line_exit_2_and_write_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SYNERGY_GYM_CACHE_DIR", str(tmp_path / "cache"))  # the kernel cache stays out of the folders
    cases = corpus(random.Random(SEED), tiny_model())
    assert len(cases) >= 200 and {c.argv[0] for c in cases} == {"compare", "sweep", "trace-stats", "train", "evaluate"}
    findings = []
    for i, case in enumerate(cases):
        folder = tmp_path / f"case{i}"
        folder.mkdir()
        monkeypatch.chdir(folder)
        problem = run_case(case, folder, capsys)
        if problem is not None:
            findings.append(f"{case.name}: {problem}")
    assert not findings, f"{len(findings)} of {len(cases)} cases (seed {SEED}):\n" + "\n".join(findings)


def test_the_corpus_is_the_same_for_the_seed():
    model = tiny_model()
    first, again = corpus(random.Random(SEED), model), corpus(random.Random(SEED), model)
    assert first == again and corpus(random.Random(SEED + 1), model) != first


def test_the_unmutated_files_are_valid(tmp_path):
    """The mutations are what make a case bad: the files they start from are read without error."""
    from synergy_gym.agents.config import TrainConfig, load_config_file
    from synergy_gym.sim.cluster import load_cluster
    from synergy_gym.traces.loader import trace_workload
    from synergy_gym.traces.replay import replay_workload

    for name, text in (("w.csv", WORKLOAD), ("t.csv", TRACE), ("c.toml", CLUSTER), ("t.toml", CONFIG)):
        (tmp_path / name).write_text(text)
    assert len(replay_workload(tmp_path / "w.csv")) == 3
    with pytest.warns(UserWarning, match="left out 2 of 3 job"):  # the paper's duration filter
        assert len(trace_workload(tmp_path / "t.csv", class_split=(20.0, 70.0, 10.0), max_jobs=3)) >= 1
    assert load_cluster(tmp_path / "c.toml").total_gpus == 32
    assert TrainConfig.from_mapping(load_config_file(tmp_path / "t.toml")).timesteps == 64
