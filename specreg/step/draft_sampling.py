"""Draft tokens drawn from the filtered q that the with-draft verify rules read, per request.

A verifier given per-request `SamplingParams` and draft logits filters them as it filters the
target: q = filter(draft / T) by the plan's filter order (`specreg.kernels.filtering`). Its
with-draft rule is lossless only when the drafts were drawn from that very q, so the drafters
draw through this module, which computes q with the verifiers' own functions (the row
statistics of `gathered_row_stats`, then `filtered_rows`; on the Triton path
`row_stats_triton`, then `filtered_rows_triton`, the Triton verifiers' `filtered_tile`): the
drafter's q row is the verifier's, bit for bit, on each backend.

- `sample_rows`: one draft per row (chain and block drafters), by the verifiers' two-level
  exponential race on q, keyed on the random stream by (request key, SAMPLE role, the draft's
  absolute position): the very race the target's own draw at that position runs on p, so in the
  drafter-invariant verify mode a draft matches the target's token with probability
  >= (1 - d) / (1 + d), d = TV(p, q). Greedy requests (temperature 0) take the row's argmax, as
  the greedy drafters do.
- `sample_children`: k distinct children per row (tree drafters), by Gumbel-top-k on q: the k
  largest of log q + Gumbel noise are a draw of k tokens from q WITHOUT replacement, in draw
  order, which is what the tree verifier's recursive rule needs of a node's children (in
  sibling order). Each child also gets a weight in (0, 1) for ranking tree branches that is a
  function of its Gumbel key and its rank alone: given the earlier siblings, the key of the
  next child is independent of which token it is, so a tree pruned by these weights keeps a
  child for reasons unrelated to its identity, and siblings rank strictly in draw order, so
  every node keeps a prefix of its draws: the verify rule stays exact. Greedy requests keep the
  deterministic top-k of softmax(logits) and its probabilities, exactly as before.

Draft noise comes from the random stream in the SAMPLE role, never from the verifier's
acceptance coins (ACCEPT role) or its corrections (RESIDUAL role): a draft that depended on
those would bias the standard rule. `keys` [r] are the rows' request keys (a seeded request's
is its seed, `request_keys`; unseeded rows without `keys` get fresh ones from `generator`),
`positions` [r] the absolute output position each row drafts (without it each row draws
under a fresh key: a seed or key is only used with the positions that make its draws differ
step by step). Inputs are checked before any
work: logits [r, V] float, params of r requests on the logits' device (SR910, SR902,
SR911-SR915), k in [1, V] (SR926); a row whose logits hold NaN or +inf, or only -inf, is SR904
with value checks (on by default on CPU), and without them (GPU) that row alone drafts -1 with
an all-zero q (`RowDraw.invalid`), which no verifier accepts; other rows are unaffected.
"""

from __future__ import annotations

import attrs
import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    check_dtype,
    check_params,
    check_shape,
    check_tensor,
    should_check_values,
)
from specreg.kernels.filtering import filtered_rows, gathered_row_stats
from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, FilterOrder, filter_rule
from specreg.contract.sampling_params import SamplingParams

#: Bounds of a sampled child's ranking weight: below 1, so a child always ranks below its
#: parent, and above 0, so the products along deep paths neither underflow nor tie at 0.
CHILD_WEIGHT_MIN = 1e-3
CHILD_WEIGHT_MAX = 0.999
#: The j-th child's weight is also scaled by (1 - CHILD_RANK_STEP) ** j, so siblings whose keys
#: clamp to the same bound still rank strictly in draw order: the tree keeps a prefix of the
#: draws at every node, as the verifier's rule needs, whatever the tie-breaking of top-k.
CHILD_RANK_STEP = 1e-3
#: BLOCK_V of the Triton row statistics: the tree verifier's tile (EAGLE's VERIFY_BLOCK_V),
#: so the kept mass is summed in the same order as there.
DRAFT_BLOCK_V = 1024


@attrs.frozen(kw_only=True)
class RowDraw:
    """One draft per row: `tokens` int64 [r]; `q` float32 [r, V], the filtered distribution each
    sampled row was drawn from (greedy rows: one-hot on the argmax, the deterministic draft)."""

    tokens: torch.Tensor
    q: torch.Tensor
    invalid: torch.Tensor | None = None


@attrs.frozen(kw_only=True)
class ChildrenDraw:
    """k children per row: `tokens` int64 [r, k] in draw order; `weights` float32 [r, k] their
    ranking weights (greedy rows: the top-k probabilities); `q` float32 [r, V] as in `RowDraw`
    (greedy rows: softmax(logits))."""

    tokens: torch.Tensor
    weights: torch.Tensor
    q: torch.Tensor


