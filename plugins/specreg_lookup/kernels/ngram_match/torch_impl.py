"""The torch path of ngram_match: suffix-match lengths of every position in max_ngram vectorised
compares (`match_lengths`, which the tree family ranks), then vLLM's pick; chain proposals
extend only the positions whose previous token is the request's last one."""

from __future__ import annotations

import torch

from specreg_lookup.kernels.ngram_match.types import ChainProposal


def match_lengths(tokens: torch.Tensor, lengths: torch.Tensor, max_ngram: int) -> torch.Tensor:
    """int64 [b, W]: for continuation start s, the number of tokens before s that equal the
    request's last tokens (capped at max_ngram); 0 where s = 0 or s >= length."""
    batch, width = tokens.shape
    device = tokens.device
    starts = torch.arange(width, device=device)[None, :]  # s
    ends = lengths[:, None]  # L
    run = (starts >= 1) & (starts <= ends - 1)
    out = torch.zeros(batch, width, dtype=torch.long, device=device)
    for t in range(max_ngram):
        before = starts - 1 - t  # history[s-1-t] ...
        tail = ends - 1 - t  # ... against history[L-1-t]
        ok = (before >= 0) & (tail >= 0)
        a = tokens.gather(1, before.clamp(min=0).expand(batch, width))
        b = tokens.gather(1, tail.clamp(min=0))
        run = run & ok & (a == b)
        out += run
    return out


def chain_proposals(
    tokens: torch.Tensor, lengths: torch.Tensor, min_ngram: int, max_ngram: int, k: int
) -> ChainProposal:
    """vLLM's rule for the whole batch: the longest match, the earliest of its occurrences.

    Only a continuation start s whose previous token equals the request's last token can match
    (every n-gram ends with it), so one compare over [b, W] finds those candidates and the
    other max_ngram - 1 compares read the candidates' tokens alone: the same lengths
    `match_lengths` gives them, at a fraction of its passes over the batch (b 64, W 4096,
    word-level text, behind vLLM's custom_class seam: 4.5 ms with every position's lengths,
    1.2 ms this way; vLLM's numba proposer 0.33-0.41 ms: benchmarks/bench_peers.py)."""
    batch, width = tokens.shape
    if min_ngram < 1 or width < 2:  # a 0-gram matches anywhere: every position competes
        return _chain_proposals_dense(tokens, lengths, min_ngram, max_ngram, k)
    device = tokens.device
    last = lengths - 1
    hit = tokens[:, : width - 1] == tokens.gather(1, last[:, None])  # column j: s = j + 1
    rows, column = hit.nonzero(as_tuple=True)
    inside = column < last.index_select(0, rows)  # s <= L - 1: a token follows the n-gram
    rows, starts = rows[inside], column[inside] + 1
    ell = torch.ones_like(starts)
    alive = torch.ones_like(starts, dtype=torch.bool)
    for t in range(1, max_ngram):
        before = starts - 1 - t  # history[s-1-t] against history[L-1-t]
        tail = last.index_select(0, rows) - t
        same = tokens[rows, before.clamp(min=0)] == tokens[rows, tail.clamp(min=0)]
        alive &= (before >= 0) & (tail >= 0) & same
        ell += alive
    score = torch.where(ell >= min_ngram, ell * (width + 1) + (width - starts), -1)
    best = torch.full((batch,), -1, dtype=torch.long, device=device)
    best.scatter_reduce_(0, rows, score, "amax")
    found = best >= 0
    where = torch.where(found, width - best.remainder(width + 1), 0)
    ngram_len = torch.where(found, best.div(width + 1, rounding_mode="floor"), 0)
    return _proposal(tokens, lengths, where, found, ngram_len, k)


def _chain_proposals_dense(
    tokens: torch.Tensor, lengths: torch.Tensor, min_ngram: int, max_ngram: int, k: int
) -> ChainProposal:
    """The same rule from every position's match length (`match_lengths`)."""
    batch, width = tokens.shape
    device = tokens.device
    ell = match_lengths(tokens, lengths, max_ngram)
    starts = torch.arange(width, device=device)[None, :]
    score = torch.where(ell >= min_ngram, ell * (width + 1) + (width - starts), -1)
    best, where = score.max(dim=1)
    found = best >= 0
    ngram_len = torch.where(found, ell.gather(1, where[:, None])[:, 0], 0)
    return _proposal(tokens, lengths, where, found, ngram_len, k)


def _proposal(tokens: torch.Tensor, lengths: torch.Tensor, where: torch.Tensor,
              found: torch.Tensor, ngram_len: torch.Tensor, k: int) -> ChainProposal:
    """Up to k tokens from `where` (the continuation start) in each row that `found` a match,
    the row's last token filling the rest."""
    width = tokens.shape[1]
    count = torch.where(found, torch.minimum(lengths - where, torch.full_like(where, k)), 0)
    offsets = torch.arange(k, device=tokens.device)[None, :]
    index = torch.where(offsets < count[:, None], where[:, None] + offsets, (lengths - 1)[:, None])
    drafts = tokens.gather(1, index.clamp(0, max(width - 1, 0)))
    return ChainProposal(
        tokens=drafts, num_drafts=count, start=torch.where(found, where, -1), ngram_len=ngram_len
    )
