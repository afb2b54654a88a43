"""The torch implementation of chain verification under per-request sampling parameters.

Positions are walked over the requests still accepting: greedy requests take the target's
argmax, sampled ones test u * q(x) < p(x) (exact, in float64) on the filtered probabilities of
the drafted tokens, computed by the filtering family's one formula (`filtered_probs_at`: the
float32 numbers the filtered rows hold there), and the emitted tokens come from row chunks of
the filtered residual (`filtered_rows`) by the exponential race on the random stream. No
filtered [b, n, V] tensor is built.
"""

from __future__ import annotations

import torch

from specreg.contract.filter_order import FilterRule, filter_rule
from specreg.contract.sampling_params import SamplingParams
from specreg.kernels.block_race import block_race_torch
from specreg.kernels.chain import accept_limits, assemble, emit_lanes
from specreg.kernels.chain.types import ChainVerifyResult
from specreg.kernels.chain_params.checks import check_read_scores
from specreg.kernels.chain_params.numba_impl import emit_chunk
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.kernels.filtering import (
    RowStats,
    filtered_probs_at,
    filtered_rows,
    gathered_row_stats,
)
from specreg.kernels.random_stream import draw_lanes_torch
from specreg.kernels.random_stream.types import SAMPLE_ROLE
from specreg.kernels.row_chunks import FILTER_CHUNK_ELEMENTS, cpu_row_chunks


class _Rows:
    """One input's [b * m, V] rows with the per-request parameters, for gathered access."""

    def __init__(
        self, scores: torch.Tensor, width: int, params: SamplingParams, probs: bool,
        rule: FilterRule,
    ):
        self.flat = scores.reshape(-1, scores.shape[-1])
        self.width = width
        self.params = params
        self.probs = probs
        self.rule = rule

    def stats(self, requests: torch.Tensor, position: int) -> RowStats:
        p = self.params
        return gathered_row_stats(
            self.flat, requests * self.width + position, p.temperature[requests],
            p.top_k[requests], p.top_p[requests], p.min_p[requests], probabilities=self.probs,
            rule=self.rule,
        )

    def prob_at(
        self, requests: torch.Tensor, position: int, tokens: torch.Tensor, stats: RowStats
    ) -> torch.Tensor:
        """The filtered probability of `tokens` (0 where filtered out): the float32 number the
        row `filtered` returns holds at that token (one formula, `filtered_probs_at`)."""
        vocab = self.flat.shape[-1]
        p = self.params
        scores = self.flat[requests * self.width + position, tokens.clamp(0, vocab - 1)]
        return filtered_probs_at(scores, p.temperature[requests], stats, p.min_p[requests],
                                 probabilities=self.probs)

    def filtered(self, requests: torch.Tensor, position: int, stats: RowStats) -> torch.Tensor:
        p = self.params
        rows = self.flat.index_select(0, requests * self.width + position)
        return filtered_rows(
            rows, p.temperature[requests], stats, p.min_p[requests], probabilities=self.probs
        )


def accepts(coin: torch.Tensor, q_x: torch.Tensor, p_x: torch.Tensor) -> torch.Tensor:
    """The acceptance test u * q(x) < p(x) on the float32 coin and the float32 values the rows
    hold, in float64, where the product of two float32 numbers is exact: no rounding decides."""
    u = coin.to(torch.float32).to(torch.float64)
    return u * q_x.to(torch.float64) < p_x.to(torch.float64)


def _select(stats: RowStats, index: torch.Tensor) -> RowStats:
    return RowStats(
        shift=stats.shift[index], threshold=stats.threshold[index], norm=stats.norm[index]
    )