def check_draft_inputs(
    logits: torch.Tensor, params: SamplingParams, *, check_values: bool | None = None
) -> tuple[int, int]:
    """(rows, vocab) of draft `logits` [r, V] once they and `params` (r requests) fit."""
    check_tensor("logits", logits)
    check_shape("logits", logits, (None, None))
    check_dtype("logits", logits, FLOAT_DTYPES)
    rows, vocab = logits.shape
    if vocab < 1:
        raise KernelInputError(
            problem("SR900", f"logits has shape {list(logits.shape)}: an empty vocab",
                    accepted="[r, V] with V >= 1", fix="pass the draft's full-vocab logits",
                    field="logits")
        )
    values = should_check_values(logits.device, check_values)
    check_params(params, rows, vocab, logits.device, values=values)
    if values:
        bad = invalid_logit_rows(logits).nonzero().flatten().tolist()
        if bad:
            raise KernelInputError(
                problem(
                    "SR904",
                    f"draft logits rows {bad[:8]}{' ...' if len(bad) > 8 else ''} hold NaN or "
                    "+inf, or only -inf: no token can be drawn from them",
                    accepted="finite logits (-inf marks a masked token; every row keeps one "
                    "finite)",
                    fix="check the draft model output (or the mask) that produced those rows",
                    field="logits",
                )
            )
    return rows, vocab


def invalid_logit_rows(logits: torch.Tensor) -> torch.Tensor:
    """bool [r]: rows with NaN or +inf, or only -inf (their maximum is not finite)."""
    if logits.shape[-1] == 0:
        return torch.ones(logits.shape[0], dtype=torch.bool, device=logits.device)
    return ~torch.isfinite(logits.amax(-1))


