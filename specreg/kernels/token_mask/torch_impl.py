"""Torch implementation of the grammar bitmask: a byte lookup table, row chunk by row chunk.

Each int32 word is read as its four bytes (little-endian, as on x86 and CUDA: byte k holds
tokens 8k..8k+7 of the word); a 256 x 8 table turns every byte into eight additive values, 0 for
an allowed token and -inf for a disallowed one (or multiplicative 1 / 0 for probabilities), and
one in-place add (multiply) applies them. The unpacked chunk exists for one row chunk at a time
(`FILTER_CHUNK_ELEMENTS` elements), so masking [R, V] scores costs no [R, V] temporary.
"""

from __future__ import annotations

import torch

from specreg.kernels.row_chunks import FILTER_CHUNK_ELEMENTS, cpu_row_chunks


def byte_table(fill: float, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """[256, 8]: for each byte value, per bit, the value that applies the mask (see module)."""
    bits = (torch.arange(256, device=device)[:, None] >> torch.arange(8, device=device)) & 1
    if fill == 0.0:
        return bits.to(dtype)  # multiply: allowed x 1, disallowed x 0
    zero = torch.zeros((), dtype=dtype, device=device)
    return torch.where(bits.bool(), zero, torch.tensor(fill, dtype=dtype, device=device))


def apply_bitmask_torch(scores: torch.Tensor, words: torch.Tensor, *, fill: float) -> None:
    """Set, in place, every token of `scores` [R, V] that `words` [R, W] disallows to `fill`
    (-inf for logits, 0 for probabilities)."""
    rows, vocab = scores.shape
    table = byte_table(fill, scores.device, scores.dtype)
    for start, stop in cpu_row_chunks(rows, vocab, FILTER_CHUNK_ELEMENTS):
        part = slice(start, stop)
        chunk = words[part].contiguous().view(torch.uint8).to(torch.int64)
        values = torch.nn.functional.embedding(chunk, table).reshape(chunk.shape[0], -1)
        if fill == 0.0:
            scores[part].mul_(values[:, :vocab])
        else:
            scores[part].add_(values[:, :vocab])


def empty_rows(words: torch.Tensor, vocab: int) -> torch.Tensor:
    """bool [R]: rows that allow no token of the vocabulary (bits past V do not count)."""
    full, rest = divmod(vocab, 32)
    any_full = (words[:, :full] != 0).any(-1) if full else torch.zeros(
        words.shape[0], dtype=torch.bool, device=words.device)
    if rest:
        tail = words[:, full] & ((1 << rest) - 1)  # rest <= 31: the low bits, an int32
        any_full = any_full | (tail != 0)
    return ~any_full