def verify_chain_with_params_torch(
    inputs: ChainParamsInputs, *, compiled: bool = False
) -> ChainVerifyResult:
    """Positions walked over the requests still accepting; only the rows they reach are
    filtered, chunk by chunk. `compiled`: each chunk's draw runs `numba_impl.emit_chunk` (the
    same tokens; numba available and `numba_impl.supports(inputs)`)."""
    candidates, target, draft, params = (
        inputs.candidates, inputs.target, inputs.draft, inputs.params
    )
    coins, probabilities = inputs.coins, inputs.probabilities
    b, n, vocab = target.shape
    device = candidates.device
    limit = accept_limits(inputs.verify_lens, b, n, device)
    drafts = candidates[:, 1:].to(torch.int64)
    invalid = params.invalid_rows(vocab)
    greedy = params.greedy
    rule = filter_rule(inputs.filter_order)
    p_rows = _Rows(target, n, params, probabilities, rule)
    has_q = draft is not None and n > 1 and not inputs.invariant
    q_rows = _Rows(draft, n - 1, params, probabilities, rule) if has_q else None
    accept_len = torch.zeros(b, dtype=torch.int64, device=device)
    bonus = torch.full((b,), -1, dtype=torch.int64, device=device)
    active = (~invalid).nonzero().flatten()
    check = inputs.check_reads
    for i in range(n):
        if active.numel() == 0:
            break
        checking = limit[active] > i
        if i < n - 1:
            token = torch.where(checking, drafts[active, i], -1)
        else:
            token = torch.full_like(active, -1)
        valid = (token >= 0) & (token < vocab)
        is_greedy = greedy[active]
        accepted = torch.zeros_like(checking)
        # Greedy requests: the target argmax of row i.
        g = is_greedy.nonzero().flatten()
        if g.numel():
            rows = p_rows.flat.index_select(0, active[g] * n + i)
            predict = torch.argmax(rows, dim=-1)
            if check:  # the argmax of a row holding NaN is a NaN
                check_read_scores("target", rows.gather(1, predict[:, None]).squeeze(1),
                                  p_rows.flat, active[g] * n + i, n)
            accepted[g] = checking[g] & (token[g] == predict)
            stop = ~accepted[g]
            bonus[active[g][stop]] = predict[stop]
        # Sampled requests: filtered p(x), q(x) and the coin.
        s = (~is_greedy).nonzero().flatten()
        if s.numel():
            requests = active[s]
            p_stats = p_rows.stats(requests, i)
            if check:
                check_read_scores("target", p_stats.shift, p_rows.flat, requests * n + i, n)
            check_s = checking[s]
            if inputs.invariant:  # accept iff the draft is the target's own race draw
                lanes = draw_lanes_torch(
                    inputs.keys[requests], SAMPLE_ROLE, inputs.positions[requests] + i
                )
                drawn = _emit(
                    p_rows, None, requests, i, p_stats, None,
                    rejected=torch.zeros_like(check_s), excluded=token[s], lanes=lanes,
                    compiled=compiled,
                )
                ok = check_s & valid[s] & (token[s] == drawn)
                accepted[s] = ok
                stop = (~ok).nonzero().flatten()
                bonus[requests[stop]] = drawn[stop]
            else:
                p_x = p_rows.prob_at(requests, i, token[s], p_stats)
                q_x = torch.ones_like(p_x)
                q_stats = None
                tested = check_s.nonzero().flatten()
                if q_rows is not None and tested.numel():
                    q_stats = RowStats(
                        shift=torch.zeros_like(p_x),
                        threshold=torch.full_like(p_x, float("-inf")),
                        norm=torch.ones_like(p_x),
                    )
                    tested_stats = q_rows.stats(requests[tested], i)
                    if check:
                        check_read_scores("draft", tested_stats.shift, q_rows.flat,
                                          requests[tested] * (n - 1) + i, n - 1)
                    q_stats.shift[tested] = tested_stats.shift
                    q_stats.threshold[tested] = tested_stats.threshold
                    q_stats.norm[tested] = tested_stats.norm
                    q_x[tested] = q_rows.prob_at(
                        requests[tested], i, token[s][tested], tested_stats
                    )
                coin = coins[requests, i] if i < n - 1 else torch.zeros_like(p_x)
                ok = check_s & valid[s] & accepts(coin, q_x, p_x)
                accepted[s] = ok
                stop = (~ok).nonzero().flatten()
                if stop.numel():
                    bonus[requests[stop]] = _emit(
                        p_rows, q_rows, requests[stop], i, _select(p_stats, stop),
                        None if q_stats is None else _select(q_stats, stop),
                        rejected=check_s[stop], excluded=token[s][stop],
                        lanes=emit_lanes(
                            inputs.keys[requests[stop]], inputs.positions[requests[stop]],
                            torch.full_like(stop, i), check_s[stop],
                        ),
                        compiled=compiled,
                    )
        active = active[accepted]
        accept_len[active] = i + 1
    result = assemble(candidates, accept_len, bonus)
    return ChainVerifyResult(
        accept_len=result.accept_len, bonus=result.bonus, output_tokens=result.output_tokens,
        param_error=invalid,
    )


