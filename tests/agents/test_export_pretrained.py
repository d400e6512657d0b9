"""``python -m synergy_gym.agents.export_pretrained``: whole or nothing, one-line refusals, runs without statistics.

A refused export (too large, files missing, a ``--dest`` that is not a policy folder) leaves ``--dest`` as it was – a
previous policy there included – and is one line on stderr (exit status 2); what is missing is refused before the
held-out evaluation runs. A run trained without observation normalisation exports without statistics and loads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from synergy_gym.agents import pretrained_policies
from synergy_gym.agents.export_pretrained import main as export_main
from tests.agents.tiny_runs import train_tiny
from tests.support.agent_runs import tiny_train_config
from tests.support.cli_runs import snapshot

CARD = {"name": "tiny"}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A tiny normalised run (best_model.zip with best_vecnormalize.pkl)."""
    out = tmp_path_factory.mktemp("export") / "run"
    train_tiny(out, 64, 16)
    return out


@pytest.fixture(scope="module")
def unnormalised_run(tmp_path_factory) -> Path:
    """A tiny run without normalisation (no statistics are saved)."""
    from synergy_gym.agents import baseline_cache
    from synergy_gym.agents.train import train

    root = tmp_path_factory.mktemp("export_nonorm")
    cfg = tiny_train_config("Synergy-small-v0", timesteps=64, eval_freq=64, normalize_obs=False, normalize_reward=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(baseline_cache, "cache_folder", lambda: root / "cache")
        return train(cfg, out=root / "run", log=None)


@pytest.fixture
def no_evaluation(monkeypatch):
    """Fail a test that reaches the held-out evaluation."""
    from synergy_gym.experiments import evaluation

    def refuse(*args, **kwargs):
        raise AssertionError("the held-out evaluation ran before the refusal")

    monkeypatch.setattr(evaluation, "evaluate", refuse)


def one_line(capsys, code: int, *words: str) -> str:
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1 and err.startswith("python -m synergy_gym.agents.export_pretrained: error: "), err
    for word in words:
        assert word in err, (word, err)
    return err


def test_a_policy_over_the_limit_writes_nothing_and_keeps_the_previous_one(run, tmp_path, monkeypatch):
    from synergy_gym.errors import ConfigError

    dest = tmp_path / "policies" / "tiny"
    pretrained_policies.export_pretrained(run / "best_model.zip", dest, CARD)
    before = snapshot(tmp_path)
    monkeypatch.setattr(pretrained_policies, "MAX_BYTES", 1000)
    with pytest.raises(ConfigError, match="more than the 1,000 a shipped policy may; nothing was written"):
        pretrained_policies.export_pretrained(run / "best_model.zip", dest, {"name": "tiny", "new": True})
    assert snapshot(tmp_path) == before  # the previous policy whole, and no temporary folder left
    with pytest.raises(ConfigError):
        pretrained_policies.export_pretrained(run / "best_model.zip", tmp_path / "new", CARD)
    assert not (tmp_path / "new").exists()
    monkeypatch.undo()  # within the limit, a re-export replaces the policy whole
    pretrained_policies.export_pretrained(run / "last_model.zip", dest, {"name": "tiny", "again": True})
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tiny"]
    assert json.loads((dest / "card.json").read_text()) == {"name": "tiny", "again": True}
    assert (dest / "vecnormalize.pkl").read_bytes() == (run / "vecnormalize.pkl").read_bytes()


def test_a_dest_with_other_files_is_refused_untouched(run, tmp_path, capsys, no_evaluation):
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    code = export_main([str(run / "best_model.zip"), "tiny", "--command", "x", "--dest", str(dest)])
    one_line(capsys, code, "--dest", "notes.txt", "not a policy's")
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("missing", ["best_model.zip", "best_vecnormalize.pkl", "config.json"])
def test_missing_files_are_one_line_before_the_evaluation(run, tmp_path, capsys, missing, no_evaluation):
    copy = shutil.copytree(run, tmp_path / "run")
    (copy / missing).unlink()
    code = export_main([str(copy / "best_model.zip"), "tiny", "--command", "x", "--dest", str(tmp_path / "out")])
    one_line(capsys, code, missing)
    assert not (tmp_path / "out").exists()


def test_a_run_without_normalisation_exports_and_loads(unnormalised_run, tmp_path, capsys):
    from synergy_gym import evaluate
    from synergy_gym.agents.config import load_run_config
    from synergy_gym.agents.models import load_agent

    dest = tmp_path / "plain"
    code = export_main([str(unnormalised_run / "best_model.zip"), "plain", "--command", "x", "--dest", str(dest)])
    assert code == 0, capsys.readouterr()
    assert sorted(p.name for p in dest.iterdir()) == ["card.json", "config.json", "model.zip"]
    card = json.loads((dest / "card.json").read_text())
    policy = load_agent(dest / "model.zip", load_run_config(dest / "config.json"), "cpu", "plain")
    assert policy.vec_normalize is None
    frame = evaluate(policy, card["env_id"], [card["check_seed"]], **card["env_kwargs"])
    assert frame["mean_jct_h"].iloc[0] == pytest.approx(card["check_mean_jct_h"], rel=1e-12)


def test_an_export_in_progress_is_not_a_shipped_policy(tmp_path, monkeypatch):
    """The temporary folder an export writes beside a policy (or one a killed export left) is never listed."""
    for folder in ("small", ".small.k3j2x9a1.tmp", ".small.k3j2x9a1.old"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "model.zip").write_bytes(b"")
    monkeypatch.setattr(pretrained_policies, "pretrained_root", lambda: tmp_path)
    assert pretrained_policies.pretrained_names() == ("small",)


def test_dest_dot_a_link_and_the_folder_mode_are_kept(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pretrained_policies.export_pretrained(run / "best_model.zip", Path("."), CARD)  # the current folder, empty
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card.json", "config.json", "model.zip", "vecnormalize.pkl"]
    target = tmp_path / "shared" / "tiny"
    target.mkdir(parents=True)
    target.chmod(0o2775)  # a group's folder: group-writable, setgid
    link = tmp_path / "link"
    link.symlink_to(target)
    pretrained_policies.export_pretrained(run / "best_model.zip", link, CARD)
    assert link.is_symlink() and (target / "model.zip").is_file()  # the export went where the link points
    assert target.stat().st_mode & 0o7777 == 0o2775


@pytest.mark.parametrize("name", ["../escape", "small/v2", "", ".hidden"])
def test_a_name_pretrained_name_could_not_load_is_refused(name, tmp_path, capsys, monkeypatch):
    # The name was joined to agents/pretrained unchecked: "../x" wrote outside it, "small/v2" inside a shipped policy.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        export_main([str(tmp_path / "best_model.zip"), name, "--command", "x"])
    assert exit_info.value.code == 2
    assert f"error: name {name!r}: must be one folder name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_policy_is_not_exported_into_its_own_folder(run, tmp_path, capsys, no_evaluation):
    # Re-exporting a policy's model.zip into its folder replaced its card with one of no validation numbers.
    pol = tmp_path / "pol"
    pol.mkdir()
    for source, name in (("best_model.zip", "model.zip"), ("best_vecnormalize.pkl", "vecnormalize.pkl"),
                         ("config.json", "config.json")):
        shutil.copy(run / source, pol / name)
    (pol / "card.json").write_text(json.dumps({"validation_mean_jct_h": 12.5}))
    before = snapshot(pol)
    code = export_main([str(pol / "model.zip"), "tiny", "--command", "x", "--dest", str(pol)])
    one_line(capsys, code, "--dest", "is the folder of the model exported")
    assert snapshot(pol) == before
