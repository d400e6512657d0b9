"""The ``synergy-gym`` command: outputs, and one-line errors that write nothing."""

import json
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from synergy_gym.cli import main

SMALL = ["--jobs", "80", "--load", "30", "--quiet"]
JSON_FIELDS = {"policy", "load", "seed", "mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h", "jobs_measured", "wall_s"}


def test_compare_writes_table_csv_plots_and_json(tmp_path, capsys):
    out, js = tmp_path / "out", tmp_path / "r.json"
    assert main(["compare", *SMALL, "--out", str(out), "--json", str(js), "--plots"]) == 0
    printed = capsys.readouterr().out
    assert "fifo+tune" in printed and "vs fair" in printed
    for name in ("results.csv", "jobs.csv", "avg_jct.png", "jct_cdf.png", "workloads/load30_seed42.csv"):
        assert (out / name).is_file(), name
    rows = json.loads(js.read_text())["results"]
    assert [r["policy"] for r in rows] == ["fifo+fair", "fifo+greedy", "fifo+tune"]
    assert all(JSON_FIELDS <= set(r) for r in rows)
    assert all(r["jobs_measured"] == 40 and r["load"] == 30 and r["seed"] == 42 for r in rows)
    assert rows[0]["speedup_vs_fair"] == 1.0
    jobs = pd.read_csv(out / "jobs.csv")
    assert len(jobs) == 3 * 80 and jobs["finish_s"].notna().all()  # --jobs N: the run ends when all N finish
    # The saved workload replays to the same numbers.
    replay = tmp_path / "replay.json"
    assert main(["compare", "--quiet", "--policies", "fifo+tune", "--workload", str(out / "workloads/load30_seed42.csv"),
                 "--out", str(tmp_path / "out2"), "--json", str(replay)]) == 0
    again = json.loads(replay.read_text())["results"][0]
    assert again["mean_jct_h"] == pytest.approx(rows[2]["mean_jct_h"])
    assert again["load"] is None and again["seed"] is None


def test_compare_over_several_loads_and_seeds(tmp_path):
    js = tmp_path / "r.json"
    args = ["compare", "--jobs", "40", "--load", "10,20", "--seed", "1..2", "--policies", "fifo+fair,srtf+tune",
            "--quiet", "--out", str(tmp_path / "o"), "--json", str(js)]
    assert main(args) == 0
    rows = json.loads(js.read_text())["results"]
    assert {(r["policy"], r["load"], r["seed"]) for r in rows} == {
        (p, load, s) for p in ("fifo+fair", "srtf+tune") for load in (10.0, 20.0) for s in (1, 2)
    }
    srtf = [r for r in rows if r["policy"] == "srtf+tune"]
    assert all(r["speedup_vs_fair"] is not None for r in srtf)  # against fifo+fair when srtf+fair is absent


