"""`specreg demo`'s flags (specreg/demo_args.py): each checked before anything runs, typed as a
user types them (a real subprocess), answered with exit status 1 and a coded fix."""

from __future__ import annotations

import pytest

from tests.support.cli import fix_line, specreg


@pytest.mark.parametrize("steps", ["-5", "0", "100000000000000000000"])
def test_demo_checks_steps_before_running(steps):
    result = specreg("demo", "--steps", steps)
    assert result.returncode == 1  # a coded problem in the input, as in every command
    assert "Traceback" not in result.stderr and "RuntimeError" not in result.stderr
    assert f"[SR143] specreg demo --steps {steps} is outside [1, 472]" in result.stderr
    assert fix_line(result.stderr, "SR143").startswith("pass --steps within [1, 472]")


def test_demo_checks_the_plot_path_before_the_run(tmp_path):
    result = specreg("demo", "--plot", "missing_dir/x.png", cwd=tmp_path)
    assert result.returncode == 1  # a coded problem in the input, as in every command
    assert result.stdout == ""  # refused before any row ran
    assert "Traceback" not in result.stderr and "[SR144]" in result.stderr
    assert fix_line(result.stderr, "SR144").startswith("create the folder first (mkdir -p missing_dir)")


def test_demo_unknown_algorithm_fix_names_the_demo_flag():
    result = specreg("demo", "--algorithm", "medusa")
    assert result.returncode == 1  # a coded problem in the input, as in every command
    fix = fix_line(result.stderr, "SR101")
    assert "--algorithm" in fix and "--speculative-algorithm" not in fix


def test_demo_step_limit_matches_the_toy_model():
    from specreg.demo_args import MAX_STEPS, PROMPT_LEN, TOY_POSITIONS, VERIFY_MARGIN
    from specreg.testing import ToyConfig

    assert ToyConfig().max_positions == TOY_POSITIONS
    assert ToyConfig().window == VERIFY_MARGIN
    assert MAX_STEPS == TOY_POSITIONS - PROMPT_LEN - VERIFY_MARGIN
