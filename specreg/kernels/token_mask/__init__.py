"""Grammar masks: the allowed-token bitmask structured-output engines produce, applied in place.

Layout (xgrammar's `allocate_token_bitmask`, llguidance's): int32 words [..., ceil(V / 32)];
token v is allowed when bit v % 32 of word v // 32 is set; bits past V are ignored.
`apply_token_bitmask_(scores, bitmask)` sets every disallowed token of `scores` [..., V] to -inf
(logits) or 0 (probabilities, `probabilities=True`) in place, as the engines' own
`apply_token_bitmask_inplace` does, so no [b, n, V] copy exists. The verifiers with per-request
parameters take `token_bitmask=` ([b, n, W] for chains, [b, N, W] for trees: the grammar's mask
after each prefix the position verifies) and mask the target and the draft scores with it: p and
q are then masked and renormalised at every verified position, a draft outside the mask has
p(x) = 0 and is rejected, and the correction and bonus come from the masked target.

A row that allows nothing is SR918 (checked on the CPU path; on an accelerator with
`check_values=True`); a bitmask of the wrong shape, dtype or device is SR917. Family:
`reference` (per row), `torch_impl` (row chunks), `triton_impl` (row x vocabulary tiles).
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import should_check_values
from specreg.kernels.token_mask.torch_impl import apply_bitmask_torch, empty_rows
from specreg.kernels.token_mask.triton_impl import apply_bitmask_triton

__all__ = ["apply_token_bitmask_", "bitmask_words"]


def bitmask_words(vocab: int) -> int:
    """Words per row of a bitmask over `vocab` tokens: ceil(V / 32)."""
    return (vocab + 31) // 32


def apply_token_bitmask_(
    scores: torch.Tensor,
    bitmask: torch.Tensor,
    *,
    probabilities: bool = False,
    check_values: bool | None = None,
    backend: str | None = None,
    block_v: int | None = None,
    field: str = "token_bitmask",
    verified: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mask `scores` [..., V] in place with `bitmask` [..., ceil(V / 32)] (module docstring);
    returns `scores`. The leading dimensions must be equal. `verified` (bool, the leading
    shape) exempts the rows a verifier never reads (past `verify_lens`) from SR918."""
    check_bitmask(scores, bitmask, field=field,
                  values=should_check_values(scores.device, check_values), verified=verified)
    fill = 0.0 if probabilities else float("-inf")
    vocab = scores.shape[-1]
    use_triton = select_backend(scores, requested=backend) == "triton"
    for rows, words in _planes(scores, bitmask.reshape(-1, bitmask.shape[-1]), vocab):
        if use_triton:
            apply_bitmask_triton(rows, words, fill=fill, block_v=block_v)
        else:
            apply_bitmask_torch(rows, words, fill=fill)
    return scores


def _planes(scores: torch.Tensor, words: torch.Tensor, vocab: int):
    """[R, V] views of `scores` [..., V] (strided as given) with their [R, W] words, in row
    order: a 1-D row is a plane of one row, leading dimensions past the first are walked."""
    if scores.dim() == 1:
        yield scores.unsqueeze(0), words
        return
    if scores.dim() == 2:
        yield scores, words
        return
    rows = words.shape[0] // scores.shape[0]
    for i in range(scores.shape[0]):
        yield from _planes(scores[i], words[i * rows:(i + 1) * rows], vocab)


def _position(row: int, lead: list[int]) -> list[int]:
    """The index in the leading dimensions `lead` of flat row `row` ([row] for 1-D scores)."""
    out = []
    for size in reversed(lead):
        row, at = divmod(row, size)
        out.append(at)
    return out[::-1] or [row]


def check_bitmask(
    scores: torch.Tensor, bitmask: torch.Tensor, *, field: str, values: bool,
    verified: torch.Tensor | None = None,
) -> None:
    """SR917 for a bitmask that does not fit `scores`; SR918 (with `values`) for empty rows."""
    found = []
    vocab = scores.shape[-1] if isinstance(scores, torch.Tensor) and scores.dim() else 0
    words = bitmask_words(vocab)
    want = [*scores.shape[:-1], words]
    if not isinstance(bitmask, torch.Tensor):
        raise KernelInputError(problem(
            "SR917", f"{field} must be an int32 tensor, got {type(bitmask).__name__}",
            accepted=f"int32 {want}", fix="pass the grammar engine's bitmask (int32 words)",
            field=field,
        ))
    if scores.dim() < 1 or not scores.is_floating_point():
        found.append(f"the scores it masks are {scores.dtype} {list(scores.shape)}, not float "
                     "[..., V]")
    if bitmask.dtype != torch.int32:
        found.append(f"{field} is {bitmask.dtype}, not int32")
    if list(bitmask.shape) != want:
        found.append(f"{field} has shape {list(bitmask.shape)}, the scores need {want} "
                     f"(ceil({vocab} / 32) = {words} words per row)")
    if bitmask.device != scores.device:
        found.append(f"{field} is on {bitmask.device}, the scores on {scores.device}")
    if found:
        raise KernelInputError([
            problem("SR917", text, accepted=f"int32 {want} on {scores.device}",
                    fix="allocate it as xgrammar.allocate_token_bitmask(rows, V) does, one row "
                    "per verified position", field=field)
            for text in found
        ])
    if values:
        empty = empty_rows(bitmask.reshape(-1, words), vocab)
        if verified is not None:
            empty &= verified.reshape(-1).to(device=empty.device, dtype=torch.bool)
        empty = empty.nonzero().flatten()
        if empty.numel():
            lead = list(scores.shape[:-1])
            where = [_position(int(r), lead) for r in empty[:8]]
            raise KernelInputError(problem(
                "SR918", f"{field} allows no token at {len(empty)} row(s), e.g. {where} "
                "(request, position)", accepted="at least one allowed token per verified row",
                fix="stop the request when its grammar is finished (the matcher is terminated), "
                "or verify fewer positions (verify_lens) past it", field=field,
            ))
