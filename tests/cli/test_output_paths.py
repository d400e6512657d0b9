"""Output paths (``--out``, ``--json``) and ``--resume`` are checked before any work; ``--jobs`` has a maximum.

A bad path gives one line naming the flag and the path, exit status 2, and
leaves nothing behind: no folder, no partial output. Every test runs in its own
``tmp_path`` (also the working directory, so default ``runs/…`` folders would
show up in the tree comparison).
"""

from __future__ import annotations

import pickle
import shutil
import stat
from pathlib import Path

import pytest

from synergy_gym.cli import main
from synergy_gym.cli.args import check_job_count
from synergy_gym.cli.files import check_input_file, check_output_dir, check_output_file, is_writable_dir
from synergy_gym.errors import PathError, SynergyGymError
from synergy_gym.sim.workload import MAX_JOBS
from tests.support.cli_runs import run_cli

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,6000.0,1,6000.0,a
2017-10-09 06:00:00,3600.0,8,28800.0,b
2017-10-10 06:00:00,7200.0,1,7200.0,c
"""
TINY_TRAIN = "n_steps = 64\nbatch_size = 64\nn_epochs = 1\n"


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``: its kind, mode and (for files) content."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                         p.read_bytes() if p.is_file() else None)
    return out


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A working folder with an existing file, an empty folder and a read-only (0o555) folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep me\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "p.csv").write_text(PHILLY)
    (tmp_path / "tiny.toml").write_text(TINY_TRAIN)
    (tmp_path / "model.zip").write_text("not a model")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        yield tmp_path
    finally:
        ro.chmod(0o755)


# Each command with settings that would run quickly (and succeed) given good paths.
COMMANDS = {
    "compare": ["compare", "--jobs", "40", "--cluster", "small", "--quiet"],
    "sweep": ["sweep", "--policies", "fifo+fair", "--load", "2", "--seed", "1", "--no-ray", "--jobs", "40", "--quiet"],
    "trace-stats": ["trace-stats", "p.csv"],
    "train": ["train", "--config", "tiny.toml", "--timesteps", "64", "--n-envs", "1", "--eval-freq", "100000",
              "--env-kwargs", "num_jobs=20", "--eval-episodes", "1", "--no-progress", "--device", "cpu"],
    "evaluate": ["evaluate", "--model", "model.zip", "--episodes", "1", "--device", "cpu"],
}
JSON_COMMANDS = ("compare", "evaluate", "sweep")

# (flag, path, words the message must contain)
BAD_OUT = [
    ("afile", "afile is a file, not a folder"),
    ("afile/sub", "parent afile is a file"),
    ("afile/sub/deeper", "parent afile is a file"),
    ("ro", "folder ro is not writable"),
    ("ro/new/run", "folder ro is not writable"),
]
BAD_JSON = [
    ("adir", "is a folder, not a file"),
    ("afile/r.json", "parent afile is a file"),
    ("ro/r.json", "parent folder ro is not writable"),
    ("ro/missing/r.json", "folder ro is not writable"),
]


def assert_refused(code, out, err, flag, path, words):
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("synergy-gym "), err
    assert f"{flag} {path}:" in err and words in err, err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("path, words", BAD_OUT)
def test_bad_out_is_refused_before_any_work(place, capsys, command, path, words):
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS[command], "--out", path], capsys)
    assert_refused(code, out, err, "--out", path, words)
    assert snapshot(place) == before


@pytest.mark.parametrize("command", JSON_COMMANDS)
@pytest.mark.parametrize("path, words", BAD_JSON)
def test_bad_json_is_refused_before_any_work(place, capsys, command, path, words):
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS[command], "--out", "results", "--json", path], capsys)
    assert_refused(code, out, err, "--json", path, words)
    assert snapshot(place) == before


@pytest.mark.parametrize("command", JSON_COMMANDS)
def test_bad_json_is_refused_with_the_default_out_folder_too(place, capsys, command):
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS[command], "--json", "afile/r.json"], capsys)
    assert_refused(code, out, err, "--json", "afile/r.json", "parent afile is a file")
    assert snapshot(place) == before  # no runs/ folder either


@pytest.mark.parametrize("command", JSON_COMMANDS)
def test_json_may_not_be_the_out_folder(place, capsys, command):
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS[command], "--out", "results", "--json", "results"], capsys)
    assert_refused(code, out, err, "--json", "results", "is also the --out folder")
    assert snapshot(place) == before


@pytest.mark.parametrize("command, path, own", [
    ("compare", "adir/results.csv", "results.csv"), ("compare", "adir/workloads", "workloads/"),
    ("compare", "adir/workloads/r.json", "workloads/"), ("sweep", "adir/results.json", "results.json"),
    ("sweep", "adir/cells/r.json", "cells/"), ("sweep", "adir/avg_jct_vs_load.png", "avg_jct_vs_load.png"),
])
def test_json_may_not_be_one_of_the_commands_own_outputs(place, capsys, command, path, own):
    if path.count("/") == 2:  # inside an output folder, there from an earlier run
        (place / path).parent.mkdir()
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS[command], "--out", "adir", "--json", path], capsys)
    assert_refused(code, out, err, "--json", path, f"is the command's own {own} in --out adir")
    assert snapshot(place) == before


@pytest.mark.parametrize("command, inside", [("compare", "results.csv"), ("compare --plots", "jct_cdf.png"),
                                             ("sweep", "results.csv"), ("trace-stats", "trace_stats.png"),
                                             ("evaluate", "results.json"), ("train", "config.json")])
def test_a_folder_where_an_output_file_goes_is_refused(place, capsys, command, inside):
    (place / "adir" / inside).mkdir()
    before = snapshot(place)
    name, *flags = command.split()
    code, out, err = run_cli([*COMMANDS[name], *flags, "--out", "adir"], capsys)
    assert_refused(code, out, err, "--out", "adir", f"{Path('adir') / inside} is a folder")
    assert snapshot(place) == before


def test_compare_without_plots_leaves_a_folder_named_like_a_figure_alone(place, capsys):
    (place / "adir" / "avg_jct.png").mkdir()
    (place / "adir" / "avg_jct.png" / "mine.txt").write_text("kept")
    code, _, err = run_cli([*COMMANDS["compare"], "--out", "adir"], capsys)
    assert code == 0, err
    assert (place / "adir" / "avg_jct.png" / "mine.txt").read_text() == "kept"
    assert (place / "adir" / "results.csv").is_file()


@pytest.mark.parametrize("command, inside", [("compare", "workloads"), ("sweep", "cells"), ("train", "tb")])
def test_a_file_where_an_output_folder_goes_is_refused(place, capsys, command, inside):
    (place / "adir" / inside).write_text("x")
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS[command], "--out", "adir"], capsys)
    assert_refused(code, out, err, "--out", "adir", f"{Path('adir') / inside} is a file, not a folder")
    assert snapshot(place) == before


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_missing_parent_of_out_is_refused(place, capsys, command):
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS[command], "--out", "typo/run"], capsys)
    assert_refused(code, out, err, "--out", "typo/run", "its parent folder typo does not exist")
    assert snapshot(place) == before


def test_a_missing_folder_of_json_is_refused_unless_it_is_the_out_folder(place, capsys):
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS["compare"], "--out", "run", "--json", "typo/r.json"], capsys)
    assert_refused(code, out, err, "--json", "typo/r.json", "parent folder typo does not exist")
    assert snapshot(place) == before
    code, out, err = run_cli([*COMMANDS["compare"], "--out", "run", "--json", "run/r.json"], capsys)
    assert code == 0, err
    assert (place / "run/results.csv").is_file() and (place / "run/r.json").is_file()


def test_the_default_out_folder_is_created_with_its_parents(place, capsys):
    code, out, err = run_cli(COMMANDS["trace-stats"], capsys)
    assert code == 0, err
    assert len(list((place / "runs").glob("trace-stats-*/trace_stats.png"))) == 1


def test_an_existing_writable_out_folder_is_used(place, capsys):
    code, out, err = run_cli([*COMMANDS["trace-stats"], "--out", "adir"], capsys)
    assert code == 0, err
    assert (place / "adir" / "trace_stats.png").is_file()


@pytest.mark.parametrize("resume, words", [("missing.zip", "does not exist"),
                                           ("adir", "is a folder with no checkpoint to continue from")])
def test_train_checks_resume_before_writing_anything(place, capsys, resume, words):
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS["train"], "--resume", resume, "--out", "run"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"--resume '{resume}' {words}" in err, err
    assert snapshot(place) == before  # no run/config.json, run/versions.json


def test_train_library_call_checks_resume_too(place):
    from synergy_gym.agents.config import TrainConfig
    from synergy_gym.agents.train import train

    with pytest.raises(PathError, match="--resume 'missing.zip' does not exist"):
        train(TrainConfig(), out=place / "run", resume=Path("missing.zip"))
    assert not (place / "run").exists()


# -- the helpers -------------------------------------------------------------------------


def test_a_folder_without_write_bits_is_read_only_for_everyone(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    assert is_writable_dir(folder)
    folder.chmod(0o555)
    try:
        assert not is_writable_dir(folder)  # also when the tests run as root
    finally:
        folder.chmod(0o755)
    assert not is_writable_dir(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    assert not is_writable_dir(tmp_path / "file")


def test_check_output_dir_accepts_creatable_and_refuses_blocked_paths(tmp_path):
    assert check_output_dir(tmp_path / "new", "--out") == tmp_path / "new"
    with pytest.raises(PathError, match="its parent folder .*new does not exist"):
        check_output_dir(tmp_path / "new" / "deeper", "--out")
    assert check_output_dir(tmp_path / "new" / "deeper", "--out", create_parents=True) == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checking creates nothing
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    with pytest.raises(PathError, match="is a broken symbolic link"):
        check_output_dir(tmp_path / "link", "--out")
    with pytest.raises(PathError, match="parent .*link is a broken symbolic link"):
        check_output_dir(tmp_path / "link" / "x", "--out")
    (tmp_path / "f").write_text("")
    with pytest.raises(PathError, match=r"^--out .*f/a/b: parent .*f is a file, not a folder$"):
        check_output_dir(tmp_path / "f" / "a" / "b", "--out")


def test_check_output_file_and_check_input_file(tmp_path):
    with pytest.raises(PathError, match="parent folder .*x does not exist"):
        check_output_file(tmp_path / "x" / "r.json", "--json")
    out = ((tmp_path / "x", "--out"),)  # unless it goes into the command's own output folder
    assert check_output_file(tmp_path / "x" / "r.json", "--json", folders=out) == tmp_path / "x" / "r.json"
    (tmp_path / "old.json").write_text("{}")
    assert check_output_file(tmp_path / "old.json", "--json")  # replaced atomically: allowed
    with pytest.raises(PathError, match="is also the --out folder"):
        check_output_file(tmp_path / "o" / ".." / "o", "--json", folders=((tmp_path / "o", "--out"),))
    assert check_input_file(tmp_path / "old.json", "--resume") == tmp_path / "old.json"
    with pytest.raises(PathError, match="--resume .*nope.zip' does not exist"):
        check_input_file(tmp_path / "nope.zip", "--resume")


# -- --jobs -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["compare", "sweep"])
@pytest.mark.parametrize("jobs, words", [("99999999999", "--jobs 99999999999 exceeds the maximum of 1,000,000"),
                                         (str(MAX_JOBS + 1), f"--jobs {MAX_JOBS + 1} exceeds the maximum of 1,000,000"),
                                         ("0", "--jobs must be a positive integer, got 0"),
                                         ("-3", "--jobs must be a positive integer, got -3")])
def test_jobs_outside_the_limits_is_refused(place, capsys, command, jobs, words):
    argv = [a for a in COMMANDS[command] if a not in ("--jobs", "40")] + ["--jobs", jobs, "--out", "run"]
    before = snapshot(place)
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and err.count("\n") == 1 and words in err, err
    assert snapshot(place) == before


def test_job_count_limit_is_inclusive():
    assert MAX_JOBS == 1_000_000
    assert check_job_count(MAX_JOBS) == MAX_JOBS and check_job_count(1) == 1 and check_job_count(None) is None
    with pytest.raises(SynergyGymError, match="--jobs 1000001 exceeds the maximum of 1,000,000"):
        check_job_count(MAX_JOBS + 1)


def test_env_num_jobs_has_the_same_limit():
    import gymnasium as gym

    import synergy_gym  # noqa: F401

    with pytest.raises(SynergyGymError, match="num_jobs 1000001 exceeds the maximum of 1,000,000"):
        gym.make("Synergy-small-v0", num_jobs=MAX_JOBS + 1)
    gym.make("Synergy-small-v0", num_jobs=MAX_JOBS).close()


@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_help_states_the_jobs_limit(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "1,000,000" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("path, words", BAD_OUT)
def test_evaluate_refuses_a_bad_decisions_folder_before_any_work(place, capsys, path, words):
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS["evaluate"], "--out", "results", "--decisions", path], capsys)
    assert_refused(code, out, err, "--decisions", path, words)
    assert snapshot(place) == before


@pytest.mark.parametrize("path, words", [*BAD_JSON, ("results", "is also the --out folder")])
def test_evaluate_refuses_a_bad_jobs_csv_before_any_work(place, capsys, path, words):
    before = snapshot(place)
    code, out, err = run_cli([*COMMANDS["evaluate"], "--out", "results", "--jobs-csv", path], capsys)
    assert_refused(code, out, err, "--jobs-csv", path, words)
    assert snapshot(place) == before


# -- evaluate: the model's spaces against the environment's --------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A MaskablePPO run of 64 steps on 20-job episodes (max_queue 32, the default)."""
    root = tmp_path_factory.mktemp("tiny")
    (root / "tiny.toml").write_text(TINY_TRAIN)
    run = root / "run"
    argv = [*COMMANDS["train"], "--out", str(run)]
    argv[argv.index("tiny.toml")] = str(root / "tiny.toml")
    assert main(argv) == 0
    return run


