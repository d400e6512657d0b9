"""Issue 10: what the command line says about Ctrl-C, bad input files, ``--split``, no command and ``--version``."""

import warnings
from importlib.metadata import entry_points, version

import pytest

import synergy_gym.baselines.sweep
from synergy_gym.cli import main
from synergy_gym.errors import WorkloadError
from synergy_gym.sim.model_mix import ModelAssigner, parse_split
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.traces.replay import read_workload_csv

HEADER = "job_id,model,gpus,arrival_s,total_iters,in_measured_window\n"
SWEEP = ["sweep", "--policies", "fifo+fair", "--load", "40", "--seed", "0..2", "--jobs", "12", "--cluster", "small",
         "--no-ray", "--quiet"]


def _write(path, text):
    path.write_text(text)
    return str(path)


def _one_line_error(capsys, command):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"synergy-gym {command}: error: "), err
    assert "Traceback" not in err and "warning" not in err
    return err


# -- 1. Ctrl-C in a sweep says what it kept ------------------------------------------------


def _interrupt_after_first_cell(monkeypatch):
    real, calls = synergy_gym.baselines.sweep.run_cell, []

    def run_cell(cell):
        calls.append(cell.key)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(cell)

    monkeypatch.setattr(synergy_gym.baselines.sweep, "run_cell", run_cell)


