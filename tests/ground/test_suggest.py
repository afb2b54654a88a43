"""The suggestions of specreg/_suggest.py, typed as a user types them: a cache passed as an
algorithm, SGLang's NONE, a misspelt flag, a misspelt vLLM custom_class proposer."""

from __future__ import annotations

from tests.support.cli import fix_line, specreg


def test_a_cache_passed_as_algorithm_says_use_the_cache_flag():
    result = specreg("check", "--speculative-algorithm", "hisparse")
    assert result.returncode == 1
    assert "[SR146] 'hisparse' is a KV-cache backend, not a speculative algorithm" in result.stdout
    assert "Did you mean 'dspark'" not in result.stdout
    assert fix_line(result.stdout, "SR146").startswith(
        "turn hisparse on with --enable-hisparse --disable-radix-cache, e.g. "
        "--speculative-algorithm eagle --enable-hisparse --disable-radix-cache"
    )


def test_none_says_drop_the_flag():
    result = specreg("check", "--speculative-algorithm", "NONE")
    assert result.returncode == 1
    assert "turns speculative decoding off" in result.stdout
    assert fix_line(result.stdout, "SR146").startswith("drop --speculative-algorithm")


def test_misspelt_flag_gets_a_suggestion():
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-eagle-top-k", "4")
    assert result.returncode == 2
    assert "Did you mean '--speculative-eagle-topk'?" in result.stderr
    assert fix_line(result.stderr, "SR142") == "use the flag suggested, or remove it. "


def test_a_misspelt_vllm_proposer_is_refused_at_lookup_with_the_closest_name():
    """vLLM's custom_class model names a class by its dotted path; a typo used to return a
    class anyway and fail only when vLLM built the proposer."""
    code = (
        "import importlib\n"
        "module = importlib.import_module('specreg.adapters.vllm_proposers')\n"
        "assert module.ngram.algorithm == 'ngram'\n"
        "assert not hasattr(module, 'ngarm')\n"
        "try:\n"
        "    module.ngarm\n"
        "except AttributeError as exc:\n"
        "    print(exc.code, exc)\n"
    )
    import subprocess
    import sys

    env = {**__import__("os").environ, "SPECREG_PLUGINS": "lookup"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("SR101 [SR101] unknown algorithm 'ngarm'. Did you mean 'ngram'?")
    assert 'the speculative config\'s "model" (specreg.adapters.vllm_proposers.NAME)' in result.stdout
