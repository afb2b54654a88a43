"""Row argmax (first index of the row maximum, NaN counts as the maximum) at the speed of a read.

`row_argmax(rows)` returns what `torch.argmax(rows, dim=-1)` returns, for every float dtype and
every value (ties to the lowest index; a row holding NaN gives its first NaN; an all -inf row
gives 0). On CPU, `torch.argmax` is compute-bound (about 5x a read of the row on one thread);
`row_argmax_folded_torch` reads each row once at reduction speed and touches a small remainder.
On other devices torch's argmax already runs at memory speed, so `row_argmax` dispatches to torch
there; the GPU verify kernels fuse the one Triton device function of this family,
`triton_impl.row_argmax_tiles`, into their own programs.

- `reference.row_argmax_reference`: the plain per-row rule (test oracle).
- `torch_impl.row_argmax_folded_torch`: the CPU implementation.
- `triton_impl.row_argmax_tiles` / `row_argmax_triton`: the Triton device function and its
  launcher over every row.
"""

from __future__ import annotations

import torch

from specreg.kernels.argmax.torch_impl import FOLD_WIDTH, row_argmax_folded_torch

__all__ = ["row_argmax"]


def row_argmax(rows: torch.Tensor) -> torch.Tensor:
    """int64 index of each row's maximum over the last dim of `rows` [..., V] (torch.argmax rule).

    CPU float tensors wide enough to fold (V >= 2 * FOLD_WIDTH) take the folded path; everything
    else is `torch.argmax`. Same result either way."""
    if (
        rows.device.type == "cpu"
        and rows.dim() >= 1
        and rows.is_floating_point()
        and rows.shape[-1] >= 2 * FOLD_WIDTH
        and rows.numel() > 0
    ):
        flat = rows.reshape(-1, rows.shape[-1])  # a view for the usual layouts
        return row_argmax_folded_torch(flat).view(rows.shape[:-1])
    return torch.argmax(rows, dim=-1)
