"""The chain family's values: the verification result and the sampling inputs its paths share.

`ChainSamplingInputs` bundles what the sampling twins (`torch_impl`, `triton_impl`,
`reference`) take, so the signature is written once; the public wrapper builds it after
validation and after drawing any missing coins.
"""

from __future__ import annotations

from typing import Literal

import attrs
import torch

#: A kernel wrapper's `backend=` argument: None reads SPECREG_KERNEL_BACKEND.
BackendChoice = Literal["auto", "torch", "triton"] | None


@attrs.frozen(kw_only=True)
class ChainVerifyResult:
    """Outcome of verifying one chain per request.

    accept_len: int32 [b], accepted drafts (0..n-1), not counting the bonus.
    bonus: int64 [b], the token emitted after the accepted drafts (correction or bonus).
    output_tokens: int64 [b, n], the accepted drafts, then the bonus, then -1.
    param_error: bool [b] when verified with sampling parameters: requests whose parameters were
    invalid (reachable only with value checks off, e.g. on GPU); they accept nothing and emit -1.
    """

    accept_len: torch.Tensor
    bonus: torch.Tensor
    output_tokens: torch.Tensor
    param_error: torch.Tensor | None = None

    @property
    def num_emitted(self) -> torch.Tensor:
        """Tokens emitted per request: accept_len + 1."""
        return self.accept_len + 1


@attrs.frozen(kw_only=True)
class ChainSamplingInputs:
    """Validated inputs of chain rejection sampling (layout: `specreg.kernels.chain`).

    candidates [b, n]; target_probs [b, n, V]; draft_probs [b, n-1, V] or None (the
    target-only rule); coins [b, >= n-1] (the acceptance uniform of each draft); keys int64 [b]
    (each request's key) and positions int64 [b] (the absolute output position of row 0), which
    key the correction / bonus draw on the random stream; verify_lens [b] or None (every
    request verifies all n positions); check_reads: the rule checks the probabilities it reads
    as it reads them (the CPU default of the torch paths that implement it; the other inputs
    were checked in full before).
    """

    candidates: torch.Tensor
    target_probs: torch.Tensor
    draft_probs: torch.Tensor | None
    coins: torch.Tensor
    keys: torch.Tensor
    positions: torch.Tensor
    verify_lens: torch.Tensor | None = None
    check_reads: bool = False
