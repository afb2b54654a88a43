"""Per-request draft lengths: the one way to say how many drafts each request gets in a step.

A serving loop passes `draft_lengths=` (a sequence of ints, or an int32/int64 tensor [b]) to a
plan's drafter and verifier: request r gets at most `draft_lengths[r]` drafts this step, and 0
opts it out of speculation (it emits one token, exactly what plain decoding samples from the
target's row after its last committed token). Widths, buffers and the batch layout stay the
plan's maxima (`widths`, `gamma`); a shorter request only verifies less of its row: for a chain
the first `draft_lengths[r]` drafts (the chain kernels' `verify_lens = draft_lengths + 1`), for
a tree the nodes at depth <= `draft_lengths[r]`. This is vLLM's per-request `num_draft_tokens`
(scheduler output) and SGLang's per-request speculation switch, stated once for every drafting
style.

`specreg.kernels.checks.check_draft_lengths` validates a batch's lengths against the most a
call verifies (the chain's n - 1 drafts, the tree's depth) before any launch (the tree kernels
call it themselves): every request above it (or negative) is its own SR921 problem, all
reported at once; the wrong type, shape, dtype or device is SR922. Host values (a list) are
always checked; a tensor's values are read on CPU, and on an accelerator only with
`check_values=True` (reading them synchronises), else they are clamped into range. This module
converts the lengths for chains (`verify_lens_of`, `cut_chain`) and imports torch only inside
its functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def verify_lens_of(
    draft_lengths: Any, verify_lens: Any, batch: int, width: int, *, device: torch.device,
    check_values: bool | None,
) -> Any:
    """The chain kernels' `verify_lens` for `draft_lengths` on a chain of `width` tokens
    (lengths + 1), or `verify_lens` unchanged without draft lengths. Both given: SR922."""
    from specreg.kernels.checks import bad_draft_lengths, check_draft_lengths

    if draft_lengths is None:
        return verify_lens
    if verify_lens is not None:
        raise bad_draft_lengths(
            "draft_lengths and verify_lens were both given",
            "one of them: draft_lengths[r] = verify_lens[r] - 1",
            "pass draft_lengths alone (verify_lens is the kernels' form of the same cap)",
        )
    lengths = check_draft_lengths(
        draft_lengths, batch, width - 1, device=device, check_values=check_values,
        what=f"a chain of {width} tokens (the root and {width - 1} drafts)",
    )
    return lengths + 1


def cut_chain(
    drafts: torch.Tensor, draft_lengths: torch.Tensor, filler: torch.Tensor
) -> torch.Tensor:
    """`drafts` [b, k] with every position at or past `draft_lengths[r]` replaced by
    `filler[r]` (a real token id, so a fixed-width target forward may run it; the verifier
    never reads it): what a chain drafter returns for per-request lengths."""
    import torch

    k = drafts.shape[1]
    past = torch.arange(k, device=drafts.device)[None, :] >= draft_lengths[:, None]
    return torch.where(past, filler.to(drafts.dtype)[:, None].expand_as(drafts), drafts)
