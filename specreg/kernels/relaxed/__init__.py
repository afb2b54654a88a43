"""The lossy acceptance rules on a chain (`specreg.contract.acceptance_rules`): public wrappers that validate, choose the backend and dispatch.

Layout and coins are the chain family's (`specreg.kernels.chain`): candidates [b, n],
target_probs [b, n, V], draft_probs [b, n-1, V] or None, keys and positions [b] (the random
stream's request keys and absolute positions), coins [b, >= n-1], verify_lens [b]. Rules (`RuleParams`):

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

Under per-request sampling parameters (greedy and sampled requests mixed in one batch),
`verify_chain_relaxed_with_params` takes `verify_chain_with_params`'s inputs and a `RuleParams`
rule. Its steps before the rule are that path's own (`prepare_chain_params`: every check, the
grammar mask and the penalties IN PLACE, the per-request keys on the random stream, so a
request's tokens do not depend on the rest of the batch). Then, per request:

- temperature 0: plain greedy on the target scores (`verify_chain_greedy`), exact under
  thresholds and typical acceptance; under synthetic acceptance the synthetic count and the
  argmax of the row after it (`verify_chain_synthetic_greedy`'s rule, coin: the request's first);
- temperature > 0: the rule (torch or Triton) on p = filter(target / T)
  and q = filter(draft / T), filtered by `specreg.kernels.filtering` in the plan's filter order,
  with the coins the lossless params path would use. At thresholds (1, 1) this is the lossless
  params rule itself, token for token;
- invalid parameters (value checks off): accept nothing, emit -1, flagged in `param_error`.

Memory: unlike the lossless params path, this opt-in path materialises the filtered
probabilities, float32 [b, n, V] for the target and [b, n-1, V] for the draft (about
8 * b * n * V bytes at peak), because the relaxed kernels read probability rows. The row
statistics and values come from the filtering family (torch: `gathered_row_stats` in row
chunks, then its one elementwise formula `filtered_rows`; Triton: `row_stats_triton`, then
`filtered_rows_triton`, the formula its verifiers read).
"""

from __future__ import annotations

import attrs
import torch

from specreg.backend import select_backend
from specreg.kernels.chain import assemble, sampling_inputs, verify_chain_greedy
from specreg.kernels.chain.checks import check_chain, check_coin_values
from specreg.kernels.chain.types import BackendChoice, ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.chain_params import prepare_chain_params
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    check_dtype,
    check_same_device,
    check_shape,
    should_check_values,
)
from specreg.kernels.filtering import (
    RowStats,
    filtered_rows,
    filtered_rows_triton,
    gathered_row_stats,
    row_stats_triton,
)
from specreg.contract.filter_order import (
    DEFAULT_FILTER_ORDER,
    FilterOrder,
    FilterRule,
    filter_rule,
)
from specreg.kernels.penalties import Penalties
from specreg.kernels.random_stream import accept_coins_torch, stream_keys
from specreg.kernels.relaxed.torch_impl import (
    first_coins,
    verify_chain_relaxed_torch,
    verify_chain_synthetic_greedy_torch,
)
from specreg.kernels.relaxed.triton_impl import verify_chain_relaxed_triton
from specreg.kernels.relaxed.types import SYNTHETIC, RuleParams
from specreg.kernels.row_chunks import FILTER_CHUNK_ELEMENTS, cpu_row_chunks
from specreg.kernels.triton_shim import vocab_tile
from specreg.contract.sampling_params import SamplingParams

__all__ = [
    "RuleParams",
    "filtered_probabilities",
    "verify_chain_relaxed",
    "verify_chain_relaxed_with_params",
    "verify_chain_synthetic_greedy",
]


