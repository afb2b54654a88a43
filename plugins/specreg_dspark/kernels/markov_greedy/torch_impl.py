"""The greedy Markov step in torch (the CPU path): pruned, two-step and vocab-chunked
implementations.

`markov_greedy_step_pruned_torch` (what the wrapper runs on CPU) computes the scores of the few
tokens that can win only: by Cauchy-Schwarz ``|W2[v] . e| <= ||W2[v]|| ||e||``, so a token whose
base logit plus that bound stays below the score of one known token (the base logits' argmax)
cannot be the argmax. It reads the base logits and the row norms of W2 (`w2_row_norms`, passed
in once per block by the head's walk, or computed from W2 in the call) instead of making the
``b x rank x V`` matmul that bounds the dense steps on a CPU, and falls back to the chunked
algorithm where the bound separates too few tokens. `markov_greedy_step_torch` materialises the
bias ``[b, V]`` and takes the argmax; `markov_greedy_step_chunked_torch` is the dense fused
algorithm (a running max over vocab chunks, ``b * chunk`` floats of temporaries instead of
``b * V``). All three give the same token (ties to the lowest index) up to float32 rounding of
near-ties.
"""

from __future__ import annotations

import torch


def markov_greedy_step_torch(
    base_logits: torch.Tensor, prev_tokens: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    """Two-step: bias = W1[prev] @ W2^T in float32, then argmax(base + bias)."""
    embed = w1[prev_tokens.long()].float()
    bias = embed @ w2.float().T
    return torch.argmax(base_logits.float() + bias, dim=-1)


def markov_greedy_step_chunked_torch(
    base_logits: torch.Tensor,
    prev_tokens: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    *,
    chunk: int = 16384,
) -> torch.Tensor:
    """The fused algorithm in torch: walk W2 in vocab chunks keeping a running max and argmax.

    Peak extra memory is ``b * chunk`` floats instead of ``b * V``. Ties keep the lowest index
    (a later chunk wins only with a strictly larger value).
    """
    embed = w1[prev_tokens.long()].float()
    b, vocab = base_logits.shape
    best = torch.full((b,), float("-inf"), device=base_logits.device)
    best_idx = torch.zeros(b, dtype=torch.int64, device=base_logits.device)
    for start in range(0, vocab, chunk):
        stop = min(start + chunk, vocab)
        scores = base_logits[:, start:stop].float() + embed @ w2[start:stop].float().T
        value, idx = scores.max(dim=-1)
        take = value > best
        best = torch.where(take, value, best)
        best_idx = torch.where(take, idx + start, best_idx)
    return best_idx


#: The pruned step computes every score (the chunked algorithm) when, beyond the one block per
#: request that holds its known token, more than this share of the vocabulary blocks stay
#: candidates (a bias bound too wide to separate the tokens).
DENSE_SHARE = 1 / 16
#: Below this many multiply-adds (b x rank x V) the dense step is cheaper than the pruned one's
#: fixed cost (about 45 small ops, ~0.3 ms on one CPU thread, about a 2**24-FMA matmul).
PRUNE_MIN_WORK = 1 << 24
#: Tokens per vocabulary block of the pruned step's first pass (a block maximum each), at most;
#: small vocabularies get blocks of V / 64 (at least 16) tokens.
PRUNE_BLOCK = 256
#: Relative widening of the bias bound (float32 rounding of a rank-R dot product is within
#: R * 2**-24 of ||W2[v]|| ||e||: far below it for any rank under 2**14), and of the known
#: score (float32 rounding of the sums, 2**-24 of their magnitude a step).
_SLACK = 1e-3
_ROUND = 1e-6


def w2_row_norms(w2: torch.Tensor) -> torch.Tensor:
    """float32 [V]: the Euclidean norm of each row of W2 (markov_w2's weight, [V, R])."""
    wide = w2.dtype == torch.float64  # vector_norm does not narrow; half types widen
    return torch.linalg.vector_norm(w2, dim=1, dtype=None if wide else torch.float32).float()


def _block_max(x: torch.Tensor, width: int) -> torch.Tensor:
    """[..., ceil(V / width)]: the maximum of each run of `width` columns of x [..., V]."""
    main = x.shape[-1] // width * width
    parts = [x[..., :main].unflatten(-1, (main // width, width)).amax(-1)] if main else []
    if main < x.shape[-1]:
        parts.append(x[..., main:].amax(-1, keepdim=True))
    return torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]


def _blocks(
    base: torch.Tensor, norms: torch.Tensor, width: int, row: torch.Tensor, block: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The base logits and W2 row norms [K, width] of vocabulary block `block[k]` of request
    `row[k]`; the last block, when shorter than `width`, padded with -inf and 0."""
    vocab = base.shape[1]
    main = vocab // width * width
    full_base = base[:, :main].unflatten(1, (main // width, width))
    full_norms = norms[:main].view(main // width, width)
    if main == vocab and base.is_contiguous():  # whole rows of a [b * blocks, width] view
        flat = base.view(-1, width)
        return flat.index_select(0, row * (main // width) + block), full_norms.index_select(0, block)
    values = torch.full((row.numel(), width), -torch.inf, device=base.device)
    block_norms = torch.zeros((row.numel(), width), device=base.device)
    full = block < main // width
    values[full] = full_base[row[full], block[full]]
    block_norms[full] = full_norms[block[full]]
    tail = ~full
    values[tail, : vocab - main] = base[row[tail], main:]
    block_norms[tail, : vocab - main] = norms[main:]
    return values, block_norms


def markov_greedy_step_pruned_torch(
    base_logits: torch.Tensor,
    prev_tokens: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    *,
    w2_norms: torch.Tensor | None = None,
    chunk: int = 16384,
    min_work: int = PRUNE_MIN_WORK,
) -> torch.Tensor:
    """The greedy step from the tokens that can win (module docstring), in ops over the whole
    batch. Per request r, with e = W1[prev_r], c = ||e|| and s0 the exact score of the base
    logits' maximum: the vocabulary blocks whose base maximum plus c times their largest W2 row
    norm reach s0 are kept; in them, the tokens with base[v] + c ||W2[v]|| >= s0; their exact
    scores are computed and the first maximum taken (both bounds widened by a float32 slack).
    Non-finite inputs take the two-step algorithm (torch.argmax's answer on them), wide bounds
    the chunked one, as do meta tensors (the candidates' count is data) and steps of fewer than
    `min_work` multiply-adds. `w2_norms`: `w2_row_norms(w2)` (None: computed here, one read
    of W2). Synchronises on an accelerator.
    """
    b, vocab = base_logits.shape
    device = base_logits.device
    if b * w1.shape[1] * vocab < min_work or device.type == "meta":
        return markov_greedy_step_chunked_torch(base_logits, prev_tokens, w1, w2, chunk=chunk)
    embed = w1[prev_tokens.long()].float()
    base = base_logits.float()
    norms = w2_row_norms(w2) if w2_norms is None else w2_norms.float()
    width = min(PRUNE_BLOCK, max(16, vocab // 64), vocab)
    block_max = _block_max(base, width)  # [b, blocks]
    norm_max = _block_max(norms, width)  # [blocks]
    rows = torch.arange(b, device=device)
    # a known token: the maximum of the block holding the row's maximum
    best_block = block_max.argmax(dim=-1)
    values, _ = _blocks(base, norms, width, rows, best_block)
    known = best_block * width + values.argmax(dim=-1)
    score = base[rows, known] + (w2[known].float() * embed).sum(-1)
    reach = torch.linalg.vector_norm(embed, dim=1) * (1 + _SLACK)
    floor = score - _SLACK * reach * norm_max.max() - _ROUND * (score.abs() + 1)
    finite = torch.stack([score.isfinite().all(), block_max.isfinite().all(),
                          norm_max.isfinite().all(), reach.isfinite().all()])
    if not bool(finite.all()):  # torch.argmax's answer (a NaN wins, +inf the first of them)
        return markov_greedy_step_torch(base_logits, prev_tokens, w1, w2)
    kept_row, kept_block = torch.nonzero(
        torch.addcmul(block_max, reach[:, None], norm_max[None, :]) >= floor[:, None],
        as_tuple=True)
    if kept_row.numel() > b + DENSE_SHARE * block_max.numel():
        return markov_greedy_step_chunked_torch(base_logits, prev_tokens, w1, w2, chunk=chunk)
    values, block_norms = _blocks(base, norms, width, kept_row, kept_block)
    upper = torch.addcmul(values, reach[kept_row][:, None], block_norms)
    pair, lane = torch.nonzero(upper >= floor[kept_row][:, None], as_tuple=True)
    row, col = kept_row[pair], kept_block[pair] * width + lane
    rows_of_w2 = w2.index_select(0, col).float()
    scores = values[pair, lane] + (rows_of_w2 * embed.index_select(0, row)).sum(-1)
    best = torch.full((b,), -torch.inf, device=device).scatter_reduce(0, row, scores, "amax")
    first = torch.where(scores == best[row], col, vocab)
    return torch.full((b,), vocab, dtype=torch.int64, device=device).scatter_reduce(
        0, row, first, "amin")
