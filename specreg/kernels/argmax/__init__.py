"""Row argmax (first index of the row maximum, NaN counts as the maximum) at the speed of a read.

`row_argmax(rows)` returns what `torch.argmax(rows, dim=-1)` returns, for every float dtype and
every value (ties to the lowest index; a row holding NaN gives its first NaN; an all -inf row
gives 0). On CPU, `torch.argmax` is compute-bound (about 5x a read of the row on one thread);
`row_argmax_folded_torch` reads each row once at reduction speed and touches a small remainder.
On other devices torch's argmax already runs at memory speed, so `row_argmax` dispatches to torch
there; the GPU verify kernels fuse the one Triton device function of this family,
`triton_impl.row_argmax_tiles`, into their own programs.

- `reference.row_argmax_reference`: the plain per-row rule (test oracle).
- `torch_impl.row_argmax_folded_torch`: the CPU implementation (rows of at least
  2 * `FOLD_WIDTH` fold).
- `triton_impl.row_argmax_tiles` / `row_argmax_triton`: the Triton device function and its
  launcher over every row, exported here (imported on first use) for the kernels that fuse the
  one and the verifiers that launch the other.
"""

from __future__ import annotations

from typing import Any

import torch

from specreg.kernels.argmax.torch_impl import FOLD_WIDTH, row_argmax_folded_torch

#: The Triton path's names, imported from `triton_impl` on first use (it imports Triton, which
#: a test session loads only once its interpreter is switched on).
_TRITON_NAMES = ("row_argmax_tiles", "row_argmax_triton")

__all__ = ["FOLD_WIDTH", "row_argmax", *_TRITON_NAMES]


def __getattr__(name: str) -> Any:
    """The Triton path's names (`_TRITON_NAMES`; the device function exists only where Triton
    is installed)."""
    if name in _TRITON_NAMES:
        from specreg.kernels.argmax import triton_impl

        return getattr(triton_impl, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
