"""The flags `check` and `plan` share (specreg/cli/args.py): a value that is not what the flag
takes is SR143 with command-line advice."""

from __future__ import annotations

from tests.support.cli import fix_line, specreg


def test_fractional_steps_get_command_line_advice():
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-num-steps", "3.5")
    assert result.returncode == 1
    assert "[SR143] --speculative-num-steps takes a whole number, got '3.5'" in result.stdout
    assert "(str)" not in result.stdout and "as an int" not in result.stdout
    assert fix_line(result.stdout, "SR143") == "pass a whole number to --speculative-num-steps. "
