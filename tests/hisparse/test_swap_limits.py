"""specreg's own limits on SGLang's HiSparse swap once `hisparse_swap` lifts SGLang's 2-4 steps."""

from __future__ import annotations

import json

import pytest

from specreg.framework_args.rules import (
    DSA_PAGE_SIZE,
    hisparse_runtime_problems,
    hisparse_swap_limits,
)
from tests.support.cli import specreg

FACTS = {"enable_hisparse": True, "disable_radix_cache": True,
         "target_architecture": "DeepseekV32ForCausalLM"}
SWAP = ("hisparse_swap",)


@pytest.mark.parametrize("draft_tokens", [1, 2, 4, 5, 8, 16, DSA_PAGE_SIZE - 1])
def test_any_draft_token_count_the_extra_page_holds_is_accepted(draft_tokens):
    assert hisparse_runtime_problems(FACTS, 1, draft_tokens, SWAP) == []
    assert hisparse_swap_limits(2048, 4096, DSA_PAGE_SIZE, draft_tokens) == []


def test_a_verify_beyond_the_extra_page_is_sr184_naming_the_flag():
    (found,) = hisparse_runtime_problems(FACTS, 1, DSA_PAGE_SIZE, SWAP)
    assert found.code == "SR184" and found.field == "num_draft_tokens"
    assert f"--speculative-num-draft-tokens {DSA_PAGE_SIZE - 1}" in found.fix
    assert hisparse_swap_limits(2048, 4096, 8, 7) == []
    assert [p.code for p in hisparse_swap_limits(2048, 4096, 8, 8)] == ["SR184"]


def test_top_k_above_the_device_buffer_is_sr183_with_sglangs_effective_sizes():
    # SGLang's model runner takes the model's index_topk over --hisparse-config's top_k, and
    # the buffer defaults to twice the config's top_k (sglang.srt.mem_cache.sparsity)
    config = {"hisparse_config": {"top_k": 1024}}
    assert hisparse_runtime_problems({**FACTS, **config, "index_topk": 2048}, 1, 5, SWAP) == []
    (found,) = hisparse_runtime_problems({**FACTS, **config, "index_topk": 4096}, 1, 5, SWAP)
    assert found.code == "SR183" and "device_buffer_size" in found.fix
    sized = {"hisparse_config": {"top_k": 1024, "device_buffer_size": 8192}}
    assert hisparse_runtime_problems({**FACTS, **sized, "index_topk": 4096}, 1, 5, SWAP) == []
    # without the substitution SGLang's manager limits are the ones reported, not specreg's
    assert {p.code for p in hisparse_runtime_problems(
        {**FACTS, **config, "index_topk": 4096}, 1, 5)} == {"SR167"}


def test_specreg_check_with_the_substitution_reports_specregs_limit(model_dirs):
    base = ["check", "--json", "--speculative-algorithm", "EAGLE", "--model-path",
            str(model_dirs["dsa"]), "--enable-hisparse", "--disable-radix-cache",
            "--speculative-num-steps", "7", "--speculative-eagle-topk", "1",
            "--substitute", "hisparse_swap", "--hisparse-config"]
    small = specreg(*base, '{"top_k": 2048, "device_buffer_size": 1024}')
    assert small.returncode == 1
    assert [e["code"] for e in json.loads(small.stdout)["errors"]] == ["SR183"]
    sized = specreg(*base, '{"top_k": 2048, "device_buffer_size": 4096}')
    assert sized.returncode == 0, sized.stdout + sized.stderr
