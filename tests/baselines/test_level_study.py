"""The level study's command line (synergy_gym.baselines.level_study)."""

from synergy_gym.baselines.level_study import main

#: How the module's one-line errors start (as its argument parser's own).
ERROR = "python -m synergy_gym.baselines.level_study: error: "


def test_bad_seeds_are_one_line_naming_the_flag(capsys):
    assert main(["--seeds", "abc"]) == 2
    assert capsys.readouterr().err == ERROR + "--seeds 'abc': expected integers like 42, 1,2,3 or 0..9\n"
