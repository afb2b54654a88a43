"""CPU row loops in cache-sized chunks: the chunk sizes, the row ranges, the row gather into a buffer.

Every family that walks [R, V] rows on the CPU (filtering, logprobs, token masks, the chain and
tree verifiers' draws) cuts them into chunks of about `CPU_CHUNK_ELEMENTS` elements
(`cpu_row_chunks`), so its temporaries stay in cache and are reused instead of freshly mapped,
and gathers a chunk's rows into a reused float32 buffer (`take_rows_float32`).
"""

from __future__ import annotations

import torch

#: Elements per chunk of the CPU row loops (about 1 MiB of float32): temporaries stay in cache
#: and are reused instead of freshly mapped (page faults dominate full-batch temporaries).
CPU_CHUNK_ELEMENTS = 1 << 18
#: Elements per row chunk of the filtering passes and the loops over filtered rows: half the
#: shared CPU chunk, because a chunk holds several float32 temporaries at once (scaled scores,
#: weights, a sorted prefix).
FILTER_CHUNK_ELEMENTS = CPU_CHUNK_ELEMENTS // 2


def cpu_row_chunks(
    num_rows: int, vocab: int, elements: int = CPU_CHUNK_ELEMENTS
) -> list[tuple[int, int]]:
    """[start, stop) row ranges of at most `elements` elements (at least one row)."""
    step = max(1, elements // max(vocab, 1))
    return [(start, min(start + step, num_rows)) for start in range(0, num_rows, step)]


def take_rows_float32(
    flat: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """`flat[index]` as float32 [len(index), V]; written into `out` (float32, at least that many
    rows) when given and `flat` is float32, else a fresh tensor. The rows are values to draw
    from, never differentiated: a `flat` that requires grad (a model's output outside
    `torch.no_grad()`) is read detached, since `out=` refuses autograd inputs."""
    flat = flat.detach()
    if out is not None and flat.dtype == torch.float32:
        return torch.index_select(flat, 0, index, out=out[: index.shape[0]])
    return flat.index_select(0, index).to(torch.float32)
