"""Pretrained policies shipped in agents/pretrained: load_pretrained, --model pretrained:NAME, size, packaging."""

import json
import os
import re
import subprocess
import sys
import zipfile

import pytest

from tests.support import REPO
from tests.support.cli_runs import run_cli

ROOT = REPO
#: The reference runs' policies, one per small scenario (README, "Results").
SHIPPED = {"small-scarce": "Synergy-small-scarce-v0", "small": "Synergy-small-v0",
           "small-scarce-preemptive": "Synergy-small-scarce-v0"}


def test_the_reference_policies_are_shipped():
    import synergy_gym.agents

    assert set(SHIPPED) <= set(synergy_gym.agents.pretrained_names())


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_a_shipped_policy_is_small_and_complete(name):
    from synergy_gym.agents.pretrained_policies import (
        FILES,
        MAX_BYTES,
        pretrained_card,
        pretrained_config,
        pretrained_model_path,
    )

    folder = pretrained_model_path(name).parent
    assert sum((folder / f).stat().st_size for f in FILES) <= MAX_BYTES
    card = pretrained_card(name)
    assert card["name"] == name and card["env_id"] == SHIPPED[name] == pretrained_config(name).env_id
    assert card["validation_seeds"][0] >= 2_000_000 and "synergy-gym train" in card["trained_with"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_load_pretrained_reproduces_the_card_on_a_held_out_seed(name):
    """The policy loads on the CPU and schedules the check seed's episode exactly as when it was exported."""
    import synergy_gym.agents
    from synergy_gym import evaluate
    from synergy_gym.agents.pretrained_policies import pretrained_card, pretrained_config

    policy = synergy_gym.agents.load_pretrained(name)
    card, cfg = pretrained_card(name), pretrained_config(name)
    frame = evaluate(policy, cfg.env_id, [card["check_seed"]], **cfg.env_kwargs)
    assert frame["terminated"].all()
    assert frame["mean_jct_h"].iloc[0] == pytest.approx(card["check_mean_jct_h"], rel=1e-9)


def test_an_unknown_pretrained_name_lists_the_known_ones(capsys):
    import synergy_gym.agents
    from synergy_gym.errors import SynergyGymError

    with pytest.raises(SynergyGymError, match=re.escape("unknown pretrained policy 'tiny'")) as info:
        synergy_gym.agents.load_pretrained("tiny")
    assert "small-scarce" in str(info.value)
    code, _, err = run_cli(["evaluate", "--model", "pretrained:tiny", "--baselines", "none", "--seeds", "1000000",
                            "--out", "/nonexistent-never-written"], capsys)
    assert code == 2 and "unknown pretrained policy 'tiny'" in err and "Traceback" not in err


def test_evaluate_takes_a_pretrained_model(tmp_path, capsys):
    code, _, err = run_cli(["evaluate", "--env", "Synergy-small-scarce-v0", "--model", "pretrained:small-scarce",
                              "--baselines", "srtf+price", "--seeds", "1000000", "--env-kwargs", "num_jobs=40",
                              "--out", str(tmp_path / "ev"), "--quiet", "--allow-env-mismatch"], capsys)
    assert code == 0, err
    # Trained on 300 jobs an episode: allowed, and said.
    assert "trained on Synergy-small-scarce-v0 (num_jobs=300); evaluating it on Synergy-small-scarce-v0 (num_jobs=40)" in err
    data = json.loads((tmp_path / "ev" / "results.json").read_text())
    rows = {r["policy"]: r for r in data["results"]}
    agent = rows["pretrained:small-scarce"]  # named by its --model argument
    assert agent["source"] == "agent" and rows["srtf+price"]["source"] == "env"
    assert agent["episodes"] == 1 and agent["mean_jct_h"] > 0
    assert data["meta"]["agents"] == [{"label": "pretrained:small-scarce", "model": "pretrained:small-scarce"}]


@pytest.mark.slow
def test_the_wheel_ships_the_policies(tmp_path):
    """A non-editable install gets every policy's files as package data."""
    from synergy_gym.agents.pretrained_policies import FILES

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("synergy_gym-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in SHIPPED:
        for file in FILES:
            assert f"synergy_gym/agents/pretrained/{name}/{file}" in names


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_shipped_models_name_only_the_installed_modules(name):
    """The pickled policy class and feature extractor are ``synergy_gym.agents.*``, not the old top-level ``agents``."""
    import base64

    with zipfile.ZipFile(REPO / "agents" / "pretrained" / name / "model.zip") as archive:
        data = json.loads(archive.read("data"))
    serialized = [v[":serialized:"] for v in data.values() if isinstance(v, dict) and ":serialized:" in v]
    pickled = b"".join(base64.b64decode(s) for s in serialized)
    assert b"synergy_gym.agents.slot_policy" in pickled
    assert not re.findall(rb"(?<!synergy_gym\.)\bagents\.[a-z_]+", pickled)


@pytest.mark.slow
def test_the_shipped_policies_load_outside_the_repository(tmp_path):
    """Loaded where the repository is not on ``sys.path`` (as a user's script runs), they need no ``agents`` package."""
    code = (
        "import sys\n"
        "from synergy_gym.agents import load_pretrained\n"
        f"for name in {sorted(SHIPPED)!r}:\n"
        "    load_pretrained(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'agents'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
