"""Triton implementation of emitted-token log-probabilities: one program per emitted slot.

Each program computes its row's filter statistics with the filtering family's `row_stats` (tiles
of BLOCK_V, int64 offsets), then reads its own token's score and writes log pi(token). The top-n
alternatives reuse those statistics in the torch implementation's `torch.topk` pass.
"""

from __future__ import annotations

import torch

from specreg.kernels.filtering.torch_impl import RowStats
from specreg.kernels.filtering.triton_impl import row_stats
from specreg.kernels.filtering.types import filter_rule
from specreg.kernels.logprobs.torch_impl import top_alternatives
from specreg.kernels.logprobs.types import LogprobInputs
from specreg.kernels.triton_shim import tl, triton, vocab_tile

if triton is not None:

    @triton.jit
    def _token_logprob_kernel(
        flat_ptr, stride_r, stride_v, rows_ptr, tokens_ptr, temp_ptr, k_ptr, p_ptr, m_ptr,
        out_ptr, shift_ptr, threshold_ptr, norm_ptr, vocab,
        PROBS: tl.constexpr, BLOCK_V: tl.constexpr, ORDER: tl.constexpr,
    ):
        m = tl.program_id(0).to(tl.int64)
        row_ptr = flat_ptr + tl.load(rows_ptr + m).to(tl.int64) * stride_r
        temperature = tl.load(temp_ptr + m)
        min_p = tl.load(m_ptr + m)
        shift, threshold, norm = row_stats(
            row_ptr, stride_v, vocab, temperature, tl.load(k_ptr + m), tl.load(p_ptr + m),
            min_p, PROBS, BLOCK_V, ORDER,
        )
        s = tl.load(row_ptr + tl.load(tokens_ptr + m).to(tl.int64) * stride_v).to(tl.float32)
        if PROBS:
            s = tl.log(s)
        z = s / temperature
        keep = (z >= threshold) & (tl.exp(z - shift) >= min_p)
        tl.store(out_ptr + m, tl.where(keep, z - shift - tl.log(norm), float("-inf")))
        tl.store(shift_ptr + m, shift)
        tl.store(threshold_ptr + m, threshold)
        tl.store(norm_ptr + m, norm)


def logprobs_triton(
    inputs: LogprobInputs, *, block_v: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """As `logprobs_torch`, the per-slot statistics and token log pi from the kernel."""
    count = inputs.rows.shape[0]
    device = inputs.flat.device
    token, shift, threshold, norm = (
        torch.empty(count, dtype=torch.float32, device=device) for _ in range(4)
    )
    if count:
        _token_logprob_kernel[(count,)](
            inputs.flat, inputs.flat.stride(0), inputs.flat.stride(1), inputs.rows, inputs.tokens,
            inputs.temperature, inputs.top_k, inputs.top_p, inputs.min_p,
            token, shift, threshold, norm, inputs.flat.shape[1],
            PROBS=inputs.probabilities, BLOCK_V=vocab_tile(inputs.flat.shape[1], block_v),
            ORDER=filter_rule(inputs.filter_order).code,
        )
    top_tokens, top_logprobs = top_alternatives(
        inputs, RowStats(shift=shift, threshold=threshold, norm=norm)
    )
    return token, top_tokens, top_logprobs
