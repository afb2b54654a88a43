"""Real `transformers` models behind the toy model's interface, so the reference loop runs them.

`tiny_llama(...)` builds a small Llama from a config (random weights, seeded; nothing is
downloaded). `CausalLM(model)` gives it the interface `specreg.testing.loop.SpeculativeLoop` and
`specreg.testing.lossless` use: `next_logits(seqs, lengths)` (the full-context forward, the
reference), `logits(windows, ...)` (each query's reversed token window, spanning its whole
context, is turned back into its sequence), `windows_for`, and a dense model's empty sparse read
(`select` finds no rows). It also serves the draft sides the loop asks for:

- `draft_runner(batch, capacity)`: a batched KV cache for a standalone draft model, rolled back
  per request by masking the cache columns of rejected positions (`DraftRunner`);
- `head_logits(seqs, lengths, num_heads)`: heads (Medusa's) on the hidden state of the last
  accepted token, the one whose logits produced the root;
- `head=`: a replacement output head over the model's final hidden states, for drafters that
  read the target's hidden states (an EAGLE-style draft: the target's hidden state through a
  perturbed LM head).

transformers is imported here only (the `models` extra); nothing here imports a plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import torch

#: Every query's window spans its whole context: prompts plus generated tokens stay below it.
WINDOW = 256


@attrs.frozen
class ModelConfig:
    """What the loop reads of a model's configuration (the toy's `ToyConfig` fields)."""

    vocab_size: int
    dim: int
    window: int = WINDOW
    top_k: int = 1


def tiny_llama(
    *,
    seed: int = 0,
    vocab_size: int = 256,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    initializer_range: float = 0.02,
    logit_scale: float = 16.0,
) -> Any:
    """A seeded, randomly initialised `LlamaForCausalLM` in eval mode (float32, CPU).

    The LM head is scaled by `logit_scale`: a random init's next-token distributions are
    near-uniform (top probability ~1/V), the scaled ones peaked (~0.3 at the defaults), so
    sampling checks compare distributions that differ where it matters."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads, max_position_embeddings=2 * WINDOW,
        initializer_range=initializer_range, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).float().eval().requires_grad_(False)
    model.lm_head.weight.mul_(logit_scale)
    return model


def truncated_draft(target: Any, *, num_layers: int = 1) -> Any:
    """A smaller Llama sharing the target's vocabulary: the target's embedding, first
    `num_layers` decoder layers, final norm and LM head (a layer-skipping draft model)."""
    import copy

    from transformers import LlamaForCausalLM

    config = copy.deepcopy(target.config)
    config.num_hidden_layers = num_layers
    draft = LlamaForCausalLM(config).float().eval()
    own = draft.state_dict()
    draft.load_state_dict({k: v for k, v in target.state_dict().items() if k in own})
    return draft.requires_grad_(False)


def checkpoint_config(model: Any) -> dict[str, Any]:
    """The model's config.json, as a framework reads it from the checkpoint folder."""
    return model.config.to_dict()


