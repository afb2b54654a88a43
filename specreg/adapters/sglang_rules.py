"""SGLang's own defaults and HiSparse target rule, asked of SGLang inside an SGLang process.

specreg's standalone copy of these rules (`specreg.framework_args`: `model_defaults`,
`DSA_ARCHITECTURES`) serves the CLI, where no SGLang is installed. Inside SGLang the adapter asks
SGLang instead, so the two can never drift apart there:

- the EAGLE-family defaults when steps, topk and draft tokens are all unset:
  `sglang.srt.arg_groups.speculative_hook._auto_choose_speculative_params` (model- and
  algorithm-dependent: STANDALONE and Grok included);
- whether the target may run HiSparse: SGLang's `is_deepseek_dsa` (architecture and
  `index_topk`), `is_deepseek_v4` and `is_minimax_sparse`, the test `validate_hisparse` asserts.

Each answer is SGLang's, read from the `ServerArgs` record SGLang is resolving.
"""

from __future__ import annotations

from typing import Any

#: SGLang algorithms whose unset numbers SGLang fills with `_auto_choose_speculative_params`.
AUTO_PARAMS_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})
_NUMBERS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def hf_config(server_args: Any) -> Any:
    """The target's Hugging Face config, as SGLang's resolution builds and memoizes it."""
    from sglang.srt.arg_groups.overrides import model_config_of

    return model_config_of(server_args).hf_config


def auto_params(server_args: Any) -> tuple[int, int, int]:
    """SGLang's (steps, topk, draft tokens) for this target and algorithm."""
    from sglang.srt.arg_groups.speculative_hook import _auto_choose_speculative_params

    architecture = hf_config(server_args).architectures[0]
    return tuple(_auto_choose_speculative_params(server_args, architecture))  # type: ignore[return-value]


def hisparse_target(server_args: Any) -> bool:
    """Whether SGLang's validate_hisparse accepts the target model for --enable-hisparse."""
    from sglang.srt.configs.model_config import is_deepseek_dsa, is_deepseek_v4, is_minimax_sparse

    config = hf_config(server_args)
    return bool(is_deepseek_dsa(config) or is_deepseek_v4(config) or is_minimax_sparse(config))


def with_sglang_rules(server_args: Any, flags: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`flags` with SGLang's defaults filled in where SGLang fills them, and the facts SGLang
    answers (`target_is_sparse` with HiSparse on) for `specreg.adapters.common.resolve_for_framework`."""
    flags = dict(flags)
    facts: dict[str, Any] = {}
    algorithm = str(flags.get("speculative_algorithm", "")).upper()
    if (
        algorithm in AUTO_PARAMS_ALGORITHMS
        and not flags.get("speculative_adaptive")
        and all(flags.get(name) is None for name in _NUMBERS)
    ):
        flags.update(zip(_NUMBERS, auto_params(server_args), strict=True))
    if flags.get("enable_hisparse"):
        facts["target_is_sparse"] = hisparse_target(server_args)
    return flags, facts