def test_compare_on_a_philly_style_trace(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(
        "timestamp,duration,num_gpus\n"
        + "".join(f"2017-10-09 06:{m:02d}:00,{3600 * (m + 1)},{1 if m % 3 else 2}\n" for m in range(30))
    )
    js = tmp_path / "r.json"
    assert main(["compare", "--quiet", "--trace", str(trace), "--out", str(tmp_path / "o"), "--json", str(js)]) == 0
    rows = json.loads(js.read_text())["results"]
    assert all(r["jobs_measured"] == 15 for r in rows)


def _write(path, text):
    path.write_text(text)
    return str(path)


HEADER = "job_id,model,gpus,arrival_s,total_iters,in_measured_window\n"


def _trace(d):
    return _write(d / "t.csv", "timestamp,duration,num_gpus\n"
                  + "".join(f"2017-10-09 06:{m:02d}:00,{3600 * (m + 1)},1\n" for m in range(30)))


@pytest.mark.parametrize(
    "case, extra, message",
    [
        ("missing column",
         lambda d: ["--workload", _write(d / "w.csv", "job_id,model,gpus,total_iters,in_measured_window\n0,gnmt,1,5,1\n")],
         "missing column(s) arrival_s"),
        ("negative duration", lambda d: ["--workload", _write(d / "w.csv", HEADER + "0,gnmt,1,0,-100,1\n")],
         "job 0: total_iters=-100 must be a positive integer"),
        ("unknown model", lambda d: ["--workload", _write(d / "w.csv", HEADER + "0,bert,1,0,100,1\n")],
         "unknown model 'bert'"),
        ("too many GPUs", lambda d: ["--workload", _write(d / "w.csv", HEADER + "0,gnmt,129,0,100,1\n")],
         "job 0 asks for 129 GPUs but the cluster has 128"),
        ("malformed TOML", lambda d: ["--cluster", _write(d / "c.toml", "[cluster\nnum_servers=2\n")], "not valid TOML"),
        ("zero GPUs per server", lambda d: ["--cluster", _write(d / "c.toml", "gpus_per_server = 0\n")],
         "gpus_per_server must be a positive integer, got 0"),
        ("unknown policy", lambda d: ["--policies", "fifo+tune,fifo+magic"], "unknown policy 'fifo+magic'; valid:"),
        ("empty seed range", lambda d: ["--seed", "5..2"], "the seed range is empty"),
        ("bad load", lambda d: ["--load", "-3"], "values must be positive numbers"),
        ("load below the minimum", lambda d: ["--load", "9,1e-7"],
         "--load '9,1e-7': 1e-7 is below the minimum of 1e-06 jobs an hour"),
        ("sampled load below the minimum", lambda d: ["--trace", _trace(d), "--trace-mode", "sampled", "--load", "5e-7"],
         "--load '5e-7': 5e-7 is below the minimum of 1e-06 jobs an hour"),
        ("replay with load", lambda d: ["--workload", _write(d / "w.csv", HEADER + "0,gnmt,1,0,100,1\n"), "--load", "5"],
         "--workload fixes the jobs; --load does not apply"),
        ("missing workload file", lambda d: ["--workload", str(d / "nope.csv")], "does not exist"),
        ("repeated load", lambda d: ["--load", "9,5,9"], "--load '9,5,9': 9 is given twice"),
        ("equal loads", lambda d: ["--load", "9,9.0"], "--load '9,9.0': 9.0 is the same number as 9"),
        ("scale of sampled arrivals", lambda d: ["--trace", _trace(d), "--trace-mode", "sampled", "--arrival-scale", "0.5"],
         "--trace-mode sampled draws its arrivals at --load; --arrival-scale does not apply"),
        ("infinite arrival scale", lambda d: ["--trace", _trace(d), "--arrival-scale", "inf"],
         "--arrival-scale inf: must be a positive finite number"),
        ("nan arrival scale", lambda d: ["--trace", _trace(d), "--arrival-scale", "nan"], "--arrival-scale nan: must be"),
        ("negative round", lambda d: ["--round-s", "-5"], "--round-s -5.0: must be a positive finite number of seconds"),
        ("infinite round", lambda d: ["--round-s", "inf"], "--round-s inf: must be a positive finite number of seconds"),
        ("zero arrival scale", lambda d: ["--trace", _trace(d), "--arrival-scale", "0"], "--arrival-scale 0.0: must be"),
        ("noise without profiling", lambda d: ["--profile-noise", "0.05"],
         "--profile-noise 0.05 applies only with --sensitivity profiled"),
    ],
)
def test_bad_input_gives_one_line_error_and_writes_nothing(tmp_path, capsys, case, extra, message):
    out, js = tmp_path / "out", tmp_path / "r.json"
    code = main(["compare", "--quiet", "--out", str(out), "--json", str(js), *extra(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, case
    assert err.count("\n") == 1 and err.startswith("synergy-gym compare: error: "), err
    assert message in err
    assert "Traceback" not in err
    assert not out.exists() and not js.exists()


def test_argument_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["compare", "--jobs", "many"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jobs: invalid int value: 'many'" in err


@pytest.mark.skipif(shutil.which("synergy-gym") is None, reason="the console script is not installed")
def test_console_script_and_module_entry_point(tmp_path):
    done = subprocess.run(["synergy-gym", "compare", "--policies", "nope"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown policy 'nope'" in done.stderr
    helped = subprocess.run([sys.executable, "-m", "synergy_gym", "compare", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "--workload" in helped.stdout


def test_profile_noise_applies_to_the_profiled_runs(tmp_path):
    js = tmp_path / "r.json"
    args = ["compare", "--quiet", "--jobs", "40", "--cluster", "small", "--policies", "fifo+tune",
            "--out", str(tmp_path / "o"), "--json", str(js), "--sensitivity", "true,profiled", "--profile-noise", "0.05"]
    assert main(args) == 0
    rows = json.loads(js.read_text())["results"]
    assert [r["sensitivity"] for r in rows] == ["true", "profiled"]
