"""The torch implementation of chain verification: vectorised over the batch (the CPU path).

Inputs are validated by the public wrappers (`specreg.kernels.chain`). Besides the batched
path (no host synchronisation, used on accelerators), two CPU-tuned branches live here:

- `_verify_chain_greedy_progressive`: argmax only the rows a request reaches, position by
  position over the still-matching requests (reading every row when most are active);
- `emit_tokens` (the correction / bonus draw, an exponential race in two levels on the random
  stream) reads the rows in chunks of requests into reused buffers on CPU, so each request's
  vocab row stays in cache for the residual and its block masses.

Both give the same result as the batched path.
"""

from __future__ import annotations

import torch

from specreg.kernels.argmax import row_argmax
from specreg.kernels.chain.checks import (
    SAFE_SUM_BITS,
    bits_min,
    bits_range,
    check_drafted_values,
    check_reached_nan,
    check_read_rows,
    rows_look_valid,
)
from specreg.kernels.chain.types import ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.block_race import (
    block_columns,
    block_masses_torch,
    race_blocks_torch,
    race_tokens_torch,
)
from specreg.kernels.random_stream import draw_lanes_torch
from specreg.kernels.random_stream.types import RACE_BLOCK, RESIDUAL_ROLE, SAMPLE_ROLE
from specreg.kernels.row_chunks import cpu_row_chunks, take_rows_float32


def accept_limits(
    verify_lens: torch.Tensor | None, b: int, n: int, device: torch.device
) -> torch.Tensor:
    """Per request, how many drafts may be accepted: min(verify_len, n) - 1, at least 0."""
    if verify_lens is None:
        return torch.full((b,), n - 1, dtype=torch.int64, device=device)
    return (verify_lens.to(torch.int64) - 1).clamp(0, n - 1)


def leading_run(accepted: torch.Tensor) -> torch.Tensor:
    """Length of the leading run of True per row, int64."""
    if accepted.shape[1] == 0:
        return torch.zeros(accepted.shape[0], dtype=torch.int64, device=accepted.device)
    return accepted.to(torch.int64).cumprod(dim=1).sum(dim=1)


def assemble(
    candidates: torch.Tensor, accept_len: torch.Tensor, bonus: torch.Tensor
) -> ChainVerifyResult:
    """The result: accepted drafts, then the bonus, then -1, per request."""
    b, n = candidates.shape
    columns = torch.arange(n, device=candidates.device)
    drafts = torch.cat(
        [candidates[:, 1:].to(torch.int64), candidates.new_full((b, 1), -1, dtype=torch.int64)],
        dim=1,
    )
    accept = accept_len.to(torch.int64)[:, None]
    output = torch.where(
        columns < accept, drafts, torch.where(columns == accept, bonus[:, None], -1)
    )
    return ChainVerifyResult(
        accept_len=accept_len.to(torch.int32), bonus=bonus.to(torch.int64), output_tokens=output
    )


def verify_chain_greedy_from_predict_torch(
    candidates: torch.Tensor, target_predict: torch.Tensor, *, verify_lens: torch.Tensor | None
) -> ChainVerifyResult:
    b, n = candidates.shape
    limit = accept_limits(verify_lens, b, n, candidates.device)
    predict = target_predict.to(torch.int64)
    drafts = candidates[:, 1:].to(torch.int64)
    match = (drafts == predict[:, :-1]) & (drafts >= 0)  # a -1 never matches, even a -1
    match &= torch.arange(n - 1, device=candidates.device)[None, :] < limit[:, None]
    accept_len = leading_run(match)
    bonus = predict.gather(1, accept_len[:, None]).squeeze(1)
    return assemble(candidates, accept_len, bonus)


def verify_chain_greedy_torch(
    candidates: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None,
    check_reads: bool = False,
) -> ChainVerifyResult:
    """`check_reads` (the CPU default; CPU tensors only): raise SR904 for a NaN in a row a
    request reaches (a row's argmax points at its first NaN: one value read per row). Values
    only: logits that require grad are read detached (the CPU path gathers into a buffer)."""
    target_logits = target_logits.detach()
    if target_logits.device.type != "cpu":
        return _verify_chain_greedy_batched(candidates, target_logits, verify_lens)
    if check_reads:
        return _verify_chain_greedy_progressive(
            candidates, target_logits, verify_lens, check_reads=True
        )
    return _verify_chain_greedy_progressive(candidates, target_logits, verify_lens)


