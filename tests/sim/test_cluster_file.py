"""Issue 24: a cluster TOML file that cannot be used gets one line that starts with its path."""

import tracemalloc

import pytest

from synergy_gym.cli import main
from synergy_gym.errors import ConfigError
from synergy_gym.sim.cluster import ClusterSpec, load_cluster

FIELDS = "num_servers, gpus_per_server, cpus_per_server, mem_gb_per_server (and optionally storage_mb_s_per_server)"


def _write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@pytest.mark.parametrize(
    "content, message",
    [
        (bytes(range(128, 256)), "line 1: not UTF-8 text (byte 0x80); is it a binary file?"),
        (b"num_servers = 2\n# caf\xe9\n", "line 2: not UTF-8 text (byte 0xe9)"),
        ("num_servers = 2\n".encode("utf-16"), "line 1: UTF-16 text"),
        (b"num_servers = 2\x00\n", "line 1: not a text file (it holds a NUL byte"),
        ("[cluster\nnum_servers = 2\n", "not valid TOML: Expected ']' at the end of a table declaration (at line 1, col"),
        ("num_servers = \n", "not valid TOML: Invalid value (at line 1, column 15)"),
        ("", f"sets no cluster field; expected {FIELDS}, at top level or under [cluster]"),
        ("# nothing but a comment\n", "sets no cluster field; expected num_servers"),
        ("[cluster]\n", "sets no cluster field; expected num_servers"),
        ("seed = 3\n[cluster]\nnum_servers = 2\n", "key(s) seed outside [cluster]; put every cluster field under it"),
        ("cluster = 4\n", "[cluster] must be a table"),
        ("num_servers = '4'\n", "num_servers must be a positive integer, got '4'"),
        ("num_servers = true\n", "num_servers must be a positive integer, got True"),
        ("num_servers = [4]\n", "num_servers must be a positive integer, got [4]"),
        ("num_servers = 2.5\n", "num_servers must be a positive integer, got 2.5"),
        ("num_servers = inf\n", "num_servers must be a positive integer, got inf"),
        ("num_servers = 1e400\n", "num_servers must be a positive integer, got inf"),
        ("cpus_per_server = nan\n", "cpus_per_server must be a positive number, got nan"),
        ("mem_gb_per_server = -5\n", "mem_gb_per_server must be a positive number, got -5"),
        ("storage_mb_s_per_server = -inf\n", "storage_mb_s_per_server must be a positive number, got -inf"),
        ("[cluster]\ngpus_per_servr = 8\n", "unknown cluster field 'gpus_per_servr'; valid:"),
        ("[cluster.servers]\nnum = 8\n", "unknown cluster field 'servers'"),
    ],
)
def test_a_bad_cluster_file_gets_one_line_naming_it(tmp_path, content, message):
    path = _write(tmp_path / "c.toml", content)
    with pytest.raises(ConfigError) as e:
        load_cluster(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_partial_file_still_takes_the_defaults(tmp_path):
    assert load_cluster(_write(tmp_path / "c.toml", "\ufeffnum_servers = 3\n")) == ClusterSpec(num_servers=3)


def test_a_huge_cluster_loads_without_a_per_server_cost(tmp_path):
    path = _write(tmp_path / "c.toml", "[cluster]\nnum_servers = 100_000_000\n")
    tracemalloc.start()
    spec = load_cluster(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert spec.total_gpus == 800_000_000
    assert peak < 1_000_000  # no per-server list: a per-server cost would be gigabytes


def test_compare_refuses_an_empty_cluster_file_in_one_line(tmp_path, capsys):
    path = _write(tmp_path / "c.toml", "")
    out = tmp_path / "out"
    assert main(["compare", "--quiet", "--jobs", "10", "--cluster", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"synergy-gym compare: error: {path}: sets no cluster field") and err.count("\n") == 1
    assert not out.exists()
