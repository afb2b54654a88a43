"""The filtering family's value: `RowStats`, the three numbers that summarise a filtered row.

A row's statistics are computed once (`gathered_row_stats`; the Triton kernels hold the same
three numbers), and any token's filtered probability is then one formula of them: the torch
verifiers, drafters and logprobs pass them between the filtering family's functions.
"""

from __future__ import annotations

import attrs
import torch


@attrs.frozen(kw_only=True)
class RowStats:
    """Per-row summary of a filtered distribution (float32 [r] each): `shift` = max z (the z
    of the largest key),
    `threshold` = the smallest kept key (the scaled score z for logits, the probability for
    probability inputs; -inf when top-k and top-p keep everything), `norm` = the kept mass
    sum(exp(z - shift))."""

    shift: torch.Tensor
    threshold: torch.Tensor
    norm: torch.Tensor
