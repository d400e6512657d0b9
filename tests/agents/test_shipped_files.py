"""What an installed package (not a checkout) offers and refuses: the reference training configs by name
(``--config small_scarce``), and no export into the installed package by default.

Before, ``train --config agents/configs/small_scarce.toml`` – the docs' command – failed outside a checkout with "does
not exist" and the wheel had no configs; ``export_pretrained`` without ``--dest`` wrote into site-packages, silently
replacing a shipped policy of the same name and outliving ``pip uninstall``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from synergy_gym.agents import export_pretrained as export_module
from synergy_gym.agents.config import TrainConfig, load_config_file
from synergy_gym.agents.train_options import config_from_args, shipped_configs
from synergy_gym.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_configs_are_the_repositorys():
    assert sorted(shipped_configs()) == sorted(p.stem for p in (REPO / "agents" / "configs").glob("*.toml"))
    assert "small_scarce" in shipped_configs()


def _train_args(config: str) -> argparse.Namespace:
    from synergy_gym.cli.command import build_parser

    return build_parser().parse_args(["train", "--config", config])


def test_config_takes_a_shipped_configs_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config_from_args(_train_args("small_scarce"))
    assert cfg == TrainConfig.from_mapping(load_config_file(REPO / "agents" / "configs" / "small_scarce.toml"))


def test_a_missing_config_path_that_names_a_shipped_config_says_how_to_name_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no agents/configs here, as for an installed package
    with pytest.raises(ConfigError, match=r"'agents/configs/small_scarce.toml' does not exist; the package ships a "
                                          r"config of that name: --config small_scarce"):
        config_from_args(_train_args("agents/configs/small_scarce.toml"))
    with pytest.raises(ConfigError, match=r"^config file 'smal' does not exist, and no config the package ships has "
                                          r"that name: small, small_scarce, "):  # a bare name: a shipped one misspelt
        config_from_args(_train_args("smal"))
    with pytest.raises(ConfigError, match=r"^config file 'nowhere/c\.toml' does not exist$"):  # a path: no list
        config_from_args(_train_args("nowhere/c.toml"))


def test_a_file_of_the_same_name_comes_before_a_shipped_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "small").write_text("")  # not a config file: the user's own file is what --config small reads
    with pytest.raises(ConfigError, match="use .toml"):
        config_from_args(_train_args("small"))


def test_export_without_dest_outside_a_checkout_is_refused_and_writes_nothing(tmp_path, capsys, monkeypatch):
    installed = tmp_path / "site-packages" / "synergy_gym" / "agents" / "pretrained"
    (installed / "small").mkdir(parents=True)
    (installed / "small" / "model.zip").write_bytes(b"shipped")
    monkeypatch.setattr(export_module, "pretrained_root", lambda: installed)
    monkeypatch.setattr(export_module, "code_root", lambda: None)  # as code_root() finds it for a wheel
    code = export_module.main([str(tmp_path / "best_model.zip"), "small", "--command", "x"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "without --dest it would write into the installed package" in err and "give --dest DIR" in err
    assert (installed / "small" / "model.zip").read_bytes() == b"shipped"
    assert sorted(p.name for p in installed.iterdir()) == ["small"]


def test_export_without_dest_in_a_checkout_writes_its_agents_pretrained(tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    (checkout / "agents" / "pretrained").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.setattr(export_module, "pretrained_root", lambda: checkout / "agents" / "pretrained")
    monkeypatch.setattr(export_module, "code_root", lambda: checkout)
    assert export_module.default_dest("tiny") == checkout / "agents" / "pretrained" / "tiny"
