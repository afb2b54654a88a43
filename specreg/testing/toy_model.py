"""Seeded toy language models for end-to-end checks on the CPU.

The logits for the token after position ``p`` depend on two things:

- a dense local window: the last ``window`` tokens up to ``p`` (embedding tables per offset);
- a sparse-attention read: an indexer scores every position before the window,
  ``[0, p - window + 1)``, keeps the ``top_k`` best, and attends over their KV rows;
- with ``copy_bonus`` > 0, an induction head: the token that followed the current token's latest
  earlier occurrence in the window gains that logit, so text that repeated tends to repeat.

KV rows are a pure function of (token, position), kept in a host cache. A wrong or stale row
changes the output, so reading rows through a KV-cache swap is checked end to end. Because the
sparse read only covers positions before the window, every row a verify forward reads belongs to
an already committed token whenever ``window >= target_verify width``.
"""

from __future__ import annotations

import attrs
import torch


@attrs.frozen
class ToyConfig:
    vocab_size: int = 96
    dim: int = 16
    window: int = 16
    top_k: int = 8
    max_positions: int = 512
    temperature_scale: float = 3.0
    #: Logit added to the token that followed the latest earlier occurrence of the current
    #: token in the window (an induction head: text that repeated keeps repeating). 0: none.
    copy_bonus: float = 0.0


