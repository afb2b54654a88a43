"""One verdict per config: `specreg plan` exits as `specreg check` does on every config the CLI
tests and the docs type (specreg/cli/verdict.py), in text and in JSON, and the two HiSparse
spellings differ only by the documented rule (SR161)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import specreg

EAGLE_TREE = ("--speculative-algorithm", "eagle", "--speculative-num-steps", "3",
              "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8")
SGLANG_HISPARSE = ("--enable-hisparse", "--disable-radix-cache")

#: The configs of tests/cli/test_command*.py, tests/ground/test_suggest.py, the README and the issue
#: that asked for one verdict (a HiSparse tree: `plan` printed three errors and exited 0).
CONFIGS = {
    "sound": ("--speculative-algorithm", "eagle"),
    "tree": EAGLE_TREE,
    "misspelt algorithm": ("--speculative-algorithm", "eaglee"),
    "out of range": ("--speculative-algorithm", "eagle", "--speculative-num-steps", "0"),
    "every problem at once": ("--speculative-algorithm", "eagle", "--speculative-num-steps", "0",
                              "--speculative-eagle-topk", "x", "--kv-cache", "nope"),
    "fractional steps": ("--speculative-algorithm", "eagle", "--speculative-num-steps", "3.5"),
    "dspark one token": ("--speculative-algorithm", "dspark",
                         "--speculative-num-draft-tokens", "1"),
    "a cache as algorithm": ("--speculative-algorithm", "hisparse"),
    "NONE": ("--speculative-algorithm", "NONE"),
    "cache option without a value": ("--speculative-algorithm", "eagle", "--kv-cache",
                                     "hisparse", "--kv-cache-option", "novalue"),
    "two caches": ("--speculative-algorithm", "eagle", "--kv-cache", "none",
                   "--enable-hisparse"),
    "SGLang's HiSparse tree": (*EAGLE_TREE, *SGLANG_HISPARSE),
    "specreg's HiSparse tree": (*EAGLE_TREE, "--kv-cache", "hisparse"),
    "misspelt substitution": (*EAGLE_TREE, *SGLANG_HISPARSE, "--substitute", "hisparse_swp"),
    "within the budget": ("--speculative-algorithm", "eagle", *SGLANG_HISPARSE,
                          "--memory-budget", "16GiB"),
    "over the budget": ("--speculative-algorithm", "eagle", "--kv-cache", "hisparse",
                        "--speculative-num-steps", "32", "--speculative-eagle-topk", "8",
                        "--speculative-num-draft-tokens", "1024", "--memory-budget", "16GiB"),
    "unreadable budget": ("--speculative-algorithm", "eagle", "--memory-budget", "lots"),
}


@pytest.mark.parametrize("flags", CONFIGS.values(), ids=CONFIGS.keys())
def test_plan_exits_as_check_does(flags):
    check, plan = specreg("check", *flags), specreg("plan", *flags)
    assert check.returncode in (0, 1), check.stdout + check.stderr
    assert plan.returncode == check.returncode, (
        f"check {check.returncode}, plan {plan.returncode}\n{check.stdout}\n{plan.stderr}"
    )
    errors = [line for line in check.stdout.splitlines() if line.startswith("error:")]
    assert bool(errors) == bool(check.returncode)


@pytest.mark.parametrize("flags", [CONFIGS["SGLang's HiSparse tree"], CONFIGS["sound"]],
                         ids=["refused", "sound"])
def test_json_answers_say_what_the_exit_status_says(flags):
    for command in ("check", "plan"):
        result = specreg(command, *flags, "--json")
        data = json.loads(result.stdout)
        ok = result.returncode == 0
        assert data.get("ok", True) is ok and data.get("exit_status", 0) == result.returncode


def test_the_hisparse_tree_is_one_refusal_with_the_codes_of_sglangs_runtime():
    plan = specreg("plan", *CONFIGS["SGLang's HiSparse tree"], "--json")
    data = json.loads(plan.stdout)
    assert plan.returncode == 1 and data["ok"] is False and data["exit_status"] == 1
    assert [e["code"] for e in data["errors"]] == ["SR171", "SR167", "SR168"]


def test_the_two_hisparse_spellings_differ_by_the_documented_rule():
    """--kv-cache hisparse is specreg's swapper alone: sound, with a notice that says SGLang's
    runtime rules were not checked and how to check them; explain SR161 states the rule."""
    ours = specreg("check", *CONFIGS["specreg's HiSparse tree"])
    assert ours.returncode == 0, ours.stdout
    assert "configures specreg's HiSparse swapper alone" in ours.stdout
    assert "use --enable-hisparse --disable-radix-cache" in ours.stdout
    explained = specreg("explain", "SR161").stdout
    assert "--kv-cache hisparse" in explained and "SR167-SR173" in explained


def test_a_misspelt_substitution_is_refused_first_with_the_closest_name():
    result = specreg("check", *CONFIGS["misspelt substitution"])
    codes = [line.split("]")[0].split("[")[1] for line in result.stdout.splitlines()
             if line.startswith("error:")]
    assert result.returncode == 1 and codes[0] == "SR181"
    assert "SR167" not in codes and "SR168" not in codes  # they depend on the substitution
    assert "Did you mean 'hisparse_swap'?" in result.stdout


def test_explain_sr167_names_the_substitution_that_lifts_it():
    text = specreg("explain", "SR167").stdout
    assert "hisparse_swap" in text and "SPECREG_SGLANG_SUBSTITUTE=hisparse_swap" in text


def test_check_builds_the_objects_that_need_torch_unless_told_not_to():
    """eagle's objects need torch: check builds them in a child process (objects_checked), and
    with --no-torch-build says that it did not."""
    result = specreg("check", "--speculative-algorithm", "eagle", "--json")
    assert json.loads(result.stdout)["objects_checked"] is True
    result = specreg("check", "--speculative-algorithm", "eagle", "--no-torch-build", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["objects_checked"] is False
    text = specreg("check", "--speculative-algorithm", "eagle", "--no-torch-build").stdout
    assert "`specreg plan`, builds and checks them" in text
