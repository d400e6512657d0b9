"""Flag values that argparse would lose or misread silently are refused in one line.

A list flag given twice (``--seeds 1 --seeds 2``: argparse keeps the last) names both values and how to
give one list; ``--env-kwargs`` groups add up, and a key given twice is refused; an empty path
(``--out ""``, which is ``Path(".")``) names its flag. ``sweep --policies`` names its flag and the
orders and allocations, not 35 policies. Ctrl-C that arrives inside a numba kernel (a ``SystemError``
wrapping the ``KeyboardInterrupt``) is an interrupt, not a traceback.
"""

from __future__ import annotations

import pytest

from synergy_gym.agents.env_kwargs import UNUSED_WITH_FIXED_JOBS, parse_env_kwargs
from synergy_gym.cli import main
from synergy_gym.cli.command import RunLater, build_parser
from synergy_gym.errors import ConfigError
from tests.support.cli_runs import snapshot

#: Each command's required arguments, so that only the flag under test is wrong.
REQUIRED = {"sweep": ["--policies", "fifo+tune", "--load", "5", "--seed", "1"], "trace-stats": ["t.csv"]}


def _parse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a usage error prints (argparse exits with status 2)."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize("command, flag, first, second", [
    ("benchmark", "--seeds", "1", "2"),
    ("evaluate", "--seeds", "1..3", "7"),
    ("evaluate", "--baselines", "env", "sim"),
    ("evaluate", "--sim-policies", "fifo+tune", "fifo+opt"),
    ("sweep", "--policies", "fifo+tune", "srtf+tune"),
    ("sweep", "--load", "5", "7"),
    ("sweep", "--seed", "1", "2"),
    ("compare", "--policies", "fifo+tune", "fifo+fair"),
    ("compare", "--load", "5", "7"),
    ("compare", "--seed", "1", "2"),
    ("compare", "--sensitivity", "true", "profiled"),
])
def test_a_list_flag_given_twice_is_refused_naming_both_values(capsys, command, flag, first, second):
    required = REQUIRED.get(command, [])
    pairs = [required[i:i + 2] for i in range(0, len(required), 2)]
    base = [command, *(a for pair in pairs if pair[0] != flag for a in pair)]  # the others' required values
    assert getattr(build_parser().parse_args([*base, flag, first]), flag[2:].replace("-", "_")) == first
    line = _parse_error([*base, flag, first, flag, second], capsys)
    assert line == (f"synergy-gym {command}: error: {flag} given twice ({first!r}, {second!r}); "
                    f"give one list: {flag} {first},{second}")


@pytest.mark.parametrize("command", ["train", "evaluate", "benchmark"])
def test_env_kwargs_groups_add_up(command):
    args = build_parser().parse_args([command, "--env-kwargs", "num_jobs=20", "--env-kwargs", "round_s=600", "x=1"])
    assert args.env_kwargs == ["num_jobs=20", "round_s=600", "x=1"]


def test_an_env_kwarg_given_twice_is_refused_naming_both():
    assert parse_env_kwargs(["num_jobs=20", "round_s=600"]) == {"num_jobs": 20, "round_s": 600}
    with pytest.raises(ConfigError, match=r"^--env-kwargs num_jobs given twice \('num_jobs=20', 'num_jobs=30'\); "
                                          r"give each key once$"):
        parse_env_kwargs(["num_jobs=20", "round_s=600", "num_jobs=30"])


@pytest.mark.parametrize("source, key", [(source, key) for source, keys in UNUSED_WITH_FIXED_JOBS.items() for key in keys])
def test_a_generator_kwarg_that_fixed_jobs_leave_unused_is_refused(source, key):
    with pytest.raises(ConfigError, match=rf"^--env-kwargs {key}=2 does not apply with {source}=jobs\.csv "
                                          rf"\({key} shapes generated workloads only\)$"):
        parse_env_kwargs([f"{key}=2", f"{source}=jobs.csv"])
    assert parse_env_kwargs([f"{key}=2", f"{source}=null"]) == {key: 2, source: None}  # no fixed jobs: it applies


