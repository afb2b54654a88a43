"""Each framework's defaults and the rules its runtime enforces (SGLang 0.5.23, vLLM 0.33.0).

SGLang's model-dependent EAGLE-family defaults, the DSA targets HiSparse needs, its HiSparse
runtime rules (enforced only after the weights load in SGLang, reported at config time here) and
vLLM's method aliases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specreg.errors import Problem, problem
from specreg.integers import is_int

#: Architectures whose EAGLE-family defaults are (5, 4, 8) in SGLang 0.5.23; every other is (3, 1, 4).
WIDE_TREE_ARCHITECTURES = frozenset({"LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"})
WIDE_TREE_DEFAULTS = (5, 4, 8)
CHAIN_DEFAULTS = (3, 1, 4)
EAGLE_FAMILY = frozenset({"eagle", "eagle3", "nextn"})
#: vLLM method names that are aliases of a specreg algorithm.
VLLM_METHODS: Mapping[str, str] = {"mtp": "nextn", "deepseek_mtp": "nextn"}
#: DeepSeek sparse-attention targets (SGLang's is_deepseek_dsa), DeepSeek V4 and MiniMax M3.
DSA_ARCHITECTURES = frozenset(
    {
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "DeepseekV3ForCausalLMNextN",
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
        "GlmMoeDsaForCausalLM",
        "GlmMoeDsaForCausalLMNextN",
        "DeepseekV4ForCausalLM",
        "MiniMaxM3ForCausalLM",
    }
)


def model_defaults(arch: str | None, algorithm: str | None = None) -> tuple[int, int, int]:
    """SGLang's (num_steps, topk, num_draft_tokens) for a draft of this target: STANDALONE's
    are always the chain's; the EAGLE family's depend on the target architecture."""
    if algorithm is not None and algorithm.lower() == "standalone":
        return CHAIN_DEFAULTS
    return WIDE_TREE_DEFAULTS if arch in WIDE_TREE_ARCHITECTURES else CHAIN_DEFAULTS


def hisparse_runtime_problems(
    framework: Mapping[str, Any], topk: int, num_draft_tokens: int,
    substitutions: tuple[str, ...] | None = (),
) -> list[Problem]:
    """SGLang's HiSparse rules that its runtime (swap manager, hooks) enforces, as coded problems.

    With the `hisparse_swap` substitution (the HiSparse plugin's, `specreg_hisparse.sglang_seam`)
    specreg's swapper replaces SGLang's swap manager, so the manager's own limits (SR167, SR168) do not apply, and
    specreg's (SR183, SR184) do. `substitutions=None` means they are unknown (the switch named
    one that does not exist, refused on its own): then neither set is reported."""
    if not framework.get("enable_hisparse"):
        return []
    out: list[Problem] = []
    arch = framework.get("target_architecture")
    sparse = framework.get("target_is_sparse")  # SGLang's own answer, inside SGLang
    if arch is not None and (arch not in DSA_ARCHITECTURES if sparse is None else not sparse):
        out.append(problem(
            "SR169", f"--enable-hisparse needs a DSA target; --model-path is a {arch}",
            accepted="DeepSeek V3.2 / GLM-5 (DSA), DeepSeek V4, MiniMax M3",
            fix="use a DSA --model-path, or drop --enable-hisparse", field="model_path",
        ))
    if not framework.get("disable_radix_cache"):
        out.append(problem(
            "SR170", "--enable-hisparse requires --disable-radix-cache",
            accepted="--disable-radix-cache", fix="add --disable-radix-cache", field="disable_radix_cache",
        ))
    if topk != 1:
        out.append(problem(
            "SR171", f"--enable-hisparse supports linear speculation only; topk is {topk}",
            accepted="--speculative-eagle-topk 1", fix="set --speculative-eagle-topk 1", field="topk",
        ))
    if framework.get("speculative_adaptive"):
        out.append(problem(
            "SR172", "--enable-hisparse sizes swap state statically; --speculative-adaptive is on",
            accepted="no --speculative-adaptive", fix="drop --speculative-adaptive",
            field="speculative_adaptive",
        ))
    if framework.get("enable_mixed_chunk"):
        out.append(problem(
            "SR173", "--enable-hisparse does not support --enable-mixed-chunk",
            accepted="no --enable-mixed-chunk", fix="drop --enable-mixed-chunk", field="enable_mixed_chunk",
        ))
    if substitutions is None:
        return out
    if "hisparse_swap" in substitutions:
        return out + substituted_swap_problems(framework, num_draft_tokens)
    if not 2 <= num_draft_tokens <= 4:
        out.append(problem(
            "SR167",
            f"SGLang's HiSparse swap manager takes 2-4 draft tokens; the plan verifies "
            f"{num_draft_tokens} (SGLang would fail after loading the weights)",
            accepted="2 <= draft tokens <= 4",
            fix="set --speculative-num-steps 3 with --speculative-eagle-topk 1 (4 draft tokens), "
            "or fewer",
            field="num_draft_tokens",
        ))
    top_k = (framework.get("hisparse_config") or {}).get("top_k") or framework.get("index_topk") or 2048
    if is_int(top_k) and (top_k < 1024 or num_draft_tokens * top_k > 8192):
        out.append(problem(
            "SR168",
            f"SGLang's HiSparse swap needs top_k >= 1024 and draft tokens x top_k <= 8192; "
            f"got {num_draft_tokens} x {top_k} = {num_draft_tokens * top_k}",
            accepted="top_k >= 1024 and draft tokens x top_k <= 8192",
            fix="lower --speculative-num-draft-tokens or the top_k in --hisparse-config",
            field="num_draft_tokens",
        ))
    return out


#: SGLang's DSA KV pool asserts 64-token physical pages; HiSparse's extra page is one of them.
DSA_PAGE_SIZE = 64


def substituted_swap_problems(framework: Mapping[str, Any], num_draft_tokens: int) -> list[Problem]:
    """specreg's own limits on SGLang's HiSparse swap under `hisparse_swap` (SR183, SR184), with
    SGLang's effective sizes: top_k is the model's index_topk when it has one (SGLang's
    model runner reads it first), the device buffer `--hisparse-config`'s device_buffer_size
    (default 2 x its top_k), the extra page one DSA page."""
    config = framework.get("hisparse_config") or {}
    config_top_k = config.get("top_k") or 2048
    top_k = framework.get("index_topk") or config_top_k
    buffer = config.get("device_buffer_size") or 2 * config_top_k
    page = framework.get("page_size") or DSA_PAGE_SIZE
    if not all(is_int(v) for v in (top_k, buffer, page)):
        return []  # SGLang refuses a malformed --hisparse-config itself
    return hisparse_swap_limits(top_k, buffer, page, num_draft_tokens)


def hisparse_swap_limits(
    top_k: int, device_buffer_size: int, page_size: int | None, num_draft_tokens: int
) -> list[Problem]:
    """specreg's own limits on a substituted HiSparse swap, in SGLang's flags (empty: fits).

    - SR183: the hot buffer (``device_buffer_size``) holds every token one step selects, so it
      must be at least top_k.
    - SR184: the extra page holds the newest token and the verify tokens, so
      ``num_draft_tokens + 1 <= page_size`` (SGLang's ``prepare_verify`` check, reported at
      start-up instead of at the first verify).
    Any number of draft tokens >= 1 and any top_k >= 1 work otherwise.
    """
    found: list[Problem] = []
    if top_k > device_buffer_size:
        found.append(problem(
            "SR183",
            f"HiSparse top_k={top_k} exceeds the device buffer of {device_buffer_size} tokens "
            "(one step's selection must be resident at once)",
            accepted=f"device_buffer_size >= top_k = {top_k}",
            fix=f"raise it: --hisparse-config '{{\"device_buffer_size\": {max(top_k, 4096)}}}' "
            "(with the top_k you use), or lower top_k in --hisparse-config",
            field="hisparse_config.device_buffer_size",
        ))
    if page_size is not None and num_draft_tokens + 1 > page_size:
        found.append(problem(
            "SR184",
            f"{num_draft_tokens} draft tokens do not fit HiSparse's extra page of {page_size} "
            f"slots (it holds the newest token and every verify token: {num_draft_tokens + 1})",
            accepted=f"--speculative-num-draft-tokens <= {page_size - 1}",
            fix=f"set --speculative-num-draft-tokens {page_size - 1} or fewer",
            field="num_draft_tokens",
        ))
    return found
