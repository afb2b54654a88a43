"""The values of the swap family: `SwapCall`, the one input bundle every implementation takes.

Also the constants the implementations share: packed sort keys put a hot slot index in the low
`SLOT_BITS` bits, and CUDA-graph padding rows get `PADDED_LOCATION`. Imports no torch at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import torch

    from specreg_hisparse.sizes import HiSparseLayout

SLOT_BITS = 20
SLOT_MASK = (1 << SLOT_BITS) - 1
BIG_KEY = 1 << 62  # sorts after every packed key
PADDED_LOCATION = 0  # what CUDA-graph padding rows get: a valid row, so reads stay in bounds


@attrs.define(kw_only=True, eq=False)
class SwapCall:
    """One swap call of one anchor layer: its inputs, the state it commits to, its outputs.

    - `tokens` int32/int64 ``[bs, steps, top_k]`` (contiguous), `req` ``[bs]`` request slots,
      `seq_lens` ``[bs, steps]``: the length each step attends to.
    - `num_real` int32 ``[1]`` on the tokens' device: rows ``>= num_real`` are padding;
      `num_real_int` the same count as a Python int when the caller knows it (no sync).
    - `state`: the swapper's state tensors (`slot_tokens`, `slot_stamp`, `clock`, `tail_tokens`,
      `slot_rows`, `host_cache_locs`, `error_count`); the call commits to layer `layer`.
    - Outputs, written in place: `out` int32 ``[bs, steps, top_k]`` device rows, the plan
      (`miss_src` int64 / `miss_dst` int32 ``[bs, >= steps * top_k]``, one row stride;
      `miss_count` int32 ``[bs]``) and `hits` int32 ``[bs]``.
    """

    tokens: torch.Tensor
    req: torch.Tensor
    seq_lens: torch.Tensor
    num_real: torch.Tensor
    layer: int
    state: Any
    layout: HiSparseLayout
    out: torch.Tensor
    miss_src: torch.Tensor
    miss_dst: torch.Tensor
    miss_count: torch.Tensor
    hits: torch.Tensor
    num_real_int: int | None = None

    def real_rows(self) -> int:
        """The number of real rows as an int (reads the device tensor when not known)."""
        if self.num_real_int is not None:
            return self.num_real_int
        return int(self.num_real.item())