def _stream_keys(
    params: SamplingParams, keys: torch.Tensor | None, positions: torch.Tensor | None,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows' request keys (`request_keys`) and positions, int64 [r]. Without `positions`
    every row gets a fresh key from `generator` (its seed and `keys` unused): a key reused at
    one position step after step would repeat the same draws, and the drafts of a step must be
    fresh given the past."""
    from specreg.kernels.random_stream import fresh_keys
    from specreg.kernels.sampling import request_keys

    rows = params.batch_size
    if positions is None:
        device = params.seed.device
        return (fresh_keys(rows, device, generator=generator),
                torch.zeros(rows, dtype=torch.int64, device=device))
    keys = request_keys(params, keys, generator=generator)
    check_shape("positions", positions, (rows,))
    check_dtype("positions", positions, (torch.int32, torch.int64))
    return keys, positions.to(torch.int64)


def row_params(params: SamplingParams, repeats: int) -> SamplingParams:
    """`params` of b requests as the parameters of b * repeats rows (request r owns rows
    r * repeats .. r * repeats + repeats - 1), e.g. the K branches of an EAGLE step."""
    if repeats == 1:
        return params
    index = torch.arange(params.batch_size, device=params.temperature.device)
    return params.select(index.repeat_interleave(repeats))


def filtered_q(
    logits: torch.Tensor,
    params: SamplingParams,
    rows: torch.Tensor,
    *,
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
    backend: str | None = None,
    block_v: int | None = None,
) -> torch.Tensor:
    """float32 [len(rows), V]: filter(logits[rows] / T) under each row's parameters, computed as
    the verifiers compute q (temperatures of `rows` must be > 0; `block_v`: the Triton tile)."""
    rule = filter_rule(filter_order)
    p = params.select(rows)
    if select_backend(logits, requested=backend) == "triton":
        from specreg.kernels.filtering import filtered_rows_triton, row_stats_triton
        from specreg.kernels.triton_shim import vocab_tile

        tile = vocab_tile(logits.shape[-1], block_v, default=DRAFT_BLOCK_V)
        stats = row_stats_triton(logits, rows, p.temperature, p.top_k, p.top_p, p.min_p,
                                 probabilities=False, block_v=tile, rule=rule)
        return filtered_rows_triton(logits, rows, p.temperature, stats, p.min_p,
                                    probabilities=False, block_v=tile)
    stats = gathered_row_stats(logits, rows, p.temperature, p.top_k, p.top_p, p.min_p,
                               probabilities=False, rule=rule)
    every = rows.numel() == logits.shape[0] and bool(
        (rows == torch.arange(rows.numel(), device=rows.device)).all())
    # filtered_rows scales into a fresh tensor: every row in order needs no gathered copy first
    return filtered_rows(logits if every else logits.index_select(0, rows), p.temperature,
                         stats, p.min_p, probabilities=False)


def _stream_exponentials(lanes: torch.Tensor, vocab: int) -> torch.Tensor:
    """float32 [k, V] Exp(1) values of every token under the rows' key lanes [k, 2] (the
    token level of the SAMPLE-role stream), clamped away from 0."""
    from specreg.kernels.random_stream import exponentials_of, token_words_torch

    tokens = torch.arange(vocab, dtype=torch.int64, device=lanes.device)
    words = token_words_torch((lanes[:, :1], lanes[:, 1:]), tokens)
    return exponentials_of(words).clamp_min_(torch.finfo(torch.float32).tiny)


def sample_rows(
    logits: torch.Tensor,
    params: SamplingParams,
    *,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
    backend: str | None = None,
    check_values: bool | None = None,
) -> RowDraw:
    """One draft per row of `logits` [r, V] under `params` (r requests): see the module."""
    from specreg.kernels.block_race import block_race_torch
    from specreg.kernels.random_stream import draw_lanes_torch
    from specreg.kernels.random_stream.types import SAMPLE_ROLE

    rows, vocab = check_draft_inputs(logits, params, check_values=check_values)
    keys, positions = _stream_keys(params, keys, positions, generator)
    device = logits.device
    invalid = invalid_logit_rows(logits)
    tokens = torch.zeros(rows, dtype=torch.int64, device=device)
    sampled = (~params.greedy & ~invalid).nonzero().flatten()
    greedy = (params.greedy & ~invalid).nonzero().flatten()
    if sampled.numel() == rows:  # the common all-sampled batch: q is the filtered rows
        q = filtered_q(logits, params, sampled, filter_order=filter_order, backend=backend)
        lanes = draw_lanes_torch(keys, SAMPLE_ROLE, positions)
        tokens = block_race_torch(q, lanes)
    else:
        q = torch.zeros((rows, vocab), dtype=torch.float32, device=device)
        if sampled.numel():
            q_s = filtered_q(logits, params, sampled, filter_order=filter_order,
                             backend=backend)
            lanes = draw_lanes_torch(keys[sampled], SAMPLE_ROLE, positions[sampled])
            tokens[sampled] = block_race_torch(q_s, lanes)
            q[sampled] = q_s
        if greedy.numel():  # the argmax of the greedy rows only (compute-bound on CPU)
            tokens[greedy] = torch.argmax(logits.index_select(0, greedy), dim=-1)
            q[greedy, tokens[greedy]] = 1.0
    tokens = torch.where(invalid, -1, tokens)
    return RowDraw(tokens=tokens, q=q, invalid=invalid)


def sample_children(
    logits: torch.Tensor,
    params: SamplingParams,
    k: int,
    *,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
    backend: str | None = None,
    check_values: bool | None = None,
) -> ChildrenDraw:
    """k children per row of `logits` [r, V] under `params` (r requests): see the module."""
    rows, vocab = check_draft_inputs(logits, params, check_values=check_values)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= vocab:
        raise KernelInputError(
            problem(
                "SR926",
                f"k={k!r} children cannot be drawn without replacement from a vocab of {vocab}",
                accepted=f"an int in [1, {vocab}]",
                fix="draw at most as many children as the vocab has tokens (the plan's topk "
                "against the draft model's vocab)",
                field="k",
            )
        )
    from specreg.kernels.random_stream import draw_lanes_torch
    from specreg.kernels.random_stream.types import SAMPLE_ROLE

    keys, positions = _stream_keys(params, keys, positions, generator)
    probs = torch.softmax(logits.float(), dim=-1)
    weights, tokens = torch.topk(probs, k, dim=-1)  # the deterministic top-k of greedy rows
    sampled = (~params.greedy).nonzero().flatten()
    if sampled.numel():
        q_s = filtered_q(logits, params, sampled, filter_order=filter_order, backend=backend)
        # Gumbel-top-k: the k largest q / E (E ~ Exp(1)) are k draws without replacement, in
        # order; the Gumbel key of a child is log(q / E), its weight exp(-E / q) = its CDF.
        # E: the SAMPLE-role stream of each row's (key, position), one value per token.
        lanes = draw_lanes_torch(keys[sampled], SAMPLE_ROLE, positions[sampled])
        race = q_s / _stream_exponentials(lanes, vocab)
        keys, drawn = torch.topk(race, k, dim=-1)
        child_weights = torch.exp(-1.0 / keys).clamp_(CHILD_WEIGHT_MIN, CHILD_WEIGHT_MAX)
        rank = torch.arange(k, dtype=torch.float32, device=logits.device)
        child_weights *= (1.0 - CHILD_RANK_STEP) ** rank
        tokens[sampled] = drawn
        weights[sampled] = child_weights
        probs[sampled] = q_s
    return ChildrenDraw(tokens=tokens, weights=weights, q=probs)
