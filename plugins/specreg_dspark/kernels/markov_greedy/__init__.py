"""The greedy Markov step ``argmax_v(base[v] + W2[v, :] . W1[prev, :])``: validation, dispatch.

The vanilla Markov head's greedy walk takes one such step per draft slot. On CPU the pruned
torch implementation runs (the exact scores of the tokens that the bias bound
``||W2[v]|| ||W1[prev]||`` leaves in reach of the maximum, the chunked algorithm where it leaves
too many); on CUDA the Triton kernels make one pass over ``W2`` in vocab tiles and never
materialise the bias. Ties go to the lowest index, as with ``torch.argmax``.

- `reference.markov_greedy_step_reference`: the plain per-row rule (test oracle).
- `torch_impl.markov_greedy_step_pruned_torch` (the CPU path; `w2_row_norms` its W2 row norms,
  exported here for the heads that cache them),
  `torch_impl.markov_greedy_step_torch` (two-step: the bias ``[b, V]``, then argmax) and
  `torch_impl.markov_greedy_step_chunked_torch` (the dense fused algorithm in vocab chunks).
- `triton_impl.markov_greedy_step_triton`: the GPU path.
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
    should_check_values,
)
from specreg.kernels.triton_shim import vocab_tile
from specreg_dspark.kernels.markov_greedy.torch_impl import (
    markov_greedy_step_pruned_torch,
    w2_row_norms,
)

__all__ = ["DEFAULT_BLOCK_V", "markov_greedy_step", "w2_row_norms"]

#: The vocab tile of the Triton kernel (capped at the vocabulary rounded up to a power of two).
DEFAULT_BLOCK_V = 128


def markov_greedy_step(
    base_logits: torch.Tensor,
    prev_tokens: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    *,
    check_values: bool | None = None,
    block_v: int | None = None,
    backend: str | None = None,
    w2_norms: torch.Tensor | None = None,
) -> torch.Tensor:
    """Greedy Markov-corrected token per request: int64 [b].

    `base_logits` [b, V] float; `prev_tokens` [b] int (the previous token of each request);
    `w1` = markov_w1 weight [V, R]; `w2` = markov_w2 weight [V, R] (nn.Linear(R, V) layout);
    `w1` and `w2` share a float dtype. Accumulation is float32. `block_v`: the Triton vocab tile
    (a power of two >= 16; None = `DEFAULT_BLOCK_V`); `backend`: 'auto' | 'torch' | 'triton', or
    None (SPECREG_KERNEL_BACKEND). `w2_norms`: float32 [V], `torch_impl.w2_row_norms(w2)`, for
    the torch path (a walk computes them once per block; None: computed in the call).
    """
    check_shape("base_logits", base_logits, (None, None))
    b, vocab = base_logits.shape
    check_shape("base_logits", base_logits, (None, vocab or 1))  # SR900 for an empty vocab
    check_shape("prev_tokens", prev_tokens, (b,))
    check_shape("w1", w1, (vocab, None))
    check_shape("w2", w2, (vocab, w1.shape[1]))
    check_dtype("base_logits", base_logits, FLOAT_DTYPES)
    check_dtype("prev_tokens", prev_tokens, INDEX_DTYPES)
    check_dtype("w1", w1, FLOAT_DTYPES)
    check_dtype("w2", w2, (w1.dtype,))
    if w2_norms is not None:
        check_shape("w2_norms", w2_norms, (vocab,))
        check_dtype("w2_norms", w2_norms, (torch.float32,))
    check_same_device(base_logits=base_logits, prev_tokens=prev_tokens, w1=w1, w2=w2,
                      w2_norms=w2_norms)
    tile = vocab_tile(vocab, block_v, default=DEFAULT_BLOCK_V)
    if should_check_values(base_logits.device, check_values):
        check_index_range("prev_tokens", prev_tokens, 0, vocab)
    if select_backend(base_logits, requested=backend) == "triton":
        from specreg_dspark.kernels.markov_greedy.triton_impl import markov_greedy_step_triton

        if base_logits.stride(1) != 1:
            base_logits = base_logits.contiguous()
        return markov_greedy_step_triton(
            base_logits, prev_tokens.contiguous(), w1.contiguous(), w2.contiguous(), block_v=tile
        )
    return markov_greedy_step_pruned_torch(base_logits, prev_tokens, w1, w2, w2_norms=w2_norms)