def _verify_chain_greedy_batched(
    candidates: torch.Tensor, target_logits: torch.Tensor, verify_lens: torch.Tensor | None
) -> ChainVerifyResult:
    """Accelerators: one batched argmax over every row, no host synchronisation."""
    predict = torch.argmax(target_logits, dim=-1)
    return verify_chain_greedy_from_predict_torch(candidates, predict, verify_lens=verify_lens)


def _verify_chain_greedy_progressive(
    candidates: torch.Tensor,
    target_logits: torch.Tensor,
    verify_lens: torch.Tensor | None,
    check_reads: bool = False,
) -> ChainVerifyResult:
    """CPU: argmax only the rows a request reaches (its accepted drafts and its bonus row),
    position by position over the still-matching requests. Same result as the batched argmax."""
    b, n = candidates.shape
    limit = accept_limits(verify_lens, b, n, candidates.device)
    drafts = candidates[:, 1:].to(torch.int64)
    device = candidates.device
    accept_len = torch.zeros(b, dtype=torch.int64, device=device)
    bonus = torch.empty(b, dtype=torch.int64, device=device)
    active = torch.arange(b, device=device)
    gathered = None  # reused: a fresh [k, V] block per position costs page faults
    for i in range(n):
        if active.numel() == 0:
            break
        rows = target_logits[:, i]
        if active.numel() * 2 >= b:  # reading every row beats copying most of them
            predict = row_argmax(rows).index_select(0, active)
            if check_reads:
                check_reached_nan("target_logits", rows[active, predict], active, i)
        else:
            if gathered is None:
                gathered = rows.new_empty(active.numel(), rows.shape[1])
            taken = torch.index_select(rows, 0, active, out=gathered[: active.numel()])
            predict = row_argmax(taken)
            if check_reads:
                check_reached_nan("target_logits", taken.gather(1, predict[:, None]), active,
                                  i)
        if i < n - 1:
            matched = (drafts[active, i] == predict) & (limit[active] > i)
        else:
            matched = torch.zeros_like(predict, dtype=torch.bool)
        stopped = ~matched
        bonus[active[stopped]] = predict[stopped]
        active = active[matched]
        accept_len[active] = i + 1
    return assemble(candidates, accept_len, bonus)


def verify_chain_sampling_torch(inputs: ChainSamplingInputs) -> ChainVerifyResult:
    """Classic rule with `draft_probs`; target-only rule (q one-hot at x) when it is None."""
    candidates, target_probs, draft_probs = (
        inputs.candidates, inputs.target_probs, inputs.draft_probs
    )
    b, n, vocab = target_probs.shape
    gamma = n - 1
    device = candidates.device
    limit = accept_limits(inputs.verify_lens, b, n, device)
    drafts = candidates[:, 1:].to(torch.int64)
    valid = (drafts >= 0) & (drafts < vocab)
    safe = drafts.clamp(0, vocab - 1).unsqueeze(-1)
    verified = valid & (torch.arange(gamma, device=device)[None, :] < limit[:, None])
    p_x = target_probs[:, :gamma].gather(-1, safe).squeeze(-1)
    q_x = None if draft_probs is None else draft_probs.gather(-1, safe).squeeze(-1)
    if inputs.check_reads:
        check_drafted_values(p_x, q_x, verified, drafts, draft_probs)
    p_x = p_x.to(torch.float32)
    q_x = torch.ones_like(p_x) if q_x is None else q_x.to(torch.float32)
    accepted = (inputs.coins[:, :gamma].to(torch.float32) * q_x < p_x) & verified
    accept_len = leading_run(accepted)

    bonus = emit_tokens(
        target_probs, draft_probs, drafts, valid, limit, accept_len, inputs.keys,
        inputs.positions, check=inputs.check_reads,
    )
    return assemble(candidates, accept_len, bonus)


def emit_lanes(
    keys: torch.Tensor, positions: torch.Tensor, stop: torch.Tensor, rejected: torch.Tensor
) -> torch.Tensor:
    """int64 [b, 2] key lanes of each request's emitted draw at row `stop`: (key, RESIDUAL role
    after a rejection else SAMPLE role, positions + stop)."""
    role = torch.where(rejected, RESIDUAL_ROLE, SAMPLE_ROLE)
    return draw_lanes_torch(keys, role, positions.to(torch.int64) + stop.to(torch.int64))


