"""What one draft-and-verify step shares with the loop that runs it: the batch and the loop's view.

`Batch` holds every request's committed tokens; `LoopView` is what a step reads from the loop
(the plan, the draft model, the widths of the running candidate, the sampling settings, the
per-request draft lengths and the target's verify logits); `lengths_keyword` is how a step
hands those lengths to a drafter or verifier. `specreg.testing.tree_step` takes a `LoopView`,
so it never imports the loop that calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import torch

if TYPE_CHECKING:
    from specreg.registry.plan import SpecPlan
    from specreg.contract.sampling_params import SamplingParams
    from specreg.testing.toy_model import ToyLM


@attrs.define
class Batch:
    """Committed tokens of every request, padded to a fixed capacity."""

    seqs: torch.Tensor  # int64 [b, capacity]
    lengths: torch.Tensor  # int64 [b]

    @property
    def size(self) -> int:
        return int(self.seqs.shape[0])

    def last_tokens(self) -> torch.Tensor:
        return self.seqs[torch.arange(self.size), self.lengths - 1]


class TokenConstraint(Protocol):
    """Allowed tokens per verified node (a grammar: `specreg.testing.grammar`)."""

    def bitmask(self, paths: torch.Tensor, depths: torch.Tensor) -> torch.Tensor:
        """int32 [b, N, ceil(V / 32)]: the tokens allowed after each node's path."""
        ...

    def commit(self, tokens: torch.Tensor, counts: torch.Tensor) -> None:
        """Advance along the first `counts[r]` emitted tokens of each request."""
        ...


class LoopView(Protocol):
    """The loop as one step reads it."""

    plan: SpecPlan
    draft: ToyLM
    steps: int
    verify_width: int
    draft_decode_width: int
    params: SamplingParams | None
    params_verify: Callable[..., Any] | None
    sampling: bool
    with_draft: bool  # sampled requests run the with-draft rule (specreg.testing.draft_rules)
    keys: torch.Tensor | None  # each request's key on the random stream
    temperature: float
    generator: torch.Generator
    draft_lengths: Any

    def verify_logits(
        self, batch: Batch, paths: torch.Tensor, depths: torch.Tensor
    ) -> torch.Tensor: ...

    def mask_inputs(self, paths: torch.Tensor, depths: torch.Tensor) -> dict[str, Any]: ...


def lengths_keyword(loop: object) -> dict[str, Any]:
    """`{"draft_lengths": ...}` when the loop caps requests' drafts, else `{}` (so drafters and
    verifiers without the keyword still run the uncapped loop)."""
    lengths = getattr(loop, "draft_lengths", None)
    return {} if lengths is None else {"draft_lengths": lengths}


def proposed_counts(loop: object, width: int, batch: int) -> int | torch.Tensor:
    """The drafts each request had this step: the path width, or its draft length."""
    lengths = getattr(loop, "draft_lengths", None)
    if lengths is None:
        return width
    return torch.as_tensor(lengths, dtype=torch.int64).clamp(max=width).reshape(batch)
