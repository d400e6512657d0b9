import pytest

from synergy_gym import ClusterSpec, ConfigError, UnknownNameError, cluster_preset, load_cluster


def test_default_cluster_is_the_papers():
    c = ClusterSpec()
    assert (c.num_servers, c.gpus_per_server, c.cpus_per_server, c.mem_gb_per_server) == (16, 8, 24.0, 500.0)
    assert c.total_gpus == 128
    assert (c.fair_cpus_per_gpu, c.fair_mem_gb_per_gpu) == (3.0, 62.5)
    assert cluster_preset("default") == c


def test_presets_and_keyword_arguments():
    assert cluster_preset("small").total_gpus == 32
    assert cluster_preset("large").total_gpus == 512
    assert ClusterSpec(num_servers=2, cpus_per_server=32).fair_cpus_per_gpu == 4.0
    with pytest.raises(UnknownNameError, match="valid: default, small, large"):
        cluster_preset("huge")


@pytest.mark.parametrize(
    "field, value",
    [
        ("num_servers", 0),
        ("num_servers", -3),
        ("gpus_per_server", 8.5),
        ("gpus_per_server", 0),
        ("gpus_per_server", True),
        ("cpus_per_server", 0),
        ("cpus_per_server", -24),
        ("mem_gb_per_server", float("nan")),
        ("mem_gb_per_server", "500"),
    ],
)
def test_invalid_capacities_name_the_field(field, value):
    with pytest.raises(ConfigError, match=f"^{field} must be"):
        ClusterSpec(**{field: value})


def test_integral_float_gpus_are_accepted_as_integers():
    assert ClusterSpec(gpus_per_server=4.0).gpus_per_server == 4


def test_load_cluster_from_toml_with_or_without_table(tmp_path):
    a = tmp_path / "a.toml"
    a.write_text("[cluster]\nnum_servers = 2\ngpus_per_server = 4\ncpus_per_server = 16\nmem_gb_per_server = 256\n")
    b = tmp_path / "b.toml"
    b.write_text("num_servers = 3\n")
    assert load_cluster(a) == ClusterSpec(2, 4, 16, 256)
    assert load_cluster(str(b)) == ClusterSpec(num_servers=3)
    assert load_cluster("small") == cluster_preset("small")


def test_load_cluster_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster\nnum_servers = 2\n")
    with pytest.raises(ConfigError, match="not valid TOML") as e:
        load_cluster(bad)
    assert "\n" not in str(e.value)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[cluster]\nnum_gpus = 2\n")
    with pytest.raises(ConfigError, match="unknown cluster field 'num_gpus'"):
        load_cluster(unknown)
    for values in (5, [("num_servers", 2)]):  # was: TypeError, and "unknown cluster field ('num_servers', 2)"
        with pytest.raises(ConfigError, match=r"^cluster: a cluster must be a mapping of its fields, got "):
            ClusterSpec.from_mapping(values)
    zero = tmp_path / "zero.toml"
    zero.write_text("[cluster]\ngpus_per_server = 0\n")
    with pytest.raises(ConfigError, match="gpus_per_server must be a positive integer, got 0"):
        load_cluster(zero)
    with pytest.raises(ConfigError, match="neither a preset"):
        load_cluster(tmp_path / "missing.toml")
