"""The torch path of ngram_match: suffix-match lengths of every position in max_ngram vectorised
compares, then vLLM's pick."""

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
    """vLLM's rule for the whole batch: the longest match, the earliest of its occurrences."""
    batch, width = tokens.shape
    device = tokens.device
    ell = match_lengths(tokens, lengths, max_ngram)
    starts = torch.arange(width, device=device)[None, :]
    score = torch.where(ell >= min_ngram, ell * (width + 1) + (width - starts), -1)
    best, where = score.max(dim=1)
    found = best >= 0
    count = torch.where(found, torch.minimum(lengths - where, torch.full_like(where, k)), 0)
    last = lengths - 1
    offsets = torch.arange(k, device=device)[None, :]
    index = torch.where(offsets < count[:, None], where[:, None] + offsets, last[:, None])
    drafts = tokens.gather(1, index.clamp(0, max(width - 1, 0)))
    ngram_len = torch.where(found, ell.gather(1, where[:, None])[:, 0], 0)
    return ChainProposal(
        tokens=drafts, num_drafts=count, start=torch.where(found, where, -1), ngram_len=ngram_len
    )
