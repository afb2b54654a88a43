"""Chain drafting with a standalone draft model in the reference loop (`draft_model` and kin).

For a chain algorithm whose drafter drives a draft model (`DraftModelDrafterProtocol`), the
drafter drafts (`draft(runner, history, lengths, cache_lens)`) and rolls the draft cache back
after each verify (`rollback`). The runner is the draft model's own
`draft_runner(batch, capacity)` when it has one (the transformers harness: a real KV cache per
request), else `ToyDraftRunner` over the toy draft model. Nothing here imports a plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from specreg.testing.step_parts import lengths_keyword

if TYPE_CHECKING:
    from specreg.testing.step_parts import Batch, LoopView
    from specreg.testing.toy_model import ToyLM


class ToyDraftRunner:
    """The toy draft model as a draft runner with a cache: each request's fed tokens are kept
    per position (the toy's "KV"), and logits are computed from them alone, so a token the
    drafter never fed (a gap) is an error and a stale one changes the drafts."""

    def __init__(self, model: ToyLM, batch: int, capacity: int) -> None:
        self.model = model
        self.cache = torch.zeros(batch, capacity, dtype=torch.long)
        self.valid = torch.zeros(batch, dtype=torch.long)

    def __call__(self, tokens: torch.Tensor, start: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        if bool((start > self.valid).any()):
            raise AssertionError(
                f"draft runner: feeding from {start.tolist()} leaves a gap after the cached "
                f"{self.valid.tolist()} positions"
            )
        cols = start[:, None] + torch.arange(tokens.shape[1])[None, :]
        fed = torch.arange(tokens.shape[1])[None, :] < counts[:, None]
        rows = torch.arange(tokens.shape[0])[:, None].expand_as(cols)
        self.cache[rows[fed], cols[fed]] = tokens[fed]
        self.valid = start + counts
        return self.model.next_logits(self.cache, self.valid)


def draft_with_model(loop: LoopView, batch: Batch, gamma: int) -> tuple[torch.Tensor, Any]:
    """(candidates [b, gamma + 1], q [b, gamma, V] or None): roll the draft cache back to what
    the last verify accepted, then draft `gamma` tokens with the plan's drafter."""
    drafter: Any = loop.plan.drafter
    state = getattr(loop, "_draft_model_state", None)
    if state is None or state["seqs"] is not batch.seqs:  # a new generate() call
        make = getattr(loop.draft, "draft_runner", None)
        capacity = batch.seqs.shape[1] + gamma + 1
        runner = make(batch.size, capacity) if make else ToyDraftRunner(loop.draft, batch.size, capacity)
        cache_lens = torch.zeros(batch.size, dtype=torch.long)
    else:
        runner = state["runner"]
        accepted = batch.lengths - state["lengths"] - 1  # -1: a finished request committed nothing
        cache_lens = drafter.rollback(state["lengths"], accepted, state["gamma"])
    temperature = loop.temperature if loop.sampling else 0.0
    drawn: dict[str, Any] = {"temperature": temperature}
    if loop.with_draft:  # each request's drafts from its filtered q; the logits go to verify
        drawn = {"params": loop.params, "filter_order": loop.plan.config.filter_order}
    draft = drafter.draft(
        runner, batch.seqs, batch.lengths, cache_lens, gamma=gamma, generator=loop.generator,
        keys=loop.keys, **drawn, **lengths_keyword(loop),
    )
    loop._draft_model_state = {  # type: ignore[attr-defined]
        "seqs": batch.seqs, "runner": runner, "lengths": batch.lengths.clone(), "gamma": gamma,
    }
    return draft.candidates(batch.last_tokens()), draft.logits if loop.with_draft else draft.q
