"""The lossy acceptance rules on a chain (`specreg.acceptance_rules`): public wrappers that validate, choose the backend and dispatch.

Layout and coins are the chain family's (`specreg.kernels.chain`): candidates [b, n],
target_probs [b, n, V], draft_probs [b, n-1, V] or None, coins [b, >= n-1], final_coins [b],
verify_lens [b]. Rules (`RuleParams`):

- thresholds (SGLang's `tree_speculative_sampling_target_only` on a chain): accept draft x of
  row i iff `coin_i * q(x) * threshold_acc < p(x)` or `p(x) >= threshold_single` (q(x) = 1 for
  the target-only rule); the emitted token is drawn exactly as the lossless rule draws it
  (residual after a rejection). Thresholds (1, 1) would be the lossless rule; the verifiers
  never call this family for it.
- typical (Medusa; vLLM's TypicalAcceptanceSampler): accept x iff
  `p(x) > min(posterior_threshold, posterior_alpha * exp(-H(p_i)))`; after a rejection the
  emitted token is the row's argmax, after a full run a draw from p. q is not read.
- synthetic: the accepted count is the leading positions i < limit with `coin_0 < rates[i]`
  (so P(accept > i) = rates[i] for non-increasing rates); the emitted token is a draw from p of
  the row after them. Greedy verification (`verify_chain_synthetic_greedy`) takes the argmax of
  that row instead.

None of them emits the target distribution (only greedy verification under thresholds or
typical acceptance stays exact, and it does not come here). Family: `types` (`RuleParams`),
`reference` (per-request loops, the oracle), `torch_impl` (batched; the CPU path),
`triton_impl` (one program per request, vocab in BLOCK_V tiles, int64 offsets).
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg.kernels.chain import _fill_coins
from specreg.kernels.chain.checks import check_chain
from specreg.kernels.chain.types import BackendChoice, ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.relaxed.torch_impl import (
    verify_chain_relaxed_torch,
    verify_chain_synthetic_greedy_torch,
)
from specreg.kernels.relaxed.triton_impl import verify_chain_relaxed_triton
from specreg.kernels.relaxed.types import SYNTHETIC, RuleParams
from specreg.kernels.sampling import uniform_coins

__all__ = ["RuleParams", "verify_chain_relaxed", "verify_chain_synthetic_greedy"]


def verify_chain_relaxed(
    candidates: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    *,
    rule: RuleParams,
    coins: torch.Tensor | None = None,
    final_coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    seed: int | None = None,
    offsets: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Chain verification under the lossy `rule` (module docstring); the inputs, their checks
    and the coins are `verify_chain_sampling`'s."""
    check_chain(
        candidates, target_probs, "target_probs",
        verify_lens=verify_lens, draft_probs=draft_probs, coins=coins, final_coins=final_coins,
        offsets=offsets, probabilities=True, check_values=check_values,
    )
    b, n, _ = target_probs.shape
    coins, final_coins = _fill_coins(
        b, n, candidates.device, coins, final_coins,
        seed=seed, offsets=offsets, generator=generator,
    )
    inputs = ChainSamplingInputs(
        candidates=candidates, target_probs=target_probs, draft_probs=draft_probs, coins=coins,
        final_coins=final_coins, verify_lens=verify_lens,
    )
    if select_backend(candidates, requested=backend) == "triton":
        return verify_chain_relaxed_triton(inputs, rule, block_v=block_v)
    return verify_chain_relaxed_torch(inputs, rule)


def verify_chain_synthetic_greedy(
    candidates: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    rule: RuleParams,
    coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    seed: int | None = None,
    offsets: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
) -> ChainVerifyResult:
    """Greedy verification under synthetic acceptance: the synthetic count from `coins` [b]
    (one per request; drawn as `uniform_coins` when missing), then the argmax of the row after
    the accepted drafts. Torch ops on any device ([b] and one [b, V] row read)."""
    if rule.mode != SYNTHETIC:
        raise ValueError("verify_chain_synthetic_greedy takes a synthetic rule")
    check_chain(
        candidates, target_logits, "target_logits", verify_lens=verify_lens, offsets=offsets,
        final_coins=coins, probabilities=False, check_values=check_values,
    )
    if coins is None:
        b = candidates.shape[0]
        coins = uniform_coins((b, 1), device=candidates.device, seed=seed, offsets=offsets,
                              generator=generator)[:, 0]
    return verify_chain_synthetic_greedy_torch(candidates, target_logits, coins, rule, verify_lens)
