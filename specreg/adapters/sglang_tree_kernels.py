"""SGLang's tree-verification kernel signatures, computed by specreg's core tree kernels.

Each function here takes exactly the arguments SGLang 0.5.23's `eagle_sample` passes to the
kernel it stands in for (running `specreg.kernels.tree_verify_greedy` and
`specreg.kernels.tree_verify_sampling`), validates them as specreg's own kernels do (a
`KernelInputError` with an SR9xx code, before anything is written), and writes SGLang's
mutable outputs the way SGLang's kernels write them (only the accepted path's `predicts` and
`accept_index` slots):

- `verify_tree_greedy` for `spec_tree.verify_tree_greedy_func`: `verify_greedy` on the target's
  argmax; depth = `accept_index.shape[1] - 1` (SGLang's `max_tree_depth` slots).
- `tree_sampling_target_only` for `verify_sampling.tree_speculative_sampling_target_only`:
  `verify_tree_sampling`'s target-only rule on SGLang's node coins `uniform_samples` (seeded
  per request when the request has a `sampling_seed`: SGLang derives them from the seed and the
  sequence length), after min-p. The final token is specreg's exact race on its random stream
  (`stream_keys`): keyed by the request's `sampling_seed` and sequence length when SGLang
  seeds it, so a seeded request's tokens do not depend on the rest of the batch, else by a fresh
  64-bit key per request. SGLang's `uniform_samples_for_final_sampling` is not read: a draw keyed
  by one float32 coin can reach at most 2**24 outcomes per row, which is not exact.
- `top_k_renorm_prob` / `top_p_renorm_prob` for `sampling.renorm`'s: specreg's filtering rule
  (`specreg.kernels.filtering`) on probability rows, renormalised.
- `chain_sampling` around `reject_sampling.chain_speculative_sampling_triton` (the kernel
  `--speculative-use-rejection-sampling` selects): min-p, then `verify_tree_sampling`'s
  recursive rejection sampling with SGLang's draft distribution (its acceptance decisions equal
  SGLang's Triton chain kernel's on the same uniforms; the correction / bonus token is the
  stream's race, keyed as above); block verification stays SGLang's kernel, after min-p.
- `seeded_verify_coins` for `eagle_utils._seeded_verify_coins` lives in
  `specreg.adapters.sglang_seeded_coins` (SGLang's own seeded coin stream on a CPU).

Min-p: SGLang's `eagle_sample` has no min-p step and passes the kernel no sampling parameters,
so `verify_call` (an AROUND hook on `eagle_sample`) makes the batch's `SamplingBatchInfo` and
`seq_lens` visible to the sampling kernel for the duration of that call only (context
variables; nothing outlives the call), and requests with `min_p > 0` have their target rows
filtered (keep a token whose probability is at least min_p times the largest, renormalise)
before verification. The same context gives the final draw its keys (`sampling_seed`) and
positions (`seq_lens`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_params,
    check_probabilities,
    check_same_device,
    check_shape,
)
from specreg.contract.filter_order import FILTER_RULES
from specreg.kernels.filtering import row_stats, scaled_probabilities
from specreg.kernels.random_stream import fresh_keys
from specreg.kernels.tree_verify_greedy import verify_tree_greedy as core_verify_tree_greedy
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.contract.sampling_params import SamplingParams

#: The `SamplingBatchInfo` of the `eagle_sample` call in progress (None outside one).
CURRENT_SAMPLING_INFO: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "specreg_sglang_sampling_info", default=None
)
#: The batch's `seq_lens` [b] of the `eagle_sample` call in progress (None outside one).
CURRENT_SEQ_LENS: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "specreg_sglang_seq_lens", default=None
)

#: SGLang's top-k meaning "every token" (`sglang.srt.sampling.sampling_params.TOP_K_ALL`).
SGLANG_TOP_K_ALL = 1 << 30


def verify_call(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND hook of `eagle_sample(verify_input, batch, logits_output, ...)`: runs it with the
    batch's sampling info (for min-p and the seeds) and `seq_lens` (the positions) visible to
    the sampling kernels."""
    batch = args[1] if len(args) > 1 else kwargs.get("batch")
    token = CURRENT_SAMPLING_INFO.set(getattr(batch, "sampling_info", None))
    lens = CURRENT_SEQ_LENS.set(getattr(batch, "seq_lens", None))
    try:
        return original(*args, **kwargs)
    finally:
        CURRENT_SEQ_LENS.reset(lens)
        CURRENT_SAMPLING_INFO.reset(token)