def _emit(
    p_rows: _Rows,
    q_rows: _Rows | None,
    requests: torch.Tensor,
    position: int,
    p_stats: RowStats,
    q_stats: RowStats | None,
    *,
    rejected: torch.Tensor,
    excluded: torch.Tensor,
    lanes: torch.Tensor,
    compiled: bool = False,
) -> torch.Tensor:
    """The emitted token of `requests` stopping at `position`: from the residual
    max(p - q, 0) (or p without the draft, target-only) after a rejection, from p otherwise;
    a residual without mass falls back to p. Row chunks, each drawn by the exponential race
    under its request's key lanes `lanes` [k, 2] (`emit_lanes`, `block_race_torch`)."""
    vocab = p_rows.flat.shape[-1]
    device = requests.device
    out = torch.empty(requests.shape[0], dtype=torch.int64, device=device)
    for start, stop in cpu_row_chunks(requests.shape[0], vocab, FILTER_CHUNK_ELEMENTS):
        part = slice(start, stop)
        chunk = torch.arange(start, stop, device=device)
        if compiled:
            out[part] = _emit_compiled(p_rows, q_rows, requests[part], position,
                                       _select(p_stats, chunk),
                                       None if q_stats is None else _select(q_stats, chunk),
                                       rejected[part], excluded[part], lanes[part])
            continue
        p = p_rows.filtered(requests[part], position, _select(p_stats, chunk))
        weights = p
        hit = rejected[part]
        if q_rows is not None and q_stats is not None:
            q = q_rows.filtered(requests[part], min(position, q_rows.width - 1),
                                _select(q_stats, chunk))
            residual = (p - q).clamp_min_(0.0)
        else:
            residual = p.clone()
            token = excluded[part]
            hit = hit & (token >= 0) & (token < vocab)
            rows = hit.nonzero().flatten()
            residual[rows, token[rows]] = 0.0
        use_residual = hit & (residual.amax(-1) > 0)
        weights = torch.where(use_residual[:, None], residual, p)
        out[part] = block_race_torch(weights, lanes[part])
    return out


def _emit_compiled(
    p_rows: _Rows, q_rows: _Rows | None, requests: torch.Tensor, position: int,
    p_stats: RowStats, q_stats: RowStats | None, rejected: torch.Tensor,
    excluded: torch.Tensor, lanes: torch.Tensor,
) -> torch.Tensor:
    """One chunk of `_emit` by `numba_impl.emit_chunk`: the same rows, hit rows and lanes."""
    vocab = p_rows.flat.shape[-1]
    with_q = q_rows is not None and q_stats is not None
    hit = rejected
    if not with_q:
        hit = hit & (excluded >= 0) & (excluded < vocab)
        excluded = torch.where(hit, excluded, -1)
    params = p_rows.params
    return emit_chunk(
        p_rows.flat, requests * p_rows.width + position,
        q_rows.flat if with_q else None,
        requests * q_rows.width + min(position, q_rows.width - 1) if with_q else None,
        params.temperature[requests], params.min_p[requests], p_stats,
        q_stats if with_q else None, hit, excluded, lanes,
    )
