"""The Triton implementation of the planned copy: grid ``(bs, chunks)``, int64 row offsets.

`host_cache` may be pinned host memory, read through UVA (see docs/plugins/hisparse.md). Rows
move as int32 words (bytes when a row is not a multiple of 4). The rule is `reference.py`'s.
"""

from __future__ import annotations

import torch

from specreg.kernels.triton_shim import tl, triton
from specreg_hisparse.kernels.planned_copy.types import PlannedCopy


def as_words(buffer: torch.Tensor) -> torch.Tensor:
    """A 2-D KV buffer as `[rows, words]` of int32 (or uint8 when rows are not 4-byte multiples)."""
    raw = buffer.reshape(buffer.shape[0], -1).view(torch.uint8)
    return raw.view(torch.int32) if raw.shape[1] % 4 == 0 else raw


if triton is not None:

    @triton.jit
    def _planned_copy_kernel(
        src_ptr, dst_ptr, count_ptr, num_real_ptr, host_ptr, dev_ptr, plan_stride, row_words,
        BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr, NUM_CHUNKS: tl.constexpr,
    ):  # fmt: skip
        """Grid (bs, NUM_CHUNKS): chunk c copies misses c*BLOCK_M, (c+NUM_CHUNKS)*BLOCK_M, ..."""
        b = tl.program_id(0).to(tl.int64)
        chunk = tl.program_id(1)
        real = b < tl.load(num_real_ptr).to(tl.int64)
        count = tl.where(real, tl.load(count_ptr + b), 0)
        offs_e = tl.arange(0, BLOCK_E).to(tl.int64)
        emask = offs_e < row_words
        for start in range(chunk * BLOCK_M, count, NUM_CHUNKS * BLOCK_M):
            idx = start + tl.arange(0, BLOCK_M)
            mk = idx < count
            src = tl.load(src_ptr + b * plan_stride + idx, mask=mk, other=0).to(tl.int64)
            dst = tl.load(dst_ptr + b * plan_stride + idx, mask=mk, other=0).to(tl.int64)
            both = mk[:, None] & emask[None, :]
            vals = tl.load(host_ptr + src[:, None] * row_words + offs_e[None, :], mask=both)
            tl.store(dev_ptr + dst[:, None] * row_words + offs_e[None, :], vals, mask=both)


def copy_planned_triton(
    copy: PlannedCopy, *, num_chunks: int | None = None, block_m: int = 16
) -> None:
    """The planned copy on Triton. `host_cache` may be pinned host memory (read through UVA).

    Grid `(bs, num_chunks)`; the default spreads a batch over ~256 programs so small batches
    still keep many loads from the host in flight.
    """
    bs = copy.miss_count.shape[0]
    if bs == 0:
        return
    if num_chunks is None:
        num_chunks = max(1, 256 // bs)
    host = as_words(copy.host_cache)
    dev = as_words(copy.device_buffer)
    words = host.shape[1]
    _planned_copy_kernel[(bs, num_chunks)](
        copy.miss_src, copy.miss_dst, copy.miss_count, copy.num_real, host, dev,
        copy.miss_src.stride(0), words,
        BLOCK_M=block_m, BLOCK_E=triton.next_power_of_2(words), NUM_CHUNKS=num_chunks,
    )  # fmt: skip
