"""Input validation of a Markov head's block walk (`sample_block`, `greedy_block`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from specreg_dspark.kernels.markov_head.torch_impl import MarkovHead


def check_block(
    head: MarkovHead,
    base_logits: torch.Tensor,
    anchor: torch.Tensor,
    hidden: torch.Tensor | None,
) -> None:
    """`base_logits` [b, gamma, V] float, `anchor` [b] int in [0, V), `hidden` [b, gamma, H]
    float (required by the gated and rnn heads), all on the head's device (SR900-SR903)."""
    check_shape("base_logits", base_logits, (None, None, head.vocab_size))
    b, gamma, _ = base_logits.shape
    check_dtype("base_logits", base_logits, FLOAT_DTYPES)
    check_shape("anchor", anchor, (b,))
    check_dtype("anchor", anchor, INDEX_DTYPES)
    needs_hidden = head.head_type != "vanilla"
    if hidden is not None or needs_hidden:
        if hidden is None:
            raise KernelInputError(
                problem(
                    "SR900",
                    f"the {head.head_type} Markov head needs hidden states [b, gamma, H]",
                    accepted=f"hidden of shape [{b}, {gamma}, {head.hidden_size}]",
                    fix="pass the draft model's hidden states of the block",
                    field="hidden",
                )
            )
        check_shape("hidden", hidden, (b, gamma, head.hidden_size or None))
        check_dtype("hidden", hidden, FLOAT_DTYPES)
    weights = next(head.parameters())
    device = check_same_device(
        markov_weights=weights, base_logits=base_logits, anchor=anchor, hidden=hidden
    )
    if should_check_values(device, None):
        check_index_range("anchor", anchor, 0, head.vocab_size)
