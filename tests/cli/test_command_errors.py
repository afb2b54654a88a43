"""Every error of the command line, typed as a user types it (a real subprocess): one exit-status
convention (0 sound, 1 a coded problem in the input, 2 a usage error), a catalog code for every
argument error, argparse's own included, and JSON errors under `--json` on every subcommand."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import fix_line, specreg


@pytest.mark.parametrize(
    "command, status, code, words",
    [
        # one mistake, one exit status, whichever command it is typed to
        (("demo", "--algorithm", "eagel"), 1, "SR101", "Did you mean 'eagle'?"),
        (("check", "--speculative-algorithm", "eagel"), 1, "SR101", "Did you mean 'eagle'?"),
        (("demo", "--kv-cache", "bogus"), 1, "SR102", "unknown cache 'bogus'"),
        # argparse's own errors, coded
        (("demo", "--seed", "abc"), 1, "SR143", "--seed takes a whole number, got 'abc'"),
        (("chek",), 2, "SR152", "no subcommand 'chek'. Did you mean 'check'?"),
        ((), 2, "SR152", "the following arguments are required"),
        (("check", "--speculative-algorithm"), 2, "SR152", "expected one argument"),
        (("check", "--speculative-algoritm", "eagle"), 2, "SR142", "Did you mean"),
        (("explain", "SR1O1"), 1, "SR153", "no error code 'SR1O1'"),
    ],
)
def test_every_argument_error_is_coded_under_one_exit_status(command, status, code, words):
    result = specreg(*command)
    out = result.stdout + result.stderr
    assert result.returncode == status, out
    assert f"[{code}]" in out and words in out, out
    assert "Traceback" not in out and "usage:" not in out  # no argparse text without a code


@pytest.mark.parametrize("command", [(), ("check",), ("plan",), ("demo",), ("list",), ("explain",)])
def test_help_states_the_exit_status_convention(command):
    result = specreg(*command, "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "exit status: 0 sound; 1 a coded problem in the input" in text
    assert "2 a usage error (the command line does not parse)" in text


@pytest.mark.parametrize(
    "command, status, code",
    [
        (("plan", "--speculative-algorithm", "eagel", "--json"), 1, "SR101"),
        (("check", "--speculative-algorithm", "eagel", "--json"), 1, "SR101"),
        (("demo", "--seed", "abc", "--json"), 1, "SR143"),
        (("explain", "SR1O1", "--json"), 1, "SR153"),
        (("chek", "--json"), 2, "SR152"),
        (("plan", "--bogus", "--json"), 2, "SR142"),
    ],
)
def test_json_answers_errors_in_json_with_the_codes(command, status, code):
    result = specreg(*command)
    assert result.returncode == status, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["exit_status"] == status
    assert [e["code"] for e in data["errors"]] == [code]
    assert data["errors"][0]["fix"] and data["errors"][0]["text"].startswith(f"[{code}]")


def test_list_json_reports_a_load_failure_with_its_code_and_exit_status():
    result = specreg("list", "--json", plugins="eagle,dspak")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["exit_status"] == 1
    assert [f["code"] for f in data["failures"]] == ["SR141"]


@pytest.mark.parametrize("algorithm", ["dspark", "dflash"])
def test_a_draft_checkpoint_algorithm_without_a_draft_path_is_one_error_naming_the_flag(
    algorithm, model_dirs
):
    for extra in ((), ("--model-path", str(model_dirs["llama"])),
                  ("--speculative-num-draft-tokens", "4", "--model-path", str(model_dirs["qwen2"]))):
        result = specreg("check", "--speculative-algorithm", algorithm, *extra)
        assert result.returncode == 1, result.stdout
        errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "[SR178]" in errors[0], result.stdout
        assert fix_line(result.stdout, "SR178").startswith(
            f"set --speculative-draft-model-path to the {algorithm} draft checkpoint"
        )
        assert "SR303" not in result.stdout and "SR304" not in result.stdout
        assert "draft config.json" not in result.stdout
    given = specreg("check", "--speculative-algorithm", "dspark", "--speculative-draft-model-path",
                    str(model_dirs["dspark-draft"]))
    assert "SR178" not in given.stdout


def test_a_dspark_draft_bundled_in_the_target_is_found_as_sglang_finds_it(tmp_path, model_dirs):
    target = json.loads((model_dirs["dspark-draft"] / "config.json").read_text())
    (tmp_path / "dspark").mkdir()
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (tmp_path / "dspark" / "config.json").write_text(json.dumps(target))
    result = specreg("check", "--speculative-algorithm", "dspark", "--model-path", str(tmp_path))
    assert result.returncode == 0 and "SR178" not in result.stdout, result.stdout


@pytest.mark.parametrize("command", ["check", "plan"])
def test_kv_cache_none_is_accepted_and_its_conflict_with_hisparse_named(command):
    alone = specreg(command, "--speculative-algorithm", "eagle", "--kv-cache", "none")
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "unknown cache" not in alone.stdout + alone.stderr
    both = specreg(command, "--speculative-algorithm", "eagle", "--kv-cache", "none",
                   "--enable-hisparse", "--disable-radix-cache")
    out = both.stdout + both.stderr
    assert both.returncode == 1 and "[SR179]" in out and "unknown cache" not in out
    assert "--kv-cache none asks for no KV-cache backend, but --enable-hisparse" in out
    assert fix_line(out, "SR179").startswith("drop --kv-cache for HiSparse, or drop --enable-hisparse")