def _row_spans(count: int, vocab: int, device: torch.device) -> list[tuple[int, int]]:
    """Spans of the rows the draw reads at once: cache-sized chunks on CPU, all of them on an
    accelerator (no host synchronisation per chunk)."""
    if device.type == "cpu":
        return cpu_row_chunks(count, vocab)
    return _one_span(count, vocab, device)


def _one_span(count: int, vocab: int, device: torch.device) -> list[tuple[int, int]]:
    """The accelerators' span: every row at once."""
    return [(0, count)]


#: Why `emit_tokens` reads a row, for the messages of its checks.
_REJECTED_ROLE = "the row request {r} stops at after a rejection: the correction is drawn from it"
_BONUS_ROLE = "the row request {r} draws its bonus token from"


def emit_tokens(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    drafts: torch.Tensor,
    valid: torch.Tensor,
    limit: torch.Tensor,
    accept_len: torch.Tensor,
    keys: torch.Tensor,
    positions: torch.Tensor,
    *,
    check: bool = False,
) -> torch.Tensor:
    """The emitted token of every request by the two-level exponential race on the random
    stream keyed by (its key, role, absolute position of its stopping row): the RESIDUAL role
    after a rejection, the SAMPLE role otherwise (`emit_lanes`). The block masses of its
    weights (the residual after a rejection, else p) in one read of its rows (chunks of rows
    into reused buffers on CPU, one chunk elsewhere), the race over the blocks, then the race
    within the winning block (its RACE_BLOCK weights gathered again). With `check`, the rows
    read are checked as they are read (`bits_min` / `bits_range` on each chunk in cache, then
    `rows_look_valid` and `check_read_rows`: values finite and >= 0, the p row with mass),
    before any token is drawn."""
    b, n, vocab = target_probs.shape
    device = target_probs.device
    if b == 0:
        return torch.empty(0, dtype=torch.int64, device=device)
    gamma = drafts.shape[1]
    p_flat = target_probs.reshape(-1, vocab)
    q_flat = None if draft_probs is None or gamma == 0 else draft_probs.reshape(-1, vocab)
    rows = torch.arange(b, device=device)
    p_index = rows * n + accept_len
    rejected = accept_len < limit
    excluded = torch.full((b,), -1, dtype=torch.int64, device=device)
    q_index = excluded
    if gamma > 0:
        rejected_row = accept_len.clamp(max=gamma - 1)
        q_index = rows * gamma + rejected_row
        excluded = torch.where(valid, drafts, -1)[rows, rejected_row]
        excluded = torch.where(rejected, excluded, -1)
    masses = torch.empty((b, -(-vocab // RACE_BLOCK)), dtype=torch.float32, device=device)
    use_residual = rejected.clone()
    for residual, requests in ((True, rejected.nonzero().squeeze(1)),
                               (False, (~rejected).nonzero().squeeze(1))):
        if requests.numel() == 0:
            continue
        spans = _row_spans(requests.numel(), vocab, device)
        size = spans[0][1] - spans[0][0]
        p_buf = torch.empty(size, vocab, dtype=torch.float32, device=device)
        q_src = q_flat if residual else None  # the q rows this group reads
        q_buf = torch.empty_like(p_buf) if q_src is not None else None
        if check:  # per request: the int32 min (and max) of the rows it reads, see checks.py
            low, high, q_low, q_high = torch.empty((4, requests.numel()), dtype=torch.int32,
                                                   device=device)
        for start, stop in spans:
            part = requests[start:stop]
            p_rows = take_rows_float32(p_flat, p_index[part], p_buf)
            if not residual:
                if check:
                    bits_min(p_rows, low[start:stop])
                masses[part] = block_masses_torch(p_rows)
                continue
            if check:
                bits_range(p_rows, low[start:stop], high[start:stop])
            if q_src is not None:
                q_rows = take_rows_float32(q_src, q_index[part], q_buf)
                if check:
                    bits_range(q_rows, q_low[start:stop], q_high[start:stop])
                weights = torch.sub(p_rows, q_rows, out=q_rows).clamp_min_(0.0)
            else:
                weights = p_rows.clone()
                token = excluded[part]
                hit = (token >= 0).nonzero().squeeze(1)
                weights[hit, token[hit]] = 0.0
            found = block_masses_torch(weights)
            empty = (found.amax(-1) <= 0).nonzero().squeeze(1)
            if empty.numel():  # a residual without mass: the draw is from p
                found[empty] = block_masses_torch(p_rows[empty])
                use_residual[part[empty]] = False
            masses[part] = found
        if check:  # before any token is drawn; a residual with mass implies p has mass
            ok = rows_look_valid(masses[requests], low, high if residual else None)
            sources = [("target_probs", p_flat, p_index[requests], n, True)]
            if q_src is not None:
                ok &= (q_low >= 0) & (q_high < SAFE_SUM_BITS)
                sources.append(("draft_probs", q_src, q_index[requests], gamma, False))
            check_read_rows(ok, _REJECTED_ROLE if residual else _BONUS_ROLE, *sources)
    lanes = emit_lanes(keys, positions, accept_len, rejected)
    columns, inside = block_columns(race_blocks_torch(masses, lanes), vocab)
    p_block = p_flat[p_index[:, None], columns].to(torch.float32)
    if q_flat is not None:
        q_block = q_flat[q_index[:, None], columns].to(torch.float32)
        residual_block = (p_block - q_block).clamp_min(0.0)
    else:
        residual_block = torch.where(columns == excluded[:, None], 0.0, p_block)
    weights = torch.where(use_residual[:, None], residual_block, p_block)
    return race_tokens_torch(torch.where(inside, weights, 0.0), columns, lanes)


def verify_chain_invariant_torch(inputs: ChainSamplingInputs) -> ChainVerifyResult:
    """The drafter-invariant rule, position by position over the requests still matching: the
    target's token of row i is the SAMPLE-role race of p at the row's absolute position; a draft
    is accepted iff it equals that token, and the first token that no draft matched is emitted.
    Only the rows a request reaches are read."""
    candidates, target_probs = inputs.candidates, inputs.target_probs
    b, n, vocab = target_probs.shape
    device = candidates.device
    limit = accept_limits(inputs.verify_lens, b, n, device)
    drafts = candidates[:, 1:].to(torch.int64)
    accept_len = torch.zeros(b, dtype=torch.int64, device=device)
    bonus = torch.full((b,), -1, dtype=torch.int64, device=device)
    p_flat = target_probs.reshape(-1, vocab)
    active = torch.arange(b, device=device)
    check = inputs.check_reads
    for i in range(n):
        if active.numel() == 0:
            break
        lanes = draw_lanes_torch(
            inputs.keys[active], SAMPLE_ROLE, inputs.positions[active] + i
        )
        token = _races(p_flat, active * n + i, lanes, n, check=check)
        match = limit[active] > i
        if i < n - 1:
            match &= drafts[active, i] == token
        else:
            match &= False
        stop = ~match
        bonus[active[stop]] = token[stop]
        active = active[match]
        accept_len[active] = i + 1
    return assemble(candidates, accept_len, bonus)


_REACHED_ROLE = "a row request {r} reaches: the rule draws the target's token from it"


def _races(
    p_flat: torch.Tensor, index: torch.Tensor, lanes: torch.Tensor, width: int, *, check: bool
) -> torch.Tensor:
    """`block_race_torch` of rows `index` of `p_flat` [b * width, V]: their block masses in
    cache-sized chunks into a reused buffer on CPU (one chunk elsewhere), then the two races
    over all of them (the winning blocks' weights gathered again, as in `emit_tokens`). Same
    tokens. With `check`, the rows are checked as they are read (`bits_min`, then
    `rows_look_valid` and `check_read_rows` before any token is drawn)."""
    vocab = p_flat.shape[1]
    device = index.device
    masses = torch.empty((index.shape[0], -(-vocab // RACE_BLOCK)), dtype=torch.float32,
                         device=device)
    spans = _row_spans(index.shape[0], vocab, device)
    buf = torch.empty(spans[0][1] - spans[0][0], vocab, dtype=torch.float32, device=device)
    low = torch.empty(index.shape[0] if check else 0, dtype=torch.int32, device=device)
    for start, stop in spans:
        part = index[start:stop]
        rows = take_rows_float32(p_flat, part, buf)
        if check:
            bits_min(rows, low[start:stop])
        masses[start:stop] = block_masses_torch(rows)
    if check:  # before any token is drawn
        ok = rows_look_valid(masses, low)
        check_read_rows(ok, _REACHED_ROLE, ("target_probs", p_flat, index, width, True))
    columns, inside = block_columns(race_blocks_torch(masses, lanes), vocab)
    weights = p_flat[index[:, None], columns].to(torch.float32)
    return race_tokens_torch(torch.where(inside, weights, 0.0), columns, lanes)
