"""Each issue's "done when" commands, run exactly as a user types them."""

import json
import subprocess
import sys


def specreg(*args):
    return subprocess.run([sys.executable, "-m", "specreg", *args], capture_output=True, text=True)


def plan_json(*args):
    result = specreg("plan", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_core_explain_and_suggestion():
    assert specreg("explain", "SR100").returncode == 0
    result = specreg("check", "--speculative-algorithm", "eaglee")
    assert result.returncode == 1 and "Did you mean 'eagle'" in result.stdout


def test_eagle_tree_widths():
    data = plan_json("--speculative-algorithm", "eagle", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8")
    for worker in ("target", "draft"):
        assert data["widths"][worker] == {"draft_decode": 4, "draft_extend": 8, "target_verify": 8}


def test_eagle_chain_mismatch_is_rewritten_as_sglang_does_with_a_coded_notice():
    # SGLang silently sets draft tokens to steps + 1 under topk 1; specreg adopts it and says so.
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-eagle-topk", "1",
                     "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "6")
    assert result.returncode == 0 and "SR162" in result.stdout and "Fix:" in result.stdout
    data = plan_json("--speculative-algorithm", "eagle", "--speculative-eagle-topk", "1",
                     "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "6")
    assert data["config"]["num_draft_tokens"] == 4


def test_dspark_one_draft_token_says_what_to_set():
    result = specreg("check", "--speculative-algorithm", "dspark", "--speculative-num-draft-tokens", "1")
    assert result.returncode == 1
    assert "SR300" in result.stdout and "--speculative-num-draft-tokens" in result.stdout
    assert "SR103" not in result.stdout  # the plugin's own message replaces the generic one


def test_dspark_dense_widths(tmp_path):
    # specreg's own fields: without a draft checkpoint the dense defaults apply (SR308 notice);
    # SGLang's flags without --speculative-draft-model-path are SR178, as SGLang refuses them
    config = tmp_path / "spec.json"
    config.write_text(json.dumps({"algorithm": "dspark", "num_draft_tokens": 8}))
    data = plan_json("--config", str(config))
    assert data["widths"]["target"]["target_verify"] == 8
    assert data["widths"]["draft"]["target_verify"] == 7


def test_dspark_block_size_disagreeing_with_n_reports_both(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"block_size": 4, "mask_token_id": 0, "markov_rank": 8,
                                  "markov_head_type": "vanilla"}))
    result = specreg("check", "--speculative-algorithm", "dspark",
                     "--speculative-num-draft-tokens", "8", "--speculative-draft-config", str(config))
    assert result.returncode == 1 and "SR305" in result.stdout
    assert "4" in result.stdout and "8" in result.stdout


def test_hisparse_any_step_count_and_the_capacity_error():
    four = plan_json("--speculative-algorithm", "eagle", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                     "--kv-cache", "hisparse")
    assert four["cache"] == "hisparse" and four["widths"]["target"]["target_verify"] == 4
    assert four["cache_swapper"].startswith("HiSparseSwapper")
    one = plan_json("--speculative-algorithm", "eagle", "--speculative-num-steps", "1",
                    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2",
                    "--kv-cache", "hisparse")
    assert one["widths"]["target"]["target_verify"] == 2
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-num-steps", "7",
                     "--speculative-eagle-topk", "1", "--kv-cache", "hisparse",
                     "--kv-cache-option", "max_steps=4")
    assert result.returncode == 1 and "SR400" in result.stdout and "max_steps=8" in result.stdout
