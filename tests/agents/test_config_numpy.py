"""``TrainConfig`` takes NumPy's numbers and bools where it takes Python's, stores them as Python's, and a run's
``config.json`` is written – or refused in one line, before the run folder is made – whatever the config holds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from synergy_gym import SyntheticWorkload
from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.run_folder import write_run_records
from synergy_gym.errors import ConfigError

NUMPY_SETTINGS = {
    "learning_rate": (np.float32(1e-3), float), "gamma": (np.float64(0.99), float), "timesteps": (np.int64(1000), int),
    "target_kl": (np.float64(0.01), float), "ent_coef_final": (np.float32(0.0), float), "seed": (np.uint8(3), int),
    "eval_seed_base": (np.int64(5), int), "shared_workload": (np.bool_(True), bool),
    "normalize_obs": (np.bool_(False), bool), "progress_bar": (np.bool_(True), bool), "algo": (np.str_("ppo"), str),
}


@pytest.mark.parametrize("name", sorted(NUMPY_SETTINGS))
def test_numpy_values_are_stored_as_python_values(name):
    value, kind = NUMPY_SETTINGS[name]
    cfg = TrainConfig(**{name: value})  # np.bool_ was refused ("must be true or false")
    assert type(getattr(cfg, name)) is kind and getattr(cfg, name) == value


@pytest.mark.parametrize("arch", [[np.int64(64), np.int64(32)], (64, 32), np.array([64, 32]), [np.int32(64), 32]])
def test_net_arch_takes_tuples_arrays_and_numpy_integers(arch):
    assert TrainConfig(net_arch=arch).net_arch == [64, 32]


@pytest.mark.parametrize("arch", [[64.0], [0], [True], "64", [64, "32"], np.array([[64]])])
def test_net_arch_still_refuses_what_is_no_layer_size(arch):
    with pytest.raises(ConfigError, match="net_arch must be a list of positive layer sizes"):
        TrainConfig(net_arch=arch)


def test_env_kwargs_numpy_values_are_python_values_nested_too():
    cfg = TrainConfig(env_kwargs={"num_jobs": np.int64(10), "class_split": [np.int64(20), np.float32(70), 10],
                                  "jobs_per_hour": np.float64(9.0), "multigpu": np.bool_(True)})
    assert cfg.env_kwargs == {"num_jobs": 10, "class_split": [20, 70.0, 10], "jobs_per_hour": 9.0, "multigpu": True}
    assert type(cfg.env_kwargs["num_jobs"]) is int and type(cfg.env_kwargs["class_split"][1]) is float
    assert TrainConfig(env_kwargs={"class_split": np.array([20, 70, 10])}).env_kwargs == {"class_split": [20, 70, 10]}


def test_reference_baselines_take_a_tuple():
    assert TrainConfig(reference_baselines=("fifo+tune",)).reference_baselines == ["fifo+tune"]


def test_a_config_of_numpy_values_writes_the_config_json_of_the_same_python_values(tmp_path):
    """This crashed: ``TypeError: Object of type float32 is not JSON serializable``, leaving an empty run folder."""
    cfg = TrainConfig(learning_rate=np.float32(1e-3), env_kwargs={"num_jobs": np.int64(10)})
    write_run_records(tmp_path / "run", cfg, "cpu")
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["env_kwargs"] == {"num_jobs": 10} and saved["learning_rate"] == float(np.float32(1e-3))
    later = TrainConfig()
    later.env_kwargs = {"num_jobs": np.int64(12)}  # set after construction: written as Python's too
    write_run_records(tmp_path / "later", later, "cpu")
    assert json.loads((tmp_path / "later" / "config.json").read_text())["env_kwargs"] == {"num_jobs": 12}


@pytest.mark.parametrize(("env_kwargs", "words"), [
    ({"workload": SyntheticWorkload(num_jobs=3).build()}, ["env_kwargs 'workload' is a Workload", "write_workload_csv"]),
    ({"cluster": {"num_servers": {1, 2}}}, ["env_kwargs 'cluster' is a dict"]),
])
def test_a_setting_config_json_cannot_hold_is_refused_before_the_run_folder_is_made(tmp_path, env_kwargs, words):
    cfg = TrainConfig(env_kwargs=env_kwargs)
    with pytest.raises(ConfigError) as e:
        write_run_records(tmp_path / "run", cfg, "cpu")
    assert "\n" not in str(e.value) and "config.json cannot hold" in str(e.value)
    for word in words:
        assert word in str(e.value)
    assert not (tmp_path / "run").exists()


def test_train_refuses_an_unsavable_setting_before_writing_anything(tmp_path):
    from synergy_gym.agents.train import train

    cfg = TrainConfig(env_kwargs={"workload": SyntheticWorkload(num_jobs=4, seed=1).build()}, timesteps=8, n_envs=1,
                      n_steps=8, batch_size=8, reference_baselines=[], relative_to="fifo+tune", device="cpu",
                      progress_bar=False)
    with pytest.raises(ConfigError, match="env_kwargs 'workload' is a Workload"):
        train(cfg, out=tmp_path / "run", log=None)
    assert not (tmp_path / "run").exists()
