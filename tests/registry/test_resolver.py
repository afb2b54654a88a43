"""The resolver (specreg/registry/resolver.py) as a user meets it through `specreg check`: one cause, one
error; a typo in one place hides no problem elsewhere; an environment input (the kernel
backend) reported beside the config's problems."""

from __future__ import annotations

import re

from tests.support.cli import fix_line, specreg


def test_zero_draft_tokens_does_not_blame_the_plugin():
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-num-draft-tokens", "0")
    assert result.returncode == 1
    assert "SR115" not in result.stdout
    assert re.findall(r"\[SR\d+\]", result.stdout) == ["[SR103]"]
    assert fix_line(result.stdout, "SR103") == "set --speculative-num-draft-tokens within [2, 1024]. "


def test_huge_num_steps_reports_one_sr103():
    result = specreg("check", "--speculative-algorithm", "eagle",
                     "--speculative-num-steps", "99999999999999999999999")
    assert result.returncode == 1
    assert re.findall(r"\[SR\d+\]", result.stdout) == ["[SR103]"]
    assert "(inferred)" not in result.stdout
    assert fix_line(result.stdout, "SR103") == "set --speculative-num-steps within [1, 32]. "


def test_cache_typo_does_not_hide_the_algorithm_problem():
    result = specreg("check", "--speculative-algorithm", "dspark",
                     "--speculative-num-draft-tokens", "1", "--kv-cache", "hisparce")
    assert result.returncode == 1
    assert "Did you mean 'hisparse'?" in result.stdout
    assert fix_line(result.stdout, "SR102").startswith("pass one of them to --kv-cache")
    assert "--speculative-num-draft-tokens" in fix_line(result.stdout, "SR300")
    assert "--speculative-draft-model-path" in fix_line(result.stdout, "SR178")
    assert "3 problem(s) found." in result.stdout


def test_check_reports_a_bad_kernel_backend_variable_with_the_configs_problems(monkeypatch):
    """`check` answers what `resolve` would refuse: SR116 for SPECREG_KERNEL_BACKEND, beside the
    config's own problems, and nothing for a sound config under a valid backend."""
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "cuda")
    result = specreg("check", "--speculative-algorithm", "dspark", "--speculative-num-draft-tokens", "1")
    assert result.returncode == 1
    assert "[SR300]" in result.stdout and "[SR116]" in result.stdout
    assert fix_line(result.stdout, "SR116").startswith(
        "set SPECREG_KERNEL_BACKEND to one of them, or unset it"
    )
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "torch")
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-num-steps", "3")
    assert result.returncode == 0, result.stdout