def verify_chain_relaxed(
    candidates: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    *,
    rule: RuleParams,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Chain verification under the lossy `rule` (module docstring); the inputs, their checks
    and the random stream's keys are `verify_chain_sampling`'s."""
    inputs = sampling_inputs(
        candidates, target_probs, draft_probs, keys=keys, positions=positions, coins=coins,
        verify_lens=verify_lens, generator=generator, check_values=check_values,
    )
    if select_backend(candidates, requested=backend) == "triton":
        return verify_chain_relaxed_triton(inputs, rule, block_v=block_v)
    return verify_chain_relaxed_torch(inputs, rule)


def verify_chain_synthetic_greedy(
    candidates: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    rule: RuleParams,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
) -> ChainVerifyResult:
    """Greedy verification under synthetic acceptance: the synthetic count from `coins` [b]
    (one per request; by default the acceptance uniform of its first draft on the random
    stream, `synthetic_coins`), then the argmax of the row after the accepted drafts. Torch ops
    on any device ([b] and one [b, V] row read)."""
    if rule.mode != SYNTHETIC:
        raise ValueError("verify_chain_synthetic_greedy takes a synthetic rule")
    b, _, _ = check_chain(
        candidates, target_logits, "target_logits", verify_lens=verify_lens, keys=keys,
        positions=positions, probabilities=False, check_values=check_values,
    )
    if coins is None:
        keys, positions = stream_keys(b, candidates.device, keys, positions, generator=generator)
        coins = first_coins(accept_coins_torch(keys, positions, candidates[:, 1:2]))
    else:
        check_synthetic_coins(coins, b, candidates.device, check_values)
    return verify_chain_synthetic_greedy_torch(candidates, target_logits, coins, rule, verify_lens)


def verify_chain_relaxed_with_params(
    candidates: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None = None,
    *,
    rule: RuleParams,
    params: SamplingParams,
    probabilities: bool = False,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
    token_bitmask: torch.Tensor | None = None,
    penalties: Penalties | None = None,
) -> ChainVerifyResult:
    """The lossy `rule` on a batch with per-request sampling parameters (module docstring); the
    inputs, checks and random stream keys are `verify_chain_with_params`'s."""
    inputs = prepare_chain_params(
        candidates, target, draft, params=params, probabilities=probabilities, keys=keys,
        positions=positions, coins=coins, verify_lens=verify_lens, generator=generator,
        check_values=check_values, backend=backend, block_v=block_v, filter_order=filter_order,
        token_bitmask=token_bitmask, penalties=penalties,
    )
    b, n, vocab = target.shape
    triton = select_backend(candidates, requested=backend) == "triton"
    invalid = params.invalid_rows(vocab)
    greedy = params.greedy & ~invalid
    sampled = filter_params(params, ~params.greedy & ~invalid)
    order = filter_rule(inputs.filter_order)
    p = filtered_probabilities(target, sampled, probabilities=probabilities, rule=order,
                               triton=triton, block_v=block_v)
    q = None
    if draft is not None:
        q = filtered_probabilities(draft, sampled, probabilities=probabilities, rule=order,
                                   triton=triton, block_v=block_v)
    lossy_inputs = ChainSamplingInputs(
        candidates=candidates, target_probs=p, draft_probs=q, coins=inputs.coins,
        keys=inputs.keys, positions=inputs.positions, verify_lens=verify_lens,
    )
    if triton:
        drawn = verify_chain_relaxed_triton(lossy_inputs, rule, block_v=block_v)
    else:
        drawn = verify_chain_relaxed_torch(lossy_inputs, rule)
    if rule.mode == SYNTHETIC:
        first = first_coins(inputs.coins)
        plain = verify_chain_synthetic_greedy_torch(candidates, target, first, rule, verify_lens)
    else:
        plain = verify_chain_greedy(candidates, target, verify_lens=verify_lens,
                                    check_values=False, backend=backend, block_v=block_v)
    accept = torch.where(greedy, plain.accept_len, drawn.accept_len).to(torch.int64)
    bonus = torch.where(greedy, plain.bonus, drawn.bonus).to(torch.int64)
    accept = torch.where(invalid, 0, accept)
    bonus = torch.where(invalid, -1, bonus)
    result = assemble(candidates, accept, bonus)
    return ChainVerifyResult(accept_len=result.accept_len, bonus=result.bonus,
                             output_tokens=result.output_tokens, param_error=invalid)


def check_synthetic_coins(
    coins: torch.Tensor, b: int, device: torch.device, check_values: bool | None
) -> None:
    """A caller's synthetic coins: float [b] on the batch's device, in [0, 1) with value checks."""
    check_shape("coins", coins, (b,))
    check_dtype("coins", coins, FLOAT_DTYPES)
    check_same_device(candidates=torch.empty(0, device=device), coins=coins)
    if should_check_values(device, check_values):
        check_coin_values(coins)


def filter_params(params: SamplingParams, keep: torch.Tensor) -> SamplingParams:
    """`params` where `keep`; elsewhere (greedy, invalid) temperature 1 and no filter, so
    every row has a well-defined filtered distribution (those rows' results are not used)."""
    return attrs.evolve(
        params,
        temperature=torch.where(keep, params.temperature, 1.0).to(params.temperature.dtype),
        top_k=torch.where(keep, params.top_k, 0).to(params.top_k.dtype),
        top_p=torch.where(keep, params.top_p, 1.0).to(params.top_p.dtype),
        min_p=torch.where(keep, params.min_p, 0.0).to(params.min_p.dtype),
    )


def filtered_probabilities(
    scores: torch.Tensor, params: SamplingParams, *, probabilities: bool, rule: FilterRule,
    triton: bool = False, block_v: int | None = None,
) -> torch.Tensor:
    """float32 [b, m, V]: every row of `scores` [b, m, V] filtered by its request's parameters
    (temperatures > 0), by the filtering family's statistics and elementwise formula."""
    b, m, vocab = scores.shape
    device = scores.device
    flat = scores.reshape(b * m, vocab)
    rows = torch.arange(b * m, device=device)
    request = rows // max(m, 1)
    temperature = params.temperature[request].to(torch.float32)
    top_k, top_p = params.top_k[request], params.top_p[request]
    min_p = params.min_p[request].to(torch.float32)
    if triton:  # the Triton path's own numbers (`filtered_tile`), as its verifiers read them
        tile = vocab_tile(vocab, block_v)
        stats3 = row_stats_triton(flat, rows, temperature, top_k, top_p, min_p,
                                  probabilities=probabilities, block_v=tile, rule=rule)
        return filtered_rows_triton(flat, rows, temperature, stats3, min_p,
                                    probabilities=probabilities, block_v=tile).view(b, m, vocab)
    stats = gathered_row_stats(flat, rows, temperature, top_k, top_p, min_p,
                               probabilities=probabilities, rule=rule)
    out = torch.empty((b * m, vocab), dtype=torch.float32, device=device)
    for start, stop in cpu_row_chunks(b * m, vocab, FILTER_CHUNK_ELEMENTS):
        part = slice(start, stop)
        chunk = RowStats(shift=stats.shift[part], threshold=stats.threshold[part],
                         norm=stats.norm[part])
        out[part] = filtered_rows(flat[part], temperature[part], chunk, min_p[part],
                                  probabilities=probabilities)
    return out.reshape(b, m, vocab)
