"""`specreg demo`'s flags (specreg/cli/demo_args.py): each checked before anything runs, typed as a
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
    from specreg.cli.demo_args import MAX_STEPS, PROMPT_LEN, TOY_POSITIONS, VERIFY_MARGIN
    from specreg.testing import ToyConfig

    assert ToyConfig().max_positions == TOY_POSITIONS
    assert ToyConfig().window == VERIFY_MARGIN
    assert MAX_STEPS == TOY_POSITIONS - PROMPT_LEN - VERIFY_MARGIN


def test_demo_checks_the_plot_format_before_the_run(tmp_path):
    """Was: the whole demo ran, then matplotlib's traceback for an unknown format."""
    result = specreg("demo", "--plot", "out.txt", cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""  # refused before any row ran
    assert "Traceback" not in result.stderr
    assert "[SR144] --plot out.txt: its extension '.txt' names no image format" in result.stderr
    assert fix_line(result.stderr, "SR144").startswith("name the image with such an extension, "
                                                       "e.g. --plot out.png")


def test_demo_metrics_without_prometheus_client_is_the_missing_extra_code(monkeypatch, tmp_path):
    """SR131, the catalog's code for the metrics extra missing (SR144 is for the file)."""
    import argparse
    import importlib.util

    from specreg import Registry
    from specreg.cli.demo_args import add_demo_arguments, demo_arg_problems

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "prometheus_client" else real(name, *a))
    parser = argparse.ArgumentParser()
    add_demo_arguments(parser)
    args = parser.parse_args(["--metrics", str(tmp_path / "m.prom")])
    (found,) = demo_arg_problems(args, Registry())
    assert found.code == "SR131" and "pip install 'specreg[metrics]'" in found.fix