def stream_keys(b: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(keys, positions) int64 [b] keying the final draws of the `eagle_sample` call in
    progress. A batch SGLang seeds (`sampling_info.sampling_seed`) is keyed by its seeds, at
    positions `seq_lens + 1` (SGLang places the tree root at `seq_len`, the depth-1 drafts the
    root's row verifies at `seq_len + 1`): the same (seed, sequence) gives the same tokens
    alone, in any batch, on any backend. Otherwise each request gets a fresh 64-bit key from
    torch's generator (as SGLang's unseeded coins come from `torch.rand`). Outside a call (or
    without `seq_lens` of the batch's size) the positions are 0."""
    info, seq_lens = CURRENT_SAMPLING_INFO.get(), CURRENT_SEQ_LENS.get()
    seeds = getattr(info, "sampling_seed", None)
    if isinstance(seq_lens, torch.Tensor) and seq_lens.numel() == b:
        positions = seq_lens.reshape(b).to(device=device, dtype=torch.int64) + 1
    else:
        positions = torch.zeros(b, dtype=torch.int64, device=device)
    if isinstance(seeds, torch.Tensor) and seeds.numel() == b:
        check_dtype("sampling_seed", seeds, INDEX_DTYPES)
        return seeds.reshape(b).to(device=device, dtype=torch.int64), positions
    return fresh_keys(b, device), positions


# ------------------------------------------------------------------------------- tree kernels
def write_outputs(
    result: Any,
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Write `result` (the EAGLE kernels' `TreeVerifyResult`) into SGLang's mutable outputs as
    its kernels do: the accepted path's `predicts` rows and `accept_index` slots, and every
    request's count (elementwise selects: `result.predicts` is -1 exactly off the path, since
    every emitted token is >= 0)."""
    predicts.copy_(torch.where(result.predicts >= 0, result.predicts.to(predicts.dtype), predicts))
    accept_index.copy_(torch.where(result.accept_index >= 0,
                                   result.accept_index.to(accept_index.dtype), accept_index))
    accept_token_num.copy_(result.accept_token_num.to(accept_token_num.dtype))
    return predicts, accept_index, accept_token_num


def _check_outputs(
    b: int, n: int, predicts: torch.Tensor, accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
) -> int:
    """SGLang's output buffers: predicts [b*N], accept_index [b, depth + 1] (depth >= 1),
    accept_token_num [b], integer; returns depth."""
    check_shape("predicts", predicts, (b * n,))
    check_shape("accept_index", accept_index, (b, None))
    check_shape("accept_token_num", accept_token_num, (b,))
    for name, tensor in (("predicts", predicts), ("accept_index", accept_index),
                         ("accept_token_num", accept_token_num)):
        check_dtype(name, tensor, INDEX_DTYPES)
    depth = accept_index.shape[1] - 1
    if depth < 1:
        raise KernelInputError(
            problem("SR900", f"accept_index has {accept_index.shape[1]} slots per request",
                    accepted="[b, depth + 1] with depth >= 1 (SGLang's max_tree_depth)",
                    fix="pass SGLang's accept_index buffer (speculative_num_steps + 1 slots)",
                    field="accept_index")
        )
    return depth


def verify_tree_greedy(
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
    topk: int = -1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`verify_tree_greedy_func`'s signature: greedy tree verification by specreg's kernel."""
    del topk  # SGLang's dispatch hint; the walk does not need it
    b, n = candidates.shape if candidates.dim() == 2 else (0, 0)
    result = core_verify_tree_greedy(
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
        depth=_check_outputs(b, n, predicts, accept_index, accept_token_num),
        target_predict=target_predict,
    )
    return write_outputs(result, predicts, accept_index, accept_token_num)


def tree_sampling_target_only(
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    uniform_samples: torch.Tensor,
    uniform_samples_for_final_sampling: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    deterministic: bool = True,
) -> None:
    """`tree_speculative_sampling_target_only`'s signature: specreg's target-only tree sampling
    on SGLang's node coins, after min-p for the requests of the `eagle_sample` call that ask
    for it; the final token is the stream's race keyed by `stream_keys`.

    `draft_probs` is SGLang's scratch buffer (zeros) for this rule and is not read, nor is
    `uniform_samples_for_final_sampling` (one 24-bit coin cannot key an exact draw)."""
    del draft_probs, deterministic  # target-only; specreg's kernels are deterministic
    del uniform_samples_for_final_sampling
    b, n = candidates.shape if candidates.dim() == 2 else (0, 0)
    depth = _check_outputs(b, n, predicts, accept_index, accept_token_num)
    probs = with_min_p(target_probs, CURRENT_SAMPLING_INFO.get())
    keys, positions = stream_keys(b, candidates.device)
    result = verify_tree_sampling(
        candidates, retrive_index, retrive_next_token, retrive_next_sibling, probs,
        depth=depth, coins=uniform_samples, keys=keys, positions=positions,
        threshold_single=threshold_single, threshold_acc=threshold_acc,
    )
    write_outputs(result, predicts, accept_index, accept_token_num)


def chain_sampling(
    original: Callable[..., Any],
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    uniform_samples: torch.Tensor,
    uniform_samples_for_final_sampling: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    deterministic: bool = True,
    *,
    block_verification: bool = False,
) -> None:
    """AROUND hook of `chain_speculative_sampling_triton`: rejection sampling of a chain with
    SGLang's draft distribution `draft_probs` ([b, N - 1, V] or [b, N, V]: row i is the q node
    i + 1 was drawn from), after min-p, on SGLang's acceptance coins; the correction / bonus is
    the stream's race keyed by `stream_keys` (`uniform_samples_for_final_sampling` is read only
    by SGLang's block rule). Thresholds do not apply to this rule (as in SGLang)."""
    probs = with_min_p(target_probs, CURRENT_SAMPLING_INFO.get())
    if block_verification:  # SGLang's block rule (specreg has none): its kernel, after min-p
        original(predicts, accept_index, accept_token_num, candidates, retrive_index,
                 retrive_next_token, retrive_next_sibling, uniform_samples,
                 uniform_samples_for_final_sampling, probs, draft_probs, threshold_single,
                 threshold_acc, deterministic, block_verification=True)
        return
    b, n = candidates.shape if candidates.dim() == 2 else (0, 0)
    depth = _check_outputs(b, n, predicts, accept_index, accept_token_num)
    check_shape("draft_probs", draft_probs, (b, None, None))
    if draft_probs.shape[1] == n - 1:  # SGLang's drafts have no row for the last node
        draft_probs = torch.cat([draft_probs, draft_probs.new_zeros(b, 1, draft_probs.shape[2])], 1)
    keys, positions = stream_keys(b, candidates.device)
    result = verify_tree_sampling(
        candidates, retrive_index, retrive_next_token, retrive_next_sibling, probs, depth=depth,
        draft_probs=draft_probs, coins=uniform_samples, keys=keys, positions=positions,
    )
    write_outputs(result, predicts, accept_index, accept_token_num)


# ------------------------------------------------------------------------------- filtering
def filter_probs(
    probs: torch.Tensor, *, top_k: torch.Tensor | None = None, top_p: torch.Tensor | None = None,
    min_p: torch.Tensor | None = None,
) -> torch.Tensor:
    """Probability rows [R, V] filtered by specreg's rule (per-row top-k, then top-p over the
    top-k survivors, then min-p) and renormalised; a fresh float32 [R, V].

    The kept set is specreg's (`specreg.kernels.filtering`; ties at a cut all kept): top-k keeps
    p >= the k-th largest p, top-p keeps p >= `row_stats`' threshold (a probability), min-p keeps
    p >= min_p * max p. The kept values are the row's own probabilities over their sum. Only
    the filters a call asks for are computed (SGLang calls one at a time)."""
    check_shape("probs", probs, (None, None))
    check_dtype("probs", probs, FLOAT_DTYPES)
    rows, vocab = probs.shape
    device = probs.device
    params = SamplingParams.of(
        rows, temperature=1.0, top_k=0 if top_k is None else top_k,
        top_p=1.0 if top_p is None else top_p, min_p=0.0 if min_p is None else min_p,
        device=device,
    )
    check_params(params, rows, vocab, device, values=True)
    check_probabilities("probs", probs)
    out = probs.to(torch.float32, copy=True)
    if rows == 0:
        return out
    keep = None
    cut_k = (params.top_k > 0) & (params.top_k < vocab)
    if top_k is not None and bool(cut_k.any()):
        kmax = int(params.top_k[cut_k].max())
        values = torch.topk(out, kmax, dim=-1).values
        kth = values.gather(1, (params.top_k - 1).clamp(0, kmax - 1)[:, None])
        keep = (out >= kth) | ~cut_k[:, None]
    if top_p is not None and bool((params.top_p < 1).any()):
        keys, z = scaled_probabilities(out, params.temperature)  # top-p ranks p itself
        kept = out >= row_stats(z, params.top_k, params.top_p, params.min_p, FILTER_RULES[
            "specreg"], keys=keys, temperature=params.temperature).threshold[:, None]
        keep = kept if keep is None else keep & kept
    if min_p is not None and bool((params.min_p > 0).any()):
        kept = out >= params.min_p[:, None] * out.amax(-1, keepdim=True)
        keep = kept if keep is None else keep & kept
    if keep is not None:
        out.masked_fill_(~keep, 0.0)
    return out.div_(out.sum(-1, keepdim=True))


def _per_row(name: str, values: torch.Tensor | float | int, rows: int) -> torch.Tensor:
    """SGLang passes a per-row tensor ([R] or [R, 1]) or one number."""
    if isinstance(values, torch.Tensor):
        flat = values.reshape(-1)
        if flat.numel() == 1:
            return flat.expand(rows)
        if flat.numel() != rows:
            raise KernelInputError(
                problem("SR900", f"{name} has {flat.numel()} values for {rows} rows",
                        accepted=f"one value, or one per row ([{rows}])",
                        fix=f"repeat {name} per draft token, as eagle_sample does", field=name)
            )
        return flat
    return torch.full((rows,), values)


def top_k_renorm_prob(probs: torch.Tensor, top_ks: torch.Tensor | int) -> torch.Tensor:
    """`top_k_renorm_prob(probs [R, V], top_ks)`: keep each row's k most likely tokens (ties at
    the k-th all kept); SGLang's "all" (k >= V, e.g. `TOP_K_ALL`) keeps every token."""
    check_shape("probs", probs, (None, None))
    k = _per_row("top_ks", top_ks, probs.shape[0]).to(device=probs.device, dtype=torch.int64)
    k = torch.where(k >= probs.shape[1], 0, k)
    return filter_probs(probs, top_k=k)


def top_p_renorm_prob(probs: torch.Tensor, top_ps: torch.Tensor | float) -> torch.Tensor:
    """`top_p_renorm_prob(probs [R, V], top_ps)`: keep each row's smallest most-likely set whose
    mass reaches p (ties at the boundary all kept)."""
    check_shape("probs", probs, (None, None))
    p = _per_row("top_ps", top_ps, probs.shape[0]).to(device=probs.device, dtype=torch.float32)
    return filter_probs(probs, top_p=p)


def with_min_p(target_probs: torch.Tensor, sampling_info: Any) -> torch.Tensor:
    """`target_probs` [b, N, V] with min-p applied to the requests whose `min_ps` > 0 (the
    tensor itself when none does, or outside an `eagle_sample` call)."""
    if sampling_info is None or not getattr(sampling_info, "need_min_p_sampling", False):
        return target_probs
    check_shape("target_probs", target_probs, (None, None, None))
    b, n, vocab = target_probs.shape
    min_ps = _per_row("sampling_info.min_ps", sampling_info.min_ps, b)
    check_same_device(target_probs=target_probs, min_ps=min_ps)
    needed = (min_ps > 0).nonzero().flatten()
    if needed.numel() == 0:
        return target_probs
    row_min_p = min_ps.to(torch.float32).repeat_interleave(n)
    if needed.numel() == b:  # the whole batch: one filtered copy
        return filter_probs(target_probs.reshape(-1, vocab), min_p=row_min_p).view(b, n, vocab)
    rows = target_probs.index_select(0, needed).reshape(-1, vocab)
    filtered = filter_probs(rows, min_p=min_ps[needed].to(torch.float32).repeat_interleave(n))
    out = target_probs.to(torch.float32, copy=True)
    out[needed] = filtered.view(-1, n, vocab)
    return out
