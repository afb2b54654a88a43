"""Log-probabilities of the tokens a verify step emitted, as plain decoding reports them.

`emitted_logprobs(result, target, params=..., top_n=...)` takes any verifier's result (chain,
tree or block: `specreg.contract.protocols.VerifyResult`, or a kernel's `ChainVerifyResult` /
`TreeVerifyResult`) and the target scores the step verified, and returns `EmittedLogprobs`: for
every emitted token (the accepted drafts, then the correction or bonus), its log-probability
under the distribution plain decoding draws that position's token from, and the top n
alternatives on request.

Rule, per emitted slot (request r, slot j <= num_accepted), on the target row the token was
drawn from (chains: position j; trees: the j-th node of the accepted path, `accepted_index`):

- sampled requests (temperature T > 0): pi = the filtered distribution of
  `specreg.kernels.filtering` (temperature, top-k, top-p, min-p, in `filter_order`), the one the
  verifier's lossless rule samples from; a dropped token gets -inf;
- greedy requests (T = 0), no `params`, or `raw=True`: pi = softmax of the unprocessed scores
  (what vLLM's default `raw_logprobs` mode and SGLang return for these tokens).

An accepted draft is distributed as pi (the rule is lossless), and so is the correction or bonus
drawn after it, so these are plain decoding's values at those positions. A result of a lossy
acceptance rule (`VerifyResult.acceptance`, `specreg.contract.acceptance_rules`) draws its sampled tokens
from no such pi: with `params` holding a sampled request it is refused (SR199) unless `raw=True`.

Family: `types`, `reference` (per slot, by sorting; the oracle), `torch_impl` (row statistics
chunk by chunk, no [M, V] copy), `triton_impl` (one program per slot). Both implementations read
only the rows of emitted slots: about (num_accepted + 1) rows per request.
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.chain.types import BackendChoice
from specreg.kernels.checks import check_params, should_check_values
from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, FilterOrder, filter_rule
from specreg.kernels.logprobs.torch_impl import logprobs_torch
from specreg.kernels.logprobs.triton_impl import logprobs_triton
from specreg.kernels.logprobs.types import EmittedLogprobs, LogprobInputs
from specreg.contract.sampling_params import SamplingParams

__all__ = ["EmittedLogprobs", "emitted_logprobs"]


def emitted_logprobs(
    result: object,
    target: torch.Tensor,
    *,
    params: SamplingParams | None = None,
    top_n: int = 0,
    raw: bool = False,
    probabilities: bool = False,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
) -> EmittedLogprobs:
    """Log-probabilities of `result`'s emitted tokens (module docstring).

    `target`: the scores the step verified, [b, W, V] or [b * W, V] (logits, or probabilities
    with `probabilities=True`), W the verify width. `params`: the batch's `SamplingParams` (as
    the verifier got them). Every bad input is one `KernelInputError` (SR916, SR910-SR915)
    raised before any launch."""
    filter_rule(filter_order)
    accepted, tokens = _counts(result)
    b, slots = tokens.shape
    flat, width = _flat_target(target, b)
    vocab = flat.shape[1]
    problems = []
    if isinstance(top_n, bool) or not isinstance(top_n, int) or not 0 <= top_n <= vocab:
        problems.append(problem(
            "SR916", f"top_n={top_n!r} is outside [0, {vocab}] (the vocabulary)",
            accepted=f"a whole number from 0 to {vocab}", fix="ask for at most V alternatives",
            field="top_n",
        ))
    if accepted.device != flat.device or tokens.device != flat.device:
        problems.append(problem(
            "SR916", f"the result is on {accepted.device}, the target scores on {flat.device}",
            accepted="result and target on one device", fix="pass the scores the step verified",
            field="target",
        ))
    problems += _lossy_problems(result, params, raw)
    if problems:
        raise KernelInputError(problems)
    device = flat.device
    if params is not None:
        check_params(params, b, vocab, device, values=should_check_values(device, check_values))
    rows_all = _rows(result, b, slots, width, device)
    slot = torch.arange(slots, device=device)
    emitted = (slot[None, :] <= accepted.to(torch.int64)[:, None]) & (tokens >= 0) & (rows_all >= 0)
    where = emitted.nonzero()  # one host synchronisation: the emitted slots, request-major
    request, column = where[:, 0], where[:, 1]
    inputs = _inputs(flat, rows_all[request, column], tokens[request, column], request, params,
                     raw=raw, top_n=top_n, probabilities=probabilities, filter_order=filter_order)
    if select_backend(flat, requested=backend) == "triton":
        token, top_ids, top_lp = logprobs_triton(inputs, block_v=block_v)
    else:
        token, top_ids, top_lp = logprobs_torch(inputs)
    out_token = torch.full((b, slots), float("nan"), dtype=torch.float32, device=device)
    out_ids = torch.full((b, slots, top_n), -1, dtype=torch.int64, device=device)
    out_lp = torch.full((b, slots, top_n), float("nan"), dtype=torch.float32, device=device)
    out_token[request, column] = token
    out_ids[request, column] = top_ids
    out_lp[request, column] = top_lp
    return EmittedLogprobs(token=out_token, top_tokens=out_ids, top_logprobs=out_lp, raw=raw)


def _lossy_problems(result: object, params: SamplingParams | None, raw: bool) -> list:
    """SR199: a lossy acceptance rule (`VerifyResult.acceptance`) does not draw a sampled
    request's tokens from the filtered target, so its processed logprobs would be wrong."""
    rule = getattr(result, "acceptance", "lossless")
    if rule == "lossless" or raw or params is None or not bool((params.temperature > 0).any()):
        return []
    return [problem(
        "SR199", f"the result comes from the lossy acceptance rule {rule!r}: its sampled tokens "
        "are not drawn from the filtered target, so processed logprobs would misstate them",
        accepted="raw=True (the target's unprocessed log-softmax), or a lossless plan",
        fix="pass raw=True (vLLM: --logprobs-mode raw_logprobs), or drop the lossy acceptance "
        "setting for requests that need processed logprobs", field="raw",
    )]


