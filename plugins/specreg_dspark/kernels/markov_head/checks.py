"""Input validation of a Markov head's block walk (`sample_block`, `greedy_block`)."""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
    should_check_values,
)


def check_block(
    base_logits: torch.Tensor,
    anchor: torch.Tensor,
    hidden: torch.Tensor | None,
    *,
    weights: torch.Tensor,
    vocab_size: int,
    hidden_size: int | None,
    head_type: str,
) -> None:
    """`base_logits` [b, gamma, V] float, `anchor` [b] int in [0, V), `hidden` [b, gamma, H]
    float (required by every head type but "vanilla"), all on the device of the head's
    `weights` (SR900-SR903). Takes plain tensors and sizes, so any head can call it."""
    check_shape("base_logits", base_logits, (None, None, vocab_size))
    b, gamma, _ = base_logits.shape
    check_dtype("base_logits", base_logits, FLOAT_DTYPES)
    check_shape("anchor", anchor, (b,))
    check_dtype("anchor", anchor, INDEX_DTYPES)
    needs_hidden = head_type != "vanilla"
    if hidden is not None or needs_hidden:
        if hidden is None:
            raise KernelInputError(
                problem(
                    "SR900",
                    f"the {head_type} Markov head needs hidden states [b, gamma, H]",
                    accepted=f"hidden of shape [{b}, {gamma}, {hidden_size}]",
                    fix="pass the draft model's hidden states of the block",
                    field="hidden",
                )
            )
        check_shape("hidden", hidden, (b, gamma, hidden_size or None))
        check_dtype("hidden", hidden, FLOAT_DTYPES)
    device = check_same_device(
        markov_weights=weights, base_logits=base_logits, anchor=anchor, hidden=hidden
    )
    if should_check_values(device, None):
        check_index_range("anchor", anchor, 0, vocab_size)
