"""The env heuristics' scores kept on disk: the same rows as scoring them, reused only for the same code, env and seeds."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

import synergy_gym
from synergy_gym.agents import baseline_cache
from synergy_gym.agents.baseline_cache import cache_key, cacheable, cached_scores, code_fingerprint
from synergy_gym.agents.baseline_scores import evaluate_baselines
from synergy_gym.agents.config import TrainConfig

CFG = {"env_id": "Synergy-small-v0", "env_kwargs": {"num_jobs": 10}, "eval_episodes": 2}


class Counting:
    """A stand-in scorer that counts its calls."""

    def __init__(self, frames):
        self.frames, self.calls = frames, 0

    def __call__(self):
        self.calls += 1
        return self.frames


def test_cached_rows_are_the_scored_rows(own_baseline_cache, monkeypatch):
    cfg = TrainConfig(**CFG)
    scored = evaluate_baselines(cfg)
    assert len(list(own_baseline_cache.iterdir())) == 1
    import synergy_gym.agents.baseline_scores as scores

    monkeypatch.setattr(scores, "evaluate", lambda *a, **k: pytest.fail("scored again"))
    cached = evaluate_baselines(cfg)
    assert list(cached) == list(scored)
    for name in scored:
        pd.testing.assert_frame_equal(cached[name], scored[name], check_exact=True)


def test_other_envs_seeds_and_random_seeds_are_scored_afresh():
    frames = {"fifo+tune": pd.DataFrame({"seed": [1, 2], "mean_jct_h": [1.5, float("nan")], "terminated": [True, False]})}
    score = Counting(frames)
    args = ("Synergy-small-v0", {"num_jobs": 10}, [1, 2], ["fifo+tune"], 0)
    first = cached_scores(score, *args)
    again = cached_scores(score, *args)
    assert score.calls == 1 and first is frames
    pd.testing.assert_frame_equal(again["fifo+tune"], frames["fifo+tune"], check_exact=True)
    for changed in [("Synergy-small-scarce-v0", *args[1:]), (args[0], {"num_jobs": 11}, *args[2:]),
                    (*args[:2], [1, 3], *args[3:]), (*args[:4], 1)]:
        cached_scores(score, *changed)
    assert score.calls == 5
    assert len({cache_key(*a) for a in [args, (*args[:4], 1)]}) == 2


def test_file_kwargs_off_and_damaged_files_are_scored(own_baseline_cache, monkeypatch):
    frames = {"tetris": pd.DataFrame({"mean_jct_h": [2.0]})}
    score = Counting(frames)
    assert not cacheable({"trace": "jobs.csv"}) and cacheable({"num_jobs": 5, "preemptive": True, "load": 1.5, "x": None})
    for _ in range(2):
        cached_scores(score, "Synergy-small-v0", {"trace": "jobs.csv"}, [1], ["tetris"], 0)
    assert score.calls == 2 and not list(own_baseline_cache.iterdir())
    cached_scores(score, "Synergy-small-v0", {}, [1], ["tetris"], 0)
    (file,) = own_baseline_cache.iterdir()
    file.write_text('{"tetris": {"colu')
    cached_scores(score, "Synergy-small-v0", {}, [1], ["tetris"], 0)
    assert score.calls == 4  # a damaged file is scored again (and replaced)
    cached_scores(score, "Synergy-small-v0", {}, [1], ["tetris"], 0)
    assert score.calls == 4
    monkeypatch.setattr(baseline_cache, "cache_folder", lambda: None)  # SYNERGY_GYM_CACHE_DIR=""
    cached_scores(score, "Synergy-small-v0", {}, [1], ["tetris"], 0)
    assert score.calls == 5


def test_cache_folder_follows_the_cache_variable(tmp_path, monkeypatch):
    monkeypatch.undo()  # the real cache_folder, not the fixture's
    monkeypatch.setenv("SYNERGY_GYM_CACHE_DIR", str(tmp_path))
    assert baseline_cache.cache_folder() == tmp_path / "baselines" and (tmp_path / "baselines").is_dir()
    monkeypatch.setenv("SYNERGY_GYM_CACHE_DIR", "")
    assert baseline_cache.cache_folder() is None


def test_the_fingerprint_changes_with_the_code(tmp_path, monkeypatch):
    package = tmp_path / "scoring_pkg"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("X = 1\n")
    (package / "data" / "zoo.csv").write_text("a,b\n1,2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(baseline_cache, "SCORING_PACKAGES", ("scoring_pkg",))
    fingerprints = []
    (package / "pretrained" / "p").mkdir(parents=True)
    (package / "pretrained" / "p" / "card.json").write_text("{}")
    for change in [None, ("__init__.py", "X = 2\n"), ("data/zoo.csv", "a,b\n1,3\n"), ("pretrained/p/card.json", "[]")]:
        if change is not None:
            (package / change[0]).write_text(change[1])
        code_fingerprint.cache_clear()
        fingerprints.append(code_fingerprint())
    code_fingerprint.cache_clear()
    sys.modules.pop("scoring_pkg", None)
    # Each change of code or data scores afresh; a shipped policy's files (pretrained/) do not.
    assert len(set(fingerprints[:3])) == 3 and fingerprints[3] == fingerprints[2]


def test_an_id_registered_again_with_other_kwargs_is_scored_afresh(own_baseline_cache, tmp_path):
    """The key held the id and the kwargs given, not the id's registration: a user's scenario registered again with
    another jobs_per_hour (or an edited one) got the first registration's scores from the cache."""
    import warnings

    import gymnasium as gym

    def register(**kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Overriding environment … already in registry": on purpose
            gym.register(env_id, **kwargs)

    frames = {"fifo+tune": pd.DataFrame({"mean_jct_h": [1.0]})}
    score = Counting(frames)
    args = ({"num_jobs": 10}, [1, 2], ["fifo+tune"], 0)
    env_id = "Synergy-cache-test-v0"
    try:
        for jobs_per_hour in (1.0, 20.0, 20.0):
            register(entry_point="synergy_gym.env:SynergyEnv", kwargs={"cluster": "small", "jobs_per_hour": jobs_per_hour})
            assert cacheable(args[0], env_id)
            cached_scores(score, env_id, *args)
        assert score.calls == 2  # scored for each registration, reused for the same one
        cluster = tmp_path / "c.toml"
        cluster.write_text("num_servers = 1\n")
        register(entry_point="synergy_gym.env:SynergyEnv", kwargs={"cluster": str(cluster)})
        assert not cacheable(args[0], env_id)  # a file may change under its name
        register(entry_point="my_package.envs:MyEnv", kwargs={})
        assert not cacheable(args[0], env_id)  # code the fingerprint does not cover
    finally:
        gym.registry.pop(env_id, None)
    assert all(cacheable(args[0], registered) for registered in synergy_gym.SCENARIOS)  # the shipped ids are cached
    assert cacheable(args[0], "Not-registered-v0")