def test_interrupted_sweep_says_how_many_cells_are_kept_and_resumes(tmp_path, capsys, monkeypatch):
    out = tmp_path / "s"
    _interrupt_after_first_cell(monkeypatch)
    assert main([*SWEEP, "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err == f"synergy-gym sweep: interrupted; 1 of 3 cells kept in {out / 'cells'}; re-run the same command to resume\n"
    kept = list((out / "cells").glob("*.json"))
    assert len(kept) == 1 and not (out / "results.csv").exists()
    stamp = kept[0].stat().st_mtime_ns
    monkeypatch.undo()
    assert main([*SWEEP, "--out", str(out)]) == 0  # the same command finishes the sweep
    assert len(list((out / "cells").glob("*.json"))) == 3 and kept[0].stat().st_mtime_ns == stamp


def test_interrupted_sweep_without_out_names_the_folder_to_resume_with(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _interrupt_after_first_cell(monkeypatch)
    assert main(SWEEP) == 130
    err = capsys.readouterr().err
    [folder] = (tmp_path / "runs").iterdir()
    assert f"1 of 3 cells kept in {folder.relative_to(tmp_path) / 'cells'}" in err
    assert f"re-run it with --out {folder.relative_to(tmp_path)} to resume" in err and "nothing written" not in err


# -- 2. gpus=0: the error, without a numpy warning before it --------------------------------


def test_zero_gpus_is_an_error_without_a_divide_by_zero_warning(tmp_path, capsys):
    csv = _write(tmp_path / "w.csv", "job_id,model,gpus,arrival_s,total_iters,cpu_demand,mem_demand_gb,in_measured_window\n"
                 "0,gnmt,1,0,100,3,50,1\n7,gnmt,0,10,100,0,50,1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(WorkloadError, match="job 7: gpus=0 must be a positive integer"):
            read_workload_csv(csv)
        assert main(["compare", "--quiet", "--workload", csv, "--out", str(tmp_path / "o")]) == 2
    assert "job 7: gpus=0 must be a positive integer" in _one_line_error(capsys, "compare")
    assert not (tmp_path / "o").exists()


# -- 3. a folder where a file is expected --------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["compare", "--workload", "{d}"], "workload file '{d}' is a folder, not a file"),
        (["compare", "--trace", "{d}"], "trace '{d}' is a folder without pai_job_table.csv"),
        (["compare", "--trace", "{d}", "--trace-format", "philly-csv"], "trace file '{d}' is a folder, not a file"),
        (["compare", "--trace", "{d}", "--trace-format", "philly-json"], "trace file '{d}' is a folder, not a file"),
        (["compare", "--cluster", "{d}"], "--cluster '{d}' is a folder, not a TOML file"),
        (["trace-stats", "{d}"], "trace '{d}' is a folder without pai_job_table.csv"),
        (["trace-stats", "{d}", "--format", "helios"], "trace file '{d}' is a folder, not a file"),
        (["train", "--config", "{d}"], "config file '{d}' is a folder, not a file"),
    ],
)
def test_a_folder_given_as_a_file_is_called_a_folder(tmp_path, capsys, args, message):
    folder = tmp_path / "inputs"
    folder.mkdir()
    out = tmp_path / "o"
    args = [a.format(d=folder) for a in args]
    assert main([*args, "--out", str(out)]) == 2
    err = _one_line_error(capsys, args[0])
    assert message.format(d=folder) in err and "does not exist" not in err
    assert not out.exists()


def test_a_missing_file_still_does_not_exist(tmp_path, capsys):
    assert main(["compare", "--quiet", "--workload", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o")]) == 2
    assert f"workload file '{tmp_path / 'nope.csv'}' does not exist" in _one_line_error(capsys, "compare")


def test_an_alibaba_trace_folder_is_still_read(tmp_path, capsys):
    folder = tmp_path / "pai"
    folder.mkdir()
    _write(folder / "pai_job_table.csv", "job_name,inst_id,user,status,start_time,end_time\n"
           "j1,1,u,Terminated,1000,8200\nj2,2,u,Terminated,2000,12800\n")
    _write(folder / "pai_task_table.csv", "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,"
           "plan_gpu,gpu_type\nj1,worker,2,Terminated,1000,8200,600,30,100,V100\nj2,tf,1,Terminated,2000,12800,800,60,50,T4\n")
    assert main(["trace-stats", str(folder), "--out", str(tmp_path / "o")]) == 0
    assert "jobs: 2" in capsys.readouterr().out
    assert (tmp_path / "o" / "trace_stats.png").is_file()


# -- 4. nan in a workload is not a number, not an empty cell ---------------------------------


def test_nan_in_a_workload_is_reported_as_not_a_number(tmp_path, capsys):
    csv = _write(tmp_path / "w.csv", HEADER + "0,gnmt,1,0,100,1\n41,gnmt,1,nan,100,1\n")
    assert main(["compare", "--quiet", "--workload", csv, "--out", str(tmp_path / "o")]) == 2
    err = _one_line_error(capsys, "compare")
    assert f"{csv}: row 3 (job 41): column arrival_s is not a number: 'nan'" in err and "empty" not in err
    no_id = _write(tmp_path / "v.csv", HEADER + "NaN,gnmt,1,0,100,1\n")
    with pytest.raises(WorkloadError, match="row 2: column job_id is not a number: 'NaN'"):
        read_workload_csv(no_id)
    optional = _write(tmp_path / "o.csv", "job_id,model,gpus,arrival_s,total_iters,in_measured_window,iter_time_s\n"
                      "5,gnmt,1,0,100,1,nan\n")
    with pytest.raises(WorkloadError, match=r"row 2 \(job 5\): column iter_time_s is not a number"):
        read_workload_csv(optional)


def test_an_empty_cell_is_refused_and_a_missing_optional_column_is_the_default(tmp_path):
    with pytest.raises(WorkloadError, match="row 3: column arrival_s is empty"):
        read_workload_csv(_write(tmp_path / "w.csv", HEADER + "0,gnmt,1,0,100,1\n1,gnmt,1,,100,1\n"))
    # An optional column that is there must be filled in: an empty iter_time_s is not "the model's".
    with pytest.raises(WorkloadError, match="row 2: column iter_time_s is empty"):
        read_workload_csv(_write(tmp_path / "d.csv", "job_id,model,gpus,arrival_s,total_iters,in_measured_window,"
                                 "iter_time_s\n0,gnmt,1,0,100,1,\n"))
    w = read_workload_csv(_write(tmp_path / "o.csv", HEADER + "0,gnmt,1,0,100,1\n"))
    assert w.iter_time_s[0] == w.zoo[w.model[0]].iter_time_s


# -- 5. errors about a file's content name the file -----------------------------------------


def test_too_many_gpus_names_the_workload_file(tmp_path, capsys):
    csv = _write(tmp_path / "big.csv", HEADER + "0,gnmt,1,0,100,1\n59,gnmt,999,5,100,1\n")
    assert main(["compare", "--quiet", "--workload", csv, "--out", str(tmp_path / "o")]) == 2
    assert f"{csv}: job 59 asks for 999 GPUs but the cluster has 128" in _one_line_error(capsys, "compare")


def test_too_many_gpus_names_the_trace_file(tmp_path, capsys):
    trace = _write(tmp_path / "t.csv", "timestamp,duration,num_gpus\n"
                   + "".join(f"2017-10-09 06:{m:02d}:00,{3600 * (m + 1)},{64 if m == 3 else 1}\n" for m in range(6)))
    assert main(["compare", "--quiet", "--trace", trace, "--cluster", "small", "--out", str(tmp_path / "o")]) == 2
    assert f"{trace}: job 3 asks for 64 GPUs but the cluster has 32" in _one_line_error(capsys, "compare")


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[cluster]\nnum_servers = -2\n", "num_servers must be a positive integer, got -2"),
        ("cpus_per_server = 'many'\n", "cpus_per_server must be a positive number, got 'many'"),
        ("gpus_per_servr = 8\n", "unknown cluster field 'gpus_per_servr'"),
        ("[cluster\n", "not valid TOML"),
    ],
)
def test_cluster_file_errors_name_the_file(tmp_path, capsys, toml, message):
    path = _write(tmp_path / "c.toml", toml)
    assert main(["compare", "--quiet", "--cluster", path, "--out", str(tmp_path / "o")]) == 2
    assert f"{path}: {message}" in _one_line_error(capsys, "compare")


# -- 6. --split takes percentages that sum to 100 -------------------------------------------


@pytest.mark.parametrize(
    "split, message",
    [
        ("50/60/10", "--split '50/60/10': the percentages must sum to 100, got 120"),
        ("0.2/0.7/0.1", "--split '0.2/0.7/0.1': the percentages must sum to 100, got 1"),
        ("120/-10/-10", "--split '120/-10/-10': each percentage must be a number ≥ 0"),
        ("nan/50/50", "each percentage must be a number ≥ 0"),
        ("50/50", "--split '50/50' must be three numbers like 20/70/10"),
    ],
)
def test_split_must_be_percentages_summing_to_100(tmp_path, capsys, split, message):
    assert main(["compare", "--quiet", "--jobs", "10", "--split", split, "--out", str(tmp_path / "o")]) == 2
    assert message in _one_line_error(capsys, "compare")
    assert not (tmp_path / "o").exists()


def test_split_accepts_100_within_rounding_and_the_api_still_takes_weights():
    assert parse_split("33.33/33.33/33.34") == (33.33, 33.33, 33.34)
    assert parse_split("20,70,10.005") == (20.0, 70.0, 10.005)
    zoo = ModelZoo.default()
    as_weights = ModelAssigner(zoo, (1, 2, 1)).assign(40)
    as_percent = ModelAssigner(zoo, (25, 50, 25)).assign(40)
    assert as_weights.tolist() == as_percent.tolist()


# -- 7, 8. no command, --version -------------------------------------------------------------


def test_no_command_lists_every_command_with_its_help(capsys):
    assert main([]) == 0  # was 2, the list on stderr: `synergy-gym | less` showed nothing
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = captured.out.splitlines()
    assert lines[0].startswith("usage: synergy-gym")
    names = sorted(ep.name for ep in entry_points(group="synergy_gym.commands"))
    assert {"compare", "sweep", "trace-stats", "train", "evaluate"} <= set(names)
    listed = {line.split()[0]: line.split(None, 1)[1] for line in lines if line.startswith("  ")}
    assert sorted(listed) == names
    assert all(len(text) > 10 for text in listed.values())


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"synergy-gym {version('synergy-gym')}\n"


@pytest.mark.parametrize("argv, expected", [
    (["train", "--n-steps", "256"], "synergy-gym train: error: unrecognized arguments: --n-steps 256 (n_steps: a "
     "setting of a --config file (TOML or YAML), e.g. n_steps = …, with no option of its own)"),
    (["train", "--bogus"], "synergy-gym train: error: unrecognized arguments: --bogus"),
    (["compare", "--bogus", "1"], "synergy-gym compare: error: unrecognized arguments: --bogus 1"),
    (["--bogus"], "synergy-gym: error: unrecognized arguments: --bogus"),
])
def test_an_unknown_argument_is_refused_by_its_command_and_a_config_only_setting_says_where_it_goes(
        argv, expected, capsys):
    # The top-level parser refused them as "synergy-gym: error: …", naming no command and no way to set n_steps.
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines() == [expected]


def test_a_policy_or_sensitivity_named_twice_runs_once_as_docs_cli_says(tmp_path, capsys):
    argv = ["compare", "--jobs", "10", "--cluster", "small", "--quiet", "--out", str(tmp_path / "o")]
    assert main([*argv, "--policies", "fifo+tune,fifo+tune", "--sensitivity", "true,true"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("fifo+tune")]
    assert len(rows) == 1
