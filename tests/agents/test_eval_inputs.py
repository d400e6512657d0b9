"""``synergy-gym evaluate``'s inputs: normalisation statistics, the environment a model was trained on, the device.

A model whose normalisation statistics are missing is refused, naming where they were looked for and the flags
(``--vecnormalize FILE``, ``--no-normalize``); they are found beside the model as ``synergy-gym train`` and
Stable-Baselines3 save them, or in RL Baselines3 Zoo's layout. A model trained on another environment id or kwargs
is refused naming both, unless ``--allow-env-mismatch`` (then a ``note:`` line says so). Every refusal is one line,
exit status 2, and writes nothing.
"""

from __future__ import annotations

import json
import pickle
import shutil
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
import yaml

from synergy_gym.agents import models as models_module
from synergy_gym.agents.pretrained_policies import pretrained_model_path
from synergy_gym.agents.provenance import trained_on
from tests.agents.tiny_runs import ENV, EVALUATE, one_line_error, train_tiny
from tests.support.cli_runs import run_cli, snapshot

SCARCE = "Synergy-small-scarce-v0"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A tiny normalised run: last_model.zip, best_model.zip, checkpoints/rl_model_48_steps.zip and their statistics."""
    out = tmp_path_factory.mktemp("evaluate") / "run"
    train_tiny(out, 64, 16)
    return out


@pytest.fixture
def stats_read(monkeypatch) -> list[Path]:
    """The statistics files the evaluation loads, in order."""
    read: list[Path] = []
    original = models_module.read_stats

    def spy(path):
        read.append(Path(path))
        return original(path)

    monkeypatch.setattr(models_module, "read_stats", spy)
    return read


def evaluate(model: Path, tmp_path: Path, capsys, *options: str) -> tuple[int, str, str]:
    return run_cli([*EVALUATE, "--model", str(model), *options, "--out", str(tmp_path / "results")], capsys)


def refused(model: Path, tmp_path: Path, capsys, *options: str, words: tuple[str, ...]) -> str:
    """``evaluate`` refuses ``model`` in one line with ``words``, writing nothing; the line."""
    before = snapshot(tmp_path)
    line = one_line_error(*evaluate(model, tmp_path, capsys, *options), *words, command="evaluate")
    assert snapshot(tmp_path) == before
    return line


def ran(model: Path, tmp_path: Path, capsys, *options: str) -> str:
    """``evaluate`` scores ``model``; its stderr."""
    code, out, err = evaluate(model, tmp_path, capsys, *options)
    assert code == 0, err
    assert json.loads((tmp_path / "results" / "results.json").read_text())["results"][0]["policy"] == str(model)
    shutil.rmtree(tmp_path / "results")
    return err


def zoo_run(run: Path, folder: Path, normalize: object = True, model: str = "last_model.zip") -> Path:
    """The tiny run in RL Baselines3 Zoo's layout: ``<run>/<env>.zip``, ``<run>/<env>/vecnormalize.pkl``, ``args.yml``
    and ``config.yml`` as rl_zoo3 writes them (YAML dumps of ordered dicts)."""
    params = folder / ENV
    params.mkdir(parents=True)
    shutil.copy(run / model, folder / f"{ENV}.zip")
    shutil.copy(run / "vecnormalize.pkl", params / "vecnormalize.pkl")
    args = OrderedDict(sorted({"algo": "ppo", "env": ENV, "env_kwargs": {"num_jobs": 10}, "seed": 0, "n_timesteps": 64,
                               "log_folder": "logs"}.items()))
    (params / "args.yml").write_text(yaml.dump(args))
    (params / "config.yml").write_text(yaml.dump(OrderedDict([("n_steps", 8), ("normalize", normalize),
                                                              ("policy", "MultiInputPolicy")])))
    assert "!!python/object/apply:collections.OrderedDict" in (params / "args.yml").read_text()
    return folder / f"{ENV}.zip"


# -- where the statistics are found ---------------------------------------------------------------------------------


def _layout(kind: str, run: Path, folder: Path) -> tuple[Path, Path]:
    """(the model, its statistics) laid out in ``folder`` as each kind of run saves them."""
    if kind == "last_model.zip":
        shutil.copytree(run, folder / "run")
        return folder / "run" / "last_model.zip", folder / "run" / "vecnormalize.pkl"
    if kind == "best_model.zip":
        shutil.copytree(run, folder / "run")
        return folder / "run" / "best_model.zip", folder / "run" / "best_vecnormalize.pkl"
    if kind == "periodic checkpoint":
        shutil.copytree(run, folder / "run")
        checkpoints = folder / "run" / "checkpoints"
        return checkpoints / "rl_model_48_steps.zip", checkpoints / "rl_model_vecnormalize_48_steps.pkl"
    if kind == "bare zip beside vecnormalize.pkl":
        (folder / "m").mkdir()
        shutil.copy(run / "last_model.zip", folder / "m" / "agent.zip")
        shutil.copy(run / "vecnormalize.pkl", folder / "m")
        return folder / "m" / "agent.zip", folder / "m" / "vecnormalize.pkl"
    if kind == "RL Zoo final model":
        model = zoo_run(run, folder / "zoo")
        return model, folder / "zoo" / ENV / "vecnormalize.pkl"
    if kind == "RL Zoo best model":
        zoo_run(run, folder / "zoo")
        shutil.copy(run / "best_model.zip", folder / "zoo" / "best_model.zip")
        return folder / "zoo" / "best_model.zip", folder / "zoo" / ENV / "vecnormalize.pkl"
    raise AssertionError(kind)


LAYOUTS = ["last_model.zip", "best_model.zip", "periodic checkpoint", "bare zip beside vecnormalize.pkl",
           "RL Zoo final model", "RL Zoo best model"]


@pytest.mark.parametrize("kind", LAYOUTS)
def test_statistics_are_found_beside_the_model_and_refused_when_missing(kind, run, tmp_path, capsys, stats_read):
    model, stats = _layout(kind, run, tmp_path)
    assert ran(model, tmp_path, capsys) == ""
    assert stats_read == [stats]
    moved = stats.rename(tmp_path / "elsewhere.pkl")
    line = refused(model, tmp_path, capsys, words=(
        f"--model {model}: its normalisation statistics are missing", "; looked for ", f"{stats}",
        "give --vecnormalize FILE, or --no-normalize to evaluate it on unnormalised observations on purpose"))
    run_folder = model.parent.parent if kind == "periodic checkpoint" else model.parent
    says = {"bare zip beside vecnormalize.pkl": None, "RL Zoo final model": stats.parent / "config.yml",
            "RL Zoo best model": stats.parent / "config.yml"}.get(kind, run_folder / "config.json")
    assert (says is None and "says" not in line) or f"({says} says it was trained on normalised observations)" in line
    # Given explicitly, from anywhere.
    stats_read.clear()
    assert ran(model, tmp_path, capsys, "--vecnormalize", str(moved)) == ""
    assert stats_read == [moved]
    # On unnormalised observations on purpose.
    stats_read.clear()
    assert ran(model, tmp_path, capsys, "--no-normalize") == ""
    assert stats_read == []


def test_statistics_that_cannot_be_read_are_one_line_naming_the_file(run, tmp_path, capsys):
    model, stats = _layout("last_model.zip", run, tmp_path)
    stats.write_bytes(stats.read_bytes()[:100])  # truncated
    refused(model, tmp_path, capsys, words=(f"normalisation statistics {stats} cannot be read (UnpicklingError: ",
                                            "is the file damaged or truncated?"))
    stats.write_bytes(pickle.dumps({"mean": [0.0]}))  # a pickle of something else
    refused(model, tmp_path, capsys, words=(f"{stats} does not hold VecNormalize statistics",))
    given = tmp_path / "given.pkl"
    given.write_text("{}")
    refused(model, tmp_path, capsys, "--vecnormalize", str(given), words=(f"normalisation statistics {given} cannot "
                                                                          "be read",))
    refused(model, tmp_path, capsys, "--vecnormalize", str(tmp_path / "nope.pkl"),
            words=(f"--vecnormalize {str(tmp_path / 'nope.pkl')!r} does not exist",))
    refused(model, tmp_path, capsys, "--vecnormalize", str(given), "--no-normalize",
            words=("--vecnormalize and --no-normalize contradict each other",))


def test_a_model_trained_without_normalisation_runs_without_statistics(run, tmp_path, capsys, stats_read):
    (tmp_path / "m").mkdir()
    model = Path(shutil.copy(run / "last_model.zip", tmp_path / "m"))
    config = json.loads((run / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "normalize_obs": False}))
    assert ran(model, tmp_path, capsys) == "" and stats_read == []
    # RL Zoo: config.yml's normalize false, or normalising the rewards only.
    for normalize in (False, "dict(norm_obs=False, norm_reward=True)", "{'norm_obs': False, 'norm_reward': True}"):
        folder = tmp_path / f"zoo-{len(stats_read)}-{normalize!s:.5}"
        model = zoo_run(run, folder, normalize=normalize)
        (folder / ENV / "vecnormalize.pkl").unlink()
        record = trained_on(model)
        assert record is not None and (record.env_id, record.env_kwargs, record.normalized) == (ENV, {"num_jobs": 10}, False)
        assert ran(model, tmp_path, capsys) == "" and stats_read == []
    for normalize in (True, "dict(norm_obs=True, norm_reward=False)", "{'norm_obs': True}"):
        model = zoo_run(run, tmp_path / f"zoo-on-{normalize!s:.6}", normalize=normalize)
        assert trained_on(model).normalized is True


@pytest.mark.parametrize("with_config", [False, True])
def test_the_pretrained_model_copied_without_its_statistics_is_refused(with_config, tmp_path, capsys):
    source = pretrained_model_path("small-scarce")
    (tmp_path / "copy").mkdir()
    model = Path(shutil.copy(source, tmp_path / "copy" / "model.zip"))
    if with_config:
        shutil.copy(source.parent / "config.json", tmp_path / "copy")
    options = () if with_config else ("--env", SCARCE)
    line = refused(model, tmp_path, capsys, *options, words=(
        f"--model {model}: its normalisation statistics are missing", f"looked for {tmp_path / 'copy' / 'vecnormalize.pkl'}",
        "--vecnormalize FILE", "--no-normalize"))
    assert ("config.json says it was trained on normalised observations" in line) is with_config
    if not with_config:  # nothing says what it was trained on: any environment of the same shape
        assert ran(model, tmp_path, capsys, *options, "--env-kwargs", "num_jobs=10", "--no-normalize") == ""
        assert ran(model, tmp_path, capsys, *options, "--env-kwargs", "num_jobs=10", "--vecnormalize",
                   str(source.parent / "vecnormalize.pkl")) == ""


# -- the environment a model was trained on --------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "trained", "asked"), [
    (("--env", SCARCE), ENV, SCARCE),
    (("--env-kwargs", "num_jobs=12"), f"{ENV} (num_jobs=10)", f"{ENV} (num_jobs=12)"),
    (("--env", SCARCE, "--env-kwargs", "num_jobs=12"), f"{ENV} (num_jobs=10)", f"{SCARCE} (num_jobs=12)"),
])
def test_a_model_trained_on_another_environment_needs_allow_env_mismatch(options, trained, asked, run, tmp_path, capsys):
    model = run / "last_model.zip"
    refused(model, tmp_path, capsys, *options, words=(
        f"--model {model} was trained on {trained} ({run / 'config.json'}) but the evaluation runs {asked}; "
        "give --allow-env-mismatch to evaluate it there anyway",))
    err = ran(model, tmp_path, capsys, *options, "--allow-env-mismatch")
    assert err == (f"synergy-gym evaluate: note: --model {model} was trained on {trained}; evaluating it on {asked} "
                   "(--allow-env-mismatch)\n")


def test_the_same_environment_needs_no_flag(run, tmp_path, capsys):
    model = run / "last_model.zip"
    assert ran(model, tmp_path, capsys, "--env", ENV, "--env-kwargs", "num_jobs=10") == ""
    # A value written another way that the environment reads the same (was refused as a mismatch).
    assert ran(model, tmp_path, capsys, "--env", ENV, "--env-kwargs", "num_jobs=10", "class_split=20/70/10") == ""
    # An RL Zoo run: its environment comes from args.yml (as a run's from config.json).
    zoo = zoo_run(run, tmp_path / "zoo")
    assert ran(zoo, tmp_path, capsys) == ""
    refused(zoo, tmp_path, capsys, "--env-kwargs", "num_jobs=11", words=(
        f"--model {zoo} was trained on {ENV} (num_jobs=10) ({tmp_path / 'zoo' / ENV / 'args.yml'}) but the evaluation runs "
        f"{ENV} (num_jobs=11)",))


# -- the device ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("device", "cuda", "words"), [
    ("tpu", 0, "unknown device 'tpu'; valid: auto, cpu, cuda, cuda:N"),
    ("gpu", 1, "unknown device 'gpu'; valid: auto, cpu, cuda, cuda:N"),
    ("cuda", 0, "--device cuda: PyTorch sees no CUDA device on this machine (use --device auto or cpu)"),
    ("cuda:1", 1, "--device cuda:1: PyTorch sees 1 CUDA device(s), numbered from 0"),
])
def test_evaluate_on_a_device_that_is_not_there_is_one_line(device, cuda, words, run, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda)
    line = refused(run / "last_model.zip", tmp_path, capsys, "--device", device, words=(words,))
    assert "could not be loaded" not in line


def test_a_run_normalising_rewards_but_not_observations_evaluates_and_resumes(tmp_path, capsys):
    """Its statistics file holds no observation statistics: evaluate and --resume read it (they recursed inside
    VecNormalize.__getattr__ looking for obs_rms), and evaluate runs the model on the observations as they are."""
    from synergy_gym.cli import main
    from tests.agents.tiny_runs import QUICK, tiny_config

    config = tiny_config(tmp_path, "normalize_obs = false\n")
    run = tmp_path / "run"
    assert main(["train", *QUICK, "--config", str(config), "--timesteps", "16", "--out", str(run)]) == 0
    assert (run / "vecnormalize.pkl").is_file()
    capsys.readouterr()
    assert main([*EVALUATE, "--model", str(run / "last_model.zip"), "--env", ENV, "--env-kwargs", "num_jobs=10",
                 "--out", str(tmp_path / "e")]) == 0
    assert "paired" not in capsys.readouterr().err
    assert main(["train", "--resume", str(run), "--timesteps", "32", "--no-progress"]) == 0
    assert json.loads((run / "config.json").read_text())["normalize_obs"] is False
    capsys.readouterr()
    # Another run's statistics are refused both ways (they ran the model on other observations, silently).
    normal = tmp_path / "normal"
    assert main(["train", *QUICK, "--config", str(tiny_config(tmp_path)), "--timesteps", "16", "--out", str(normal)]) == 0
    capsys.readouterr()
    for model, stats, words in [(normal, run, "do not normalise observations, but its run was trained with normalize_obs "
                                 "true"), (run, normal, "normalise observations, but its run was trained with "
                                           "normalize_obs false")]:
        code = main([*EVALUATE, "--model", str(model / "last_model.zip"), "--vecnormalize", str(stats / "vecnormalize.pkl"),
                     "--env", ENV, "--env-kwargs", "num_jobs=10", "--out", str(tmp_path / "x")])
        one_line_error(code, *capsys.readouterr(), words, command="evaluate")
    # Resumed without its config.json, only the statistics say how it was trained: a change is refused.
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("last_model.zip", "vecnormalize.pkl"):
        shutil.copy(run / name, bare / name)
    code = main(["train", *QUICK, "--config", str(tiny_config(tmp_path)), "--resume", str(bare / "last_model.zip"),
                 "--timesteps", "64", "--out", str(tmp_path / "more")])
    one_line_error(code, *capsys.readouterr(), "keeps its normalisation, but the config changes normalize_obs true")
    # Exported, it ships no statistics file (it has nothing to normalise observations with) and loads without one.
    from synergy_gym.agents.pretrained_policies import export_sources

    assert export_sources(run / "last_model.zip")[1] is None