def _counts(result: object) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = getattr(result, "output_tokens", None)
    for name in ("num_accepted", "accept_len", "accept_token_num"):
        accepted = getattr(result, name, None)
        if accepted is not None and tokens is not None:
            return accepted, tokens
    raise KernelInputError(problem(
        "SR916", f"{type(result).__name__} is not a verify result (no num_accepted and "
        "output_tokens)", accepted="a verifier's result", fix="pass what the verifier returned",
        field="result",
    ))


def _flat_target(target: torch.Tensor, b: int) -> tuple[torch.Tensor, int]:
    if not isinstance(target, torch.Tensor) or target.dim() not in (2, 3) or not target.is_floating_point():
        raise KernelInputError(problem(
            "SR916", f"target must be float scores [b, W, V] or [b * W, V], got "
            f"{getattr(target, 'shape', type(target).__name__)}",
            accepted="the float target scores the step verified", fix="pass the verified scores",
            field="target",
        ))
    flat = target.reshape(-1, target.shape[-1])  # a view for contiguous inputs
    if flat.shape[0] % b:
        raise KernelInputError(problem(
            "SR916", f"target has {flat.shape[0]} rows, not a multiple of the {b} requests",
            accepted=f"b * W rows for b = {b}", fix="pass the scores of exactly this batch",
            field="target",
        ))
    return flat, flat.shape[0] // b


def _rows(result: object, b: int, slots: int, width: int, device: torch.device) -> torch.Tensor:
    """The target row of each slot: the result's accepted_index, else chain rows r * W + j."""
    index = getattr(result, "accepted_index", None)  # VerifyResult (computed for chains)
    if index is None:
        index = getattr(result, "accept_index", None)  # a tree kernel's TreeVerifyResult
    if index is None:  # a chain kernel's ChainVerifyResult
        r = torch.arange(b, device=device)[:, None] * width
        return r + torch.arange(slots, device=device)[None, :]
    index = index.to(device=device, dtype=torch.int64)
    if index.shape != (b, slots) or bool((index >= b * width).any()):
        raise KernelInputError(problem(
            "SR916", f"the result's accepted_index {list(index.shape)} does not index the "
            f"{b * width} target rows", accepted=f"[{b}, {slots}] rows below {b * width}",
            fix="pass the scores the step verified, with the result it returned", field="target",
        ))
    return index


def _inputs(
    flat: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor, request: torch.Tensor,
    params: SamplingParams | None, *, raw: bool, top_n: int, probabilities: bool,
    filter_order: str,
) -> LogprobInputs:
    count, device = rows.shape[0], flat.device
    one = torch.ones(count, dtype=torch.float32, device=device)
    plain = {"temperature": one, "top_k": torch.zeros(count, dtype=torch.int64, device=device),
             "top_p": one, "min_p": torch.zeros(count, dtype=torch.float32, device=device)}
    if params is not None and not raw:
        sampled = params.temperature[request] > 0
        for name in plain:
            value = getattr(params, name)[request].to(plain[name].dtype)
            plain[name] = torch.where(sampled, value, plain[name])
    return LogprobInputs(flat=flat, rows=rows, tokens=tokens, top_n=top_n,
                         probabilities=probabilities, filter_order=filter_order, **plain)
