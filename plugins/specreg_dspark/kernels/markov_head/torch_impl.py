"""DSpark's Markov heads as torch modules: a low-rank correction of each draft slot from the
previous token, and the samplers their block walk draws with.

Weights (all variants): ``markov_w1`` = embedding [V, R], ``markov_w2`` = linear R -> V without
bias (weight [V, R]), R = markov_rank.

- vanilla: ``bias = W2 . W1[prev]``
- gated:   ``gate = sigmoid(gate_proj([h_k, W1[prev]]))`` (-> R), ``bias = W2 . (gate * W1[prev])``
- rnn:     GRU-like state s (zero per block): ``[g, c, o] = cell([s, W1[prev], h_k])`` (-> 3R),
  ``s <- sigmoid(g) * s + (1 - sigmoid(g)) * tanh(c)``, ``bias = W2 . tanh(o)``

`sample_block` walks the block left to right (``prev = anchor``; slot k: ``logits_k = base_k +
bias(prev, h_k)``; ``tok_k = sampler(logits_k)``; ``prev = tok_k``) and returns the draft tokens
and the corrected logits. Sampling verification must use ``q = softmax(corrected / T)``: the
distribution the drafts were actually drawn from. `make_markov_head` (the family's
``__init__``) builds the head a checkpoint names; `checks.check_block` validates a walk's inputs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from specreg.backend import select_backend
from specreg.errors import ConfigError, problem
from specreg.kernels.sampling import exponential_race_sample
from specreg_dspark.kernels.markov_greedy import markov_greedy_step, w2_row_norms
from specreg_dspark.kernels.markov_head.checks import check_block

Sampler = Callable[[torch.Tensor], torch.Tensor]


def greedy_sampler(logits: torch.Tensor) -> torch.Tensor:
    """argmax per row (ties to the lowest index)."""
    return torch.argmax(logits, dim=-1)


class ExponentialRaceSampler:
    """Draw from ``softmax(logits / T)`` by the exponential race (core `exponential_race_sample`).

    ``temperature <= 0`` is greedy. `probs` gives the matching q for verification.
    """

    def __init__(self, temperature: float = 1.0, *, generator: torch.Generator | None = None):
        self.temperature = float(temperature)
        self.generator = generator

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits.float() / self.temperature, dim=-1)

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        if self.temperature <= 0:
            return greedy_sampler(logits)
        return exponential_race_sample(self.probs(logits), generator=self.generator)


class MarkovHead(nn.Module):
    """Base class: the vanilla head. Subclasses override `_bias`."""

    head_type = "vanilla"

    def __init__(self, vocab_size: int, rank: int, hidden_size: int = 0) -> None:
        super().__init__()
        if rank <= 0 or vocab_size <= 0:
            raise ConfigError(
                problem(
                    "SR303",
                    f"a Markov head needs markov_rank > 0 and a vocab > 0, got rank={rank}, "
                    f"vocab_size={vocab_size}",
                    accepted="markov_rank >= 1, vocab_size >= 1",
                    fix="build the head from the DSpark checkpoint's config",
                    field="markov_rank",
                )
            )
        self.vocab_size = vocab_size
        self.rank = rank
        self.hidden_size = hidden_size
        self.markov_w1 = nn.Embedding(vocab_size, rank)
        self.markov_w2 = nn.Linear(rank, vocab_size, bias=False)

    def init_state(self, batch: int, like: torch.Tensor) -> torch.Tensor | None:
        return None

    def _check(
        self, base_logits: torch.Tensor, anchor: torch.Tensor, hidden: torch.Tensor | None
    ) -> None:
        check_block(
            base_logits, anchor, hidden, weights=self.markov_w1.weight,
            vocab_size=self.vocab_size, hidden_size=self.hidden_size, head_type=self.head_type,
        )

    def _bias(
        self, prev: torch.Tensor, hidden: torch.Tensor | None, state: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.markov_w2(self.markov_w1(prev)), state

    def forward(
        self,
        prev: torch.Tensor,
        hidden: torch.Tensor | None = None,
        state: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One step: (bias [b, V], next state)."""
        return self._bias(prev, hidden, state)

    def sample_block(
        self,
        base_logits: torch.Tensor,
        anchor: torch.Tensor,
        hidden: torch.Tensor | None = None,
        sampler: Sampler | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Walk the block: draft tokens int64 [b, gamma] and corrected logits float32 [b, gamma, V].

        `base_logits` [b, gamma, V]; `anchor` [b]; `hidden` [b, gamma, H] (gated/rnn);
        `sampler` maps logits [b, V] to tokens [b] (default greedy).
        """
        self._check(base_logits, anchor, hidden)
        sampler = sampler or greedy_sampler
        b, gamma, vocab = base_logits.shape
        tokens = torch.empty((b, gamma), dtype=torch.int64, device=base_logits.device)
        corrected = torch.empty((b, gamma, vocab), dtype=torch.float32, device=base_logits.device)
        prev = anchor.to(torch.int64)
        state = self.init_state(b, base_logits)
        for k in range(gamma):
            h_k = hidden[:, k] if hidden is not None else None
            bias, state = self._bias(prev, h_k, state)
            corrected[:, k] = base_logits[:, k].float() + bias.float()
            prev = sampler(corrected[:, k]).to(torch.int64)
            tokens[:, k] = prev
        return tokens, corrected

    def greedy_block(
        self,
        base_logits: torch.Tensor,
        anchor: torch.Tensor,
        hidden: torch.Tensor | None = None,
        *,
        backend: str | None = None,
    ) -> torch.Tensor:
        """Greedy walk without the corrected logits: int64 [b, gamma]. The vanilla head uses the
        fused step (`markov_greedy_step`: one pass over W2, no [b, V] bias) on `backend`
        ('auto' | 'torch' | 'triton', or None: SPECREG_KERNEL_BACKEND); the torch step's W2
        row norms are computed once per block."""
        if self.head_type != "vanilla":
            return self.sample_block(base_logits, anchor, hidden, greedy_sampler)[0]
        self._check(base_logits, anchor, hidden)
        b, gamma, _ = base_logits.shape
        tokens = torch.empty((b, gamma), dtype=torch.int64, device=base_logits.device)
        prev = anchor.to(torch.int64)
        w1, w2 = self.markov_w1.weight.detach(), self.markov_w2.weight.detach()
        norms = None if select_backend(base_logits, requested=backend) == "triton" else (
            w2_row_norms(w2))
        for k in range(gamma):
            prev = markov_greedy_step(base_logits[:, k], prev, w1, w2, backend=backend,
                                      w2_norms=norms)
            tokens[:, k] = prev
        return tokens


VanillaMarkovHead = MarkovHead


class GatedMarkovHead(MarkovHead):
    head_type = "gated"

    def __init__(self, vocab_size: int, rank: int, hidden_size: int) -> None:
        super().__init__(vocab_size, rank, hidden_size)
        self.gate_proj = nn.Linear(hidden_size + rank, rank)

    def _bias(
        self, prev: torch.Tensor, hidden: torch.Tensor | None, state: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        assert hidden is not None
        embed = self.markov_w1(prev)
        gate = torch.sigmoid(self.gate_proj(torch.cat([hidden.to(embed.dtype), embed], dim=-1)))
        return self.markov_w2(gate * embed), state


class RNNMarkovHead(MarkovHead):
    head_type = "rnn"

    def __init__(self, vocab_size: int, rank: int, hidden_size: int) -> None:
        super().__init__(vocab_size, rank, hidden_size)
        self.cell = nn.Linear(2 * rank + hidden_size, 3 * rank)

    def init_state(self, batch: int, like: torch.Tensor) -> torch.Tensor:
        return torch.zeros(
            (batch, self.rank), dtype=self.markov_w1.weight.dtype, device=like.device
        )

    def _bias(
        self, prev: torch.Tensor, hidden: torch.Tensor | None, state: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        assert hidden is not None and state is not None
        embed = self.markov_w1(prev)
        gates = self.cell(torch.cat([state, embed, hidden.to(embed.dtype)], dim=-1))
        g, c, o = gates.chunk(3, dim=-1)
        keep = torch.sigmoid(g)
        state = keep * state + (1 - keep) * torch.tanh(c)
        return self.markov_w2(torch.tanh(o)), state


HEADS: dict[str, type[MarkovHead]] = {
    "vanilla": MarkovHead,
    "gated": GatedMarkovHead,
    "rnn": RNNMarkovHead,
}