def test_a_trace_keeps_its_first_num_jobs_drawn_with_class_split():
    assert parse_env_kwargs(["trace=t.csv", "num_jobs=5", "class_split=[1,0,0]"]) == {
        "trace": "t.csv", "num_jobs": 5, "class_split": [1, 0, 0]}


@pytest.mark.parametrize("command, flag", [
    ("benchmark", "--out"), ("benchmark", "--json"), ("sweep", "--out"), ("sweep", "--json"),
    ("compare", "--out"), ("compare", "--json"), ("evaluate", "--out"), ("evaluate", "--json"),
    ("evaluate", "--decisions"), ("evaluate", "--jobs-csv"), ("train", "--out"), ("trace-stats", "--out"),
])
def test_an_empty_path_is_refused_naming_its_flag(capsys, command, flag):
    line = _parse_error([command, *(REQUIRED.get(command, [])), flag, ""], capsys)
    assert line.startswith(f"synergy-gym {command}: error: {flag} '': the value is empty")
    assert str(build_parser().parse_args([command, *(REQUIRED.get(command, [])), flag, "."])
               .__dict__[flag[2:].replace("-", "_")]) == "."


@pytest.mark.parametrize("policies, words", [
    ("foo+bar", ("--policies 'foo+bar': unknown policy 'foo+bar'", "orders fifo, srtf", "allocations fair")),
    (" , ", ("--policies ' , ': an empty item (two commas in a row, or one at an end)",)),
    ("fifo+tune,,srtf+tune", ("--policies 'fifo+tune,,srtf+tune': an empty item",)),
    ("", ("--policies '': empty",)),
])
def test_sweep_names_policies_and_lists_orders_and_allocations_not_every_policy(tmp_path, capsys, policies, words):
    before = snapshot(tmp_path)
    code = main(["sweep", "--policies", policies, "--load", "5", "--seed", "1", "--jobs", "10", "--no-ray", "--quiet",
                 "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("synergy-gym sweep: error: "), err
    assert all(word in err for word in words), err
    assert "fifo+fair" not in err and len(err) < 250
    assert snapshot(tmp_path) == before


def _wrapped_interrupt(*_args: object, **_kwargs: object) -> None:
    """What numba raises when Ctrl-C arrives inside a compiled function."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise SystemError("CPUDispatcher(<function step>) returned a result with an exception set") from None


def test_ctrl_c_inside_a_numba_kernel_is_an_interrupt(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(RunLater, "__call__", _wrapped_interrupt)
    assert main(["compare", "--quiet", "--out", str(tmp_path / "out")]) == 130
    out, err = capsys.readouterr()
    assert out == "" and err == "synergy-gym compare: interrupted; nothing written\n"
    assert list(tmp_path.iterdir()) == []

    def other_error(*_args: object, **_kwargs: object) -> None:
        raise SystemError("a real one")

    monkeypatch.setattr(RunLater, "__call__", other_error)
    with pytest.raises(SystemError, match="a real one"):  # a SystemError of its own is not taken for Ctrl-C
        main(["compare", "--quiet", "--out", str(tmp_path / "out")])


def test_ctrl_c_inside_a_numba_kernel_of_a_sweep_says_what_it_kept(tmp_path, capsys, monkeypatch):
    from synergy_gym.baselines import sweep

    monkeypatch.setattr(sweep, "run_sweep", _wrapped_interrupt)
    code = main(["sweep", "--policies", "fifo+tune", "--load", "5", "--seed", "1", "--jobs", "10", "--no-ray",
                 "--quiet", "--out", str(tmp_path / "out")])
    assert code == 130
    assert capsys.readouterr().err == "synergy-gym sweep: interrupted; no cell had finished; nothing written\n"


def test_trace_stats_refuses_an_empty_trace_path(capsys):
    line = _parse_error(["trace-stats", ""], capsys)
    assert line.startswith("synergy-gym trace-stats: error: path '': the value is empty")