@pytest.mark.slow
def test_evaluate_names_the_env_kwarg_that_changes_the_spaces(tiny_run, tmp_path, capsys):
    argv = ["evaluate", "--model", str(tiny_run / "best_model.zip"), "--episodes", "1", "--device", "cpu",
            "--baselines", "fifo+tune", "--quiet", "--out", str(tmp_path / "e")]
    code, out, err = run_cli([*argv, "--env-kwargs", "max_queue=8"], capsys)
    assert code == 2 and err.count("\n") == 1 and out == "", err
    # num_jobs differs too (20 in the run, the env's 300 here) but does not change the spaces: not named
    assert "trained with max_queue=32 but the environment has max_queue=8" in err and "num_jobs" not in err, err
    assert "observation 'action_mask': Box(161,) in the model vs Box(41,)" in err, err
    code, out, err = run_cli([*argv, "--env-kwargs", "num_jobs=20", "levels=grid"], capsys)
    assert code == 2 and "trained with levels=default but the environment has levels=grid" in err, err
    assert "Box(161,) in the model vs Box(1441,)" in err, err
    code, out, err = run_cli([*argv, "--env-kwargs", "num_jobs=20", "kernels=numpy"], capsys)
    assert code == 2 and err.count("\n") == 1 and "env kwarg 'kernels' was removed" in err, err
    assert not (tmp_path / "e").exists()
    # Same shapes on the large cluster: another environment, refused unless allowed, and then said.
    code, out, err = run_cli([*argv, "--env", "Synergy-v0", "--env-kwargs", "num_jobs=20"], capsys)
    assert code == 2 and "was trained on Synergy-small-v0" in err and "--allow-env-mismatch" in err, err
    assert not (tmp_path / "e").exists()
    code, out, err = run_cli([*argv, "--env", "Synergy-v0", "--env-kwargs", "num_jobs=20", "--allow-env-mismatch"], capsys)
    assert code == 0, err
    assert "note: --model" in err and "evaluating it on Synergy-v0" in err, err
    assert (tmp_path / "e" / "results.csv").is_file()