class DraftRunner:
    """A standalone draft model with one batched KV cache, as `DraftModelRunner` describes.

    Every call appends its tokens as new cache columns for the whole batch; `positions[r, c]`
    records which position column c holds for request r (-1: padding or rolled back). Feeding
    from `start[r]` first invalidates request r's columns at positions >= start[r] (the
    rollback), so attention reads exactly the committed prefix the drafter claims.
    """

    def __init__(self, model: Any, batch: int, *, roll_back: bool = True) -> None:
        """`roll_back=False` keeps the KV of every fed token (rejected drafts included): the
        negative control of the rollback tests."""
        import inspect

        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache()
        self.roll_back = roll_back
        # transformers 5.2x renamed `past_key_values` to `cache`; older releases take the former
        params = inspect.signature(model.forward).parameters
        self.cache_keyword = "cache" if "cache" in params else "past_key_values"
        self.positions = torch.empty(batch, 0, dtype=torch.long)

    def __call__(self, tokens: torch.Tensor, start: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        b, t = tokens.shape
        stale = self.positions >= start[:, None]
        held = torch.where(stale & self.roll_back, -1, self.positions)
        cached = (held >= 0).sum(1)
        if bool((cached < start).any()):
            raise AssertionError(
                f"draft runner: feeding from {start.tolist()} leaves a gap after the cached "
                f"{cached.tolist()} positions"
            )
        offsets = torch.arange(t)[None, :]
        new = torch.where(offsets < counts[:, None], start[:, None] + offsets, -1)
        self.positions = torch.cat([held, new], dim=1)
        out = self.model(
            input_ids=tokens, attention_mask=(self.positions >= 0).long(),
            position_ids=(start[:, None] + offsets), use_cache=True,
            **{self.cache_keyword: self.cache},
        )
        return out.logits[torch.arange(b), counts - 1].float()


class CausalLM:
    """A transformers causal LM with the toy model's interface (see the module doc)."""

    def __init__(
        self,
        model: Any,
        *,
        head: Callable[[torch.Tensor], torch.Tensor] | None = None,
        heads: Callable[[torch.Tensor], torch.Tensor] | None = None,
        mask_token_id: int | None = None,
    ) -> None:
        self.model = model
        vocab, dim = int(model.config.vocab_size), int(model.config.hidden_size)
        self.config = ModelConfig(vocab_size=vocab, dim=dim)
        self.head = head
        self.heads = heads
        self.mask_token_id = vocab - 1 if mask_token_id is None else mask_token_id
        self.forwards = 0

    @property
    def row_elems(self) -> int:
        return 1

    # ----------------------------------------------------------------------------- forward
    def _final(self, seqs: torch.Tensor, lengths: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
        """The final hidden states at column `at` [M] of right-padded `seqs` [M, L].

        Identical queries (the same tokens up to their length, the same column) run once:
        a sampling check's thousands of copies of one prompt share most of them."""
        width = int(lengths.max())
        cols = torch.arange(width)[None, :]
        tokens = torch.where(cols < lengths[:, None], seqs[:, :width].clamp(min=0), 0)
        keys, inverse = torch.unique(
            torch.cat([tokens, at[:, None]], dim=1), dim=0, return_inverse=True
        )
        self.forwards += 1
        out = self.model.model(input_ids=keys[:, :width], use_cache=False)
        hidden = out.last_hidden_state[torch.arange(keys.shape[0]), keys[:, width]]
        return hidden[inverse]

    def next_logits(self, seqs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Logits after the last token of each sequence: the full-context forward. [M, V]."""
        if seqs.shape[0] == 0:
            return torch.empty(0, self.config.vocab_size)
        hidden = self._final(seqs, lengths, lengths - 1)
        out = self.head(hidden) if self.head is not None else self.model.lm_head(hidden)
        return out.float()

    def logits(
        self, windows: torch.Tensor, positions: torch.Tensor, rows: torch.Tensor,
        row_valid: torch.Tensor,
    ) -> torch.Tensor:
        """Logits for queries given as reversed windows (tokens at p, p - 1, ...; -1 before the
        start, or for a block's mask slots, which read as `mask_token_id`). [M, V]."""
        if bool((positions >= self.config.window).any()):
            raise ValueError(f"a query at position {int(positions.max())} passes the window")
        length = positions + 1
        span = int(length.max())
        index = positions[:, None] - torch.arange(span)[None, :]
        seqs = windows.gather(1, index.clamp(min=0))
        seqs = torch.where(seqs < 0, self.mask_token_id, seqs)
        seqs = torch.where(index >= 0, seqs, 0)
        return self.next_logits(seqs, length)

    def windows_for(self, seqs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        offsets = lengths[:, None] - 1 - torch.arange(self.config.window)[None, :]
        gathered = torch.gather(seqs, 1, offsets.clamp(min=0, max=seqs.shape[1] - 1))
        return torch.where(offsets >= 0, gathered, torch.full_like(gathered, -1))

    # ----------------------------------------------------------------- a dense model's reads
    def sparse_context_len(self, positions: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(positions)

    def select(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return torch.full((tokens.shape[0], self.config.top_k), -1, dtype=torch.int32)

    def dense_rows(
        self, sequences: torch.Tensor, request: torch.Tensor, selected: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        shape = tuple(selected.shape)
        return torch.zeros(*shape, 1), torch.zeros(shape, dtype=torch.bool)

    # ----------------------------------------------------------------------------- drafting
    def draft_runner(self, batch: int, capacity: int) -> DraftRunner:
        return DraftRunner(self.model, batch)

    def head_logits(self, seqs: torch.Tensor, lengths: torch.Tensor, num_heads: int) -> torch.Tensor:
        """Heads on the hidden state of the token before the root: [b, num_heads, V]."""
        if self.heads is None:
            raise ValueError("this model has no heads (pass heads=)")
        hidden = self._final(seqs, lengths, (lengths - 2).clamp(min=0))
        return self.heads(hidden)[:, :num_heads].float()


def generate_greedy(model: Any, prompts: torch.Tensor, num_new: int) -> torch.Tensor:
    """`model.generate` greedy decoding of `prompts` [b, L] (no EOS stop): [b, L + num_new]."""
    return model.generate(
        prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=num_new,
        min_new_tokens=num_new, do_sample=False, pad_token_id=0,
    )
