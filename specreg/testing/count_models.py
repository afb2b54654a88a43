"""Count-based causal models fitted on a token corpus, behind the draft interfaces the reference
loop's steps read, so model-based drafters can be measured on real text without a trained network.

`CountLM.fit(streams, vocab_size, offsets=S)` counts, in the training streams, which token
follows each context of one and two tokens at each offset d = 0 .. S - 1 (d = 0: the next token;
d > 0: the token d places further, a skip-gram). Its distribution for offset d is the
interpolation 0.6 P(w | two tokens) + 0.3 P(w | one token) + 0.1 P(w), each weight moved to the
shorter contexts where a context was never seen, plus a floor of 1e-6 on every token. It serves:

- `next_logits(seqs [b, L], lengths [b])` (offset 0): a trigram LM as a draft model (EAGLE's
  draft network in `specreg.testing.tree_step`, the toy model's interface);
- `draft_runner(batch, capacity)`: the same LM with a per-request cache of fed tokens, a
  standalone draft model for `specreg.testing.draft_model_step` (rolled back by the drafter);
- `head_logits(seqs, lengths, num_heads)`: offsets 0 .. num_heads - 1 from the same context,
  Medusa-style heads (head d predicts the token d + 1 places past the last committed one) for
  `specreg.testing.heads_step`, and the per-slot logits of a block drafter's draft forward;
- `bigram_factors(rank)`: a rank-r factorisation (truncated SVD) of the bigram pointwise mutual
  information ``log P(w | prev) - log P(w)`` (offset 0, one-token context, as `probs` smooths it),
  as the weights of DSpark's vanilla Markov head (``markov_w1`` [V, r], ``markov_w2`` [V, r]): the
  head's bias ``W2 . W1[prev]`` is then the low-rank bigram correction a trained head learns.

Counts live in sorted int64 keys (context x vocab + token) with `searchsorted` lookups; nothing is
a neural network and nothing is downloaded. Fit it on text the evaluation never replays.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

WEIGHTS = (0.6, 0.3, 0.1)  # two-token context, one-token context, no context
FLOOR = 1e-6


class _Table:
    """Counts of (context key, token): `rows(keys)` -> dense counts [b, V] and totals [b]."""

    def __init__(self, contexts: torch.Tensor, tokens: torch.Tensor, vocab: int) -> None:
        self.vocab = vocab
        keys, counts = torch.unique(contexts * vocab + tokens, return_counts=True)
        self.keys, self.counts = keys, counts.double()
        self.contexts = keys // vocab

    def rows(self, contexts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, v = contexts.shape[0], self.vocab
        lo = torch.searchsorted(self.contexts, contexts)
        hi = torch.searchsorted(self.contexts, contexts, right=True)
        dense = torch.zeros(b, v, dtype=torch.float64)
        span = hi - lo
        if int(span.sum()) > 0:
            row = torch.repeat_interleave(torch.arange(b), span)
            starts = torch.repeat_interleave(lo - torch.cumsum(span, 0) + span, span)
            index = torch.arange(int(span.sum())) + starts
            dense[row, self.keys[index] % v] = self.counts[index]
        return dense, dense.sum(dim=1)


class CountLM:
    """An interpolated trigram LM with skip-gram offsets (see the module docstring)."""

    def __init__(self, vocab_size: int, tables: list[tuple[_Table, _Table, torch.Tensor]]) -> None:
        self.vocab_size = vocab_size
        self.tables = tables  # per offset: (two-token, one-token, unigram counts)

    @classmethod
    def fit(cls, streams: Sequence[Sequence[int]], vocab_size: int, *, offsets: int = 1) -> CountLM:
        v = vocab_size
        tables = []
        for d in range(offsets):
            two, one, target = [], [], []
            for stream in streams:
                s = torch.as_tensor(list(stream), dtype=torch.long)
                n = s.numel() - 2 - d
                if n <= 0:
                    continue
                two.append(s[:n] * v + s[1 : n + 1])
                one.append(s[1 : n + 1])
                target.append(s[2 + d : 2 + d + n])
            if not target:
                raise ValueError("CountLM.fit: no stream is long enough to count")
            tokens = torch.cat(target)
            unigram = torch.bincount(tokens, minlength=v).double()
            tables.append((_Table(torch.cat(two), tokens, v), _Table(torch.cat(one), tokens, v),
                           unigram / unigram.sum()))
        return cls(vocab_size, tables)

    @property
    def offsets(self) -> int:
        return len(self.tables)

    def probs(self, before: torch.Tensor, last: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """float64 [b, V]: the offset's distribution after the two tokens (`before`, `last`);
        `before` -1 where the context holds one token only."""
        two, one, unigram = self.tables[offset]
        v = self.vocab_size
        c2, n2 = two.rows(torch.where(before >= 0, before * v + last, -1))
        c1, n1 = one.rows(last)
        w2 = torch.where(n2 > 0, WEIGHTS[0], 0.0)
        w1 = torch.where(n1 > 0, WEIGHTS[1], 0.0)
        w0 = 1.0 - w2 - w1
        out = (w2[:, None] * c2 / n2.clamp(min=1)[:, None] + w1[:, None] * c1
               / n1.clamp(min=1)[:, None] + w0[:, None] * unigram[None, :])
        return out + FLOOR

    def _context(self, seqs: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.arange(seqs.shape[0])
        last = seqs[rows, lengths - 1]
        before = torch.where(lengths >= 2, seqs[rows, (lengths - 2).clamp(min=0)], -1)
        return before, last

    def next_logits(self, seqs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """float32 [b, V] log-probabilities of the token after each request's `lengths` tokens."""
        return self.probs(*self._context(seqs, lengths)).log().float()

    def head_logits(self, seqs: torch.Tensor, lengths: torch.Tensor, num_heads: int) -> torch.Tensor:
        """float32 [b, num_heads, V]: head d's log-probabilities of the token d + 1 places past
        the last committed one, from the same two-token context."""
        if num_heads > self.offsets:
            raise ValueError(f"fitted with {self.offsets} offsets, asked for {num_heads} heads")
        before, last = self._context(seqs, lengths)
        return torch.stack([self.probs(before, last, d).log().float() for d in range(num_heads)], 1)

    def bigram_factors(self, rank: int, *, rows: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
        """(w1, w2), float32 [V, rank] each, with ``w1 @ w2.T`` the best rank-`rank`
        approximation (randomised SVD, seeded) of M[prev, w] = log P(w | prev) - log(P(w) + floor),
        P(w | prev) being `probs` after the single token prev (0 where prev was never seen).
        Each factor carries the square root of the singular values. Cached per rank."""
        cache = self.__dict__.setdefault("_bigram_factors", {})
        if rank in cache:
            return cache[rank]
        v = self.vocab_size
        if not 0 < rank <= v:
            raise ValueError(f"rank must be in [1, {v}], got {rank}")
        baseline = (self.tables[0][2] + FLOOR).log()
        pmi = torch.empty(v, v, dtype=torch.float32)
        for start in range(0, v, rows):
            prev = torch.arange(start, min(start + rows, v))
            pmi[start : start + prev.numel()] = (
                self.probs(torch.full_like(prev, -1), prev).log() - baseline).float()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            u, s, right = torch.svd_lowrank(pmi, q=min(v, rank + 16), niter=4)
        scale = s[:rank].sqrt()
        cache[rank] = ((u[:, :rank] * scale).contiguous(), (right[:, :rank] * scale).contiguous())
        return cache[rank]

    def draft_runner(self, batch: int, capacity: int) -> CountDraftRunner:
        return CountDraftRunner(self, batch, capacity)


class CountDraftRunner:
    """`CountLM` as a standalone draft model with a cache: each request's fed tokens are kept per
    position, a feed from `start` replaces everything from there on, and the logits after the
    last fed token come from the cache alone (a gap before `start` is an error)."""

    def __init__(self, model: CountLM, batch: int, capacity: int) -> None:
        self.model = model
        self.cache = torch.zeros(batch, capacity, dtype=torch.long)
        self.valid = torch.zeros(batch, dtype=torch.long)

    def __call__(self, tokens: torch.Tensor, start: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        if bool((start > self.valid).any()):
            raise AssertionError(f"feeding from {start.tolist()} leaves a gap after {self.valid.tolist()}")
        cols = start[:, None] + torch.arange(tokens.shape[1])[None, :]
        fed = torch.arange(tokens.shape[1])[None, :] < counts[:, None]
        rows = torch.arange(tokens.shape[0])[:, None].expand_as(cols)
        self.cache[rows[fed], cols[fed]] = tokens[fed]
        self.valid = start + counts
        return self.model.next_logits(self.cache, self.valid)