@pytest.mark.slow
def test_evaluate_refuses_normalisation_statistics_of_another_shape(tiny_run, tmp_path, capsys):
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    from synergy_gym.env.observation import SLOT_FEATURES

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    stats = run / "best_vecnormalize.pkl"
    vec_norm = pickle.loads(stats.read_bytes())
    vec_norm.obs_rms["slots"] = RunningMeanStd(shape=(8 * len(SLOT_FEATURES),))  # statistics of an 8-slot env (flat)
    vec_norm.venv, vec_norm.class_attributes, vec_norm.returns = None, {}, None  # VecNormalize.__getstate__ drops these
    stats.write_bytes(pickle.dumps(vec_norm))
    code, out, err = run_cli(["evaluate", "--model", str(run / "best_model.zip"), "--episodes", "1",
                              "--device", "cpu", "--out", str(tmp_path / "e")], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "normalisation statistics do not fit" in err and "Box(88,) in the statistics vs Box(352,)" in err, err
    assert not (tmp_path / "e").exists()


@pytest.mark.slow
def test_evaluate_checks_out_and_json_before_loading_the_model(tiny_run, place, capsys):
    before = snapshot(place)
    code, out, err = run_cli(["evaluate", "--model", str(tiny_run / "best_model.zip"), "--episodes", "1",
                              "--device", "cpu", "--out", "ro/e"], capsys)
    assert_refused(code, out, err, "--out", "ro/e", "folder ro is not writable")
    assert snapshot(place) == before