class ToyLM:
    """A deterministic toy LM. `perturbed(scale, seed)` makes a draft model from a target."""

    def __init__(self, config: ToyConfig = ToyConfig(), *, seed: int = 0) -> None:
        self.config = config
        g = torch.Generator().manual_seed(seed)
        v, d, w = config.vocab_size, config.dim, config.window
        self.local = torch.randn(w, v, d, generator=g) / (w**0.5)
        self.kv_token = torch.randn(v, d, generator=g)
        self.kv_pos = torch.randn(config.max_positions, d, generator=g) * 0.5
        self.query = torch.randn(v, d, generator=g)
        self.index_key = torch.randn(config.max_positions, d, generator=g)
        self.index_query = torch.randn(v, d, generator=g)
        self.out = torch.randn(v, d, generator=g) * config.temperature_scale / (d**0.5)
        # Indexer scores of every (token, position) pair, computed once: a query's scores are
        # then the same bits whatever batch it is computed in.
        self.index_scores = self.index_query @ self.index_key.T  # [V, max_positions]

    def perturbed(self, scale: float, *, seed: int) -> ToyLM:
        """A copy with noise on the output and local tables: a draft model for this target."""
        g = torch.Generator().manual_seed(seed)
        other = ToyLM.__new__(ToyLM)
        other.__dict__.update(self.__dict__)
        other.out = self.out + scale * torch.randn(self.out.shape, generator=g) * self.out.std()
        other.local = self.local + scale * torch.randn(self.local.shape, generator=g) * self.local.std()
        return other

    # ----------------------------------------------------------------------------- KV rows
    @property
    def row_elems(self) -> int:
        return self.config.dim

    def kv_rows(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The KV row of each (token, position): float32 [..., dim]."""
        return self.kv_token[tokens] + self.kv_pos[positions]

    # ----------------------------------------------------------------------------- indexer
    def sparse_context_len(self, positions: torch.Tensor) -> torch.Tensor:
        """How many positions the sparse read of a query at `positions` may see."""
        return (positions - self.config.window + 1).clamp(min=0)

    def select(
        self, tokens: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """The indexer: top-k positions for queries (tokens, positions) [M] -> int32 [M, top_k].

        Candidates are ``[0, sparse_context_len)``, ordered by score; -1 pads when fewer exist.
        """
        k = self.config.top_k
        n_ctx = self.sparse_context_len(positions)
        width = max(int(n_ctx.max()) if n_ctx.numel() else 0, k)
        scores = self.index_scores[tokens, :width]  # [M, width]
        valid = torch.arange(width)[None, :] < n_ctx[:, None]
        scores = torch.where(valid, scores, torch.full_like(scores, float("-inf")))
        order = torch.topk(scores, k, dim=1, sorted=True).indices
        picked = torch.where(torch.gather(valid, 1, order), order, torch.full_like(order, -1))
        return picked.to(torch.int32)

    # ----------------------------------------------------------------------------- forward
    def logits(
        self,
        windows: torch.Tensor,
        positions: torch.Tensor,
        rows: torch.Tensor,
        row_valid: torch.Tensor,
    ) -> torch.Tensor:
        """Next-token logits for M queries.

        windows: int64 [M, window], the tokens at positions p, p-1, ... (-1 before the start);
        positions: int64 [M]; rows: float32 [M, top_k, dim], the KV rows of the selected
        positions; row_valid: bool [M, top_k]. Returns float32 [M, vocab].
        """
        w, v = self.config.window, self.config.vocab_size
        present = windows >= 0
        flat_ids = torch.arange(w)[None, :] * v + windows.clamp(min=0)  # offset-major table rows
        local = torch.nn.functional.embedding_bag(
            flat_ids, self.local.reshape(w * v, -1), per_sample_weights=present.float(), mode="sum"
        )
        query = self.query[windows[:, 0].clamp(min=0)]
        scores = (rows * query[:, None, :]).sum(-1) / (self.config.dim**0.5)
        scores = torch.where(row_valid, scores, torch.full_like(scores, float("-inf")))
        weights = torch.softmax(scores, dim=-1)
        weights = torch.nan_to_num(weights, nan=0.0)  # a query with no valid row reads nothing
        read = (weights[..., None] * rows).sum(1)
        logits = (local + read) @ self.out.T
        if self.config.copy_bonus:
            logits = logits + self.config.copy_bonus * self.copy_votes(windows)
        return logits

    def copy_votes(self, windows: torch.Tensor) -> torch.Tensor:
        """float32 [M, vocab]: one-hot of the token that followed the latest earlier occurrence
        of each window's current token (windows[:, 0]) inside the window; zero rows where the
        current token did not occur before."""
        current = windows[:, :1]
        earlier = (windows[:, 1:] == current) & (current >= 0)  # [M, w - 1]: at p - 1, p - 2, ...
        found = earlier.any(1)
        latest = earlier.int().argmax(1, keepdim=True)  # offset k: p - (k + 1)
        follower = windows.gather(1, latest).squeeze(1)  # the token at p - k, after it
        votes = torch.zeros(windows.shape[0], self.config.vocab_size)
        rows = torch.arange(windows.shape[0])[found]
        votes[rows, follower[found]] = 1.0
        return votes

    def windows_for(self, sequences: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The local window ending at the last token of each sequence [M, L] (lengths [M])."""
        w = self.config.window
        offsets = lengths[:, None] - 1 - torch.arange(w)[None, :]
        gathered = torch.gather(sequences, 1, offsets.clamp(min=0))
        return torch.where(offsets >= 0, gathered, torch.full_like(gathered, -1))

    def dense_rows(
        self, sequences: torch.Tensor, request: torch.Tensor, selected: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows read straight from the tokens (no cache): the reference read path."""
        valid = selected >= 0
        pos = selected.clamp(min=0).long()
        tokens = sequences[request[:, None], pos]
        return self.kv_rows(tokens, pos), valid

    def next_logits(self, sequences: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Reference logits after the last token of each sequence, dense read. [M, vocab]."""
        windows = self.windows_for(sequences, lengths)
        positions = lengths - 1
        selected = self.select(windows[:, 0].clamp(min=0), positions)
        rows, valid = self.dense_rows(sequences, torch.arange(len(sequences)), selected)
        return self.logits(windows, positions, rows, valid)


def greedy_reference(model: ToyLM, prompts: torch.Tensor, num_new: int) -> torch.Tensor:
    """Plain greedy decoding, one token at a time: [b, prompt_len + num_new]."""
    b, length = prompts.shape
    seqs = torch.zeros(b, length + num_new, dtype=torch.long)
    seqs[:, :length] = prompts
    for i in range(num_new):
        lengths = torch.full((b,), length + i)
        seqs[:, length + i] = model.next_logits(seqs, lengths).argmax(-1)
    return seqs
