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

`check_draft_lengths` validates a batch's lengths against the most a call verifies (the chain's
n - 1 drafts, the tree's depth) before any launch: every request above it (or negative) is its
own SR921 problem, all reported at once; the wrong type, shape, dtype or device is SR922. Host
values (a list) are always checked; a tensor's values are read on CPU, and on an accelerator
only with `check_values=True` (reading them synchronises), else they are clamped into range.
Imports torch only inside its functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from specreg.errors import KernelInputError, Problem, problem
from specreg.integers import is_int

if TYPE_CHECKING:
    import torch

#: The keyword every drafter and verifier takes.
FIELD = "draft_lengths"

#: How a user raises the plan's maximum, in each framework's terms.
RAISE_MAXIMUM = (
    "or raise the plan's maximum (SGLang and the specreg CLI: --speculative-num-steps / "
    "--speculative-num-draft-tokens; vLLM: --speculative-config num_speculative_tokens)"
)


def _bad_input(message: str, accepted: str, fix: str) -> KernelInputError:
    return KernelInputError(
        problem("SR922", message, accepted=accepted, fix=fix, field=FIELD)
    )


def length_problems(values: Sequence[int], maximum: int, *, what: str) -> list[Problem]:
    """One SR921 problem per request whose length lies outside [0, maximum]."""
    out = []
    for r, length in enumerate(values):
        if 0 <= length <= maximum:
            continue
        if length < 0:
            message = f"request {r} asks for {length} drafts; a draft length is at least 0"
            fix = f"pass 0 to opt request {r} out of speculation"
        else:
            message = (
                f"request {r} asks for {length} drafts, above the maximum of {maximum} that "
                f"{what} verifies"
            )
            fix = f"cap request {r}'s draft length at {maximum} (min(length, {maximum})), " + (
                RAISE_MAXIMUM
            )
        out.append(
            problem(
                "SR921", message,
                accepted=f"an int in [0, {maximum}] per request (0 = no speculation)",
                fix=fix, field=f"{FIELD}[{r}]",
            )
        )
    return out


def check_draft_lengths(
    draft_lengths: Any,
    batch: int,
    maximum: int,
    *,
    device: torch.device | str,
    check_values: bool | None = None,
    what: str = "this call",
) -> torch.Tensor:
    """`draft_lengths` as int64 [batch] on `device`, within [0, maximum] (see the module doc).

    `what` names the verify in the message (e.g. "the chain of 5 tokens"). SR922 for a value
    that is not a sequence of ints or an integer tensor [batch] on `device`; SR921 per request
    outside [0, maximum], every one at once."""
    import torch

    from specreg.kernels.checks import INDEX_DTYPES, should_check_values

    device = torch.device(device)
    accepted = f"a sequence of {batch} ints, or an int32/int64 tensor [{batch}] on {device}"
    if isinstance(draft_lengths, torch.Tensor):
        if tuple(draft_lengths.shape) != (batch,):
            raise _bad_input(
                f"draft_lengths has shape {list(draft_lengths.shape)}, not [{batch}] (one length "
                "per request)", accepted, "pass one draft length per request of the batch",
            )
        if draft_lengths.dtype not in INDEX_DTYPES:
            raise _bad_input(
                f"draft_lengths has dtype {str(draft_lengths.dtype).replace('torch.', '')}",
                accepted, "cast it with .to(torch.int64)",
            )
        if draft_lengths.device != device:
            raise _bad_input(
                f"draft_lengths is on {draft_lengths.device}, the verified tensors on {device}",
                accepted, f"move draft_lengths to {device}",
            )
        lengths = draft_lengths.to(torch.int64)
        if should_check_values(device, check_values):
            found = length_problems(lengths.tolist(), maximum, what=what)
            if found:
                raise KernelInputError(found)
        return lengths.clamp(0, maximum)  # unchecked accelerator values: never out of range
    if isinstance(draft_lengths, (str, bytes)) or not isinstance(draft_lengths, Sequence):
        raise _bad_input(
            f"draft_lengths is a {type(draft_lengths).__name__}", accepted,
            "pass a list of ints or an integer tensor",
        )
    values = list(draft_lengths)
    wrong = [r for r, v in enumerate(values) if not is_int(v)]
    if wrong or len(values) != batch:
        message = (
            f"draft_lengths has {len(values)} entries for a batch of {batch}"
            if not wrong
            else f"draft_lengths holds non-integers at requests {wrong}"
        )
        raise _bad_input(message, accepted, "pass one int per request of the batch")
    found = length_problems(values, maximum, what=what)
    if found:
        raise KernelInputError(found)
    return torch.tensor(values, dtype=torch.int64, device=device)


def verify_lens_of(
    draft_lengths: Any, verify_lens: Any, batch: int, width: int, *, device: torch.device,
    check_values: bool | None,
) -> Any:
    """The chain kernels' `verify_lens` for `draft_lengths` on a chain of `width` tokens
    (lengths + 1), or `verify_lens` unchanged without draft lengths. Both given: SR922."""
    if draft_lengths is None:
        return verify_lens
    if verify_lens is not None:
        raise _bad_input(
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
