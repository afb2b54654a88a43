"""The sampling-parameter chain path's input bundle, shared by its torch, Triton and reference
paths."""

from __future__ import annotations

import attrs
import torch

from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, FilterOrder
from specreg.contract.sampling_params import SamplingParams


@attrs.frozen(kw_only=True)
class ChainParamsInputs:
    """Validated inputs of `verify_chain_with_params` (coins drawn).

    candidates [b, n]; target [b, n, V] and draft [b, n-1, V] (or None: the target-only rule for
    sampled requests) as logits, or probabilities with `probabilities=True`; params one value
    per request; coins [b, >= n-1] (the acceptance uniforms); keys and positions int64 [b] (each
    request's key and the absolute output position of row 0, which key the emitted draw);
    verify_lens [b] or None;
    `filter_order` how top-k, top-p and min-p combine (`specreg.contract.filter_order`);
    `invariant`: the drafter-invariant rule (`specreg.kernels.chain`) for sampled requests;
    `check_reads`: the rule checks the scores of the rows it reads as it reads them (the CPU
    default of the torch path for logits; every other input was checked before).
    """

    candidates: torch.Tensor
    target: torch.Tensor
    draft: torch.Tensor | None
    params: SamplingParams
    coins: torch.Tensor
    keys: torch.Tensor
    positions: torch.Tensor
    verify_lens: torch.Tensor | None = None
    probabilities: bool = False
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER
    invariant: bool = False
    check_reads: bool = False
