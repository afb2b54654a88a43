"""The compiled CPU draw of the params chain (numba): the torch path's emitted tokens, bit for bit.

Optional: used on CPU when numba imports (`pip install 'specreg[cpu]'`), the torch path
otherwise (`available`); numba is imported on the first call that asks. The filter statistics
(shift, threshold, kept mass: `filtering.gathered_row_stats`), the acceptance walk and the
greedy rows stay the torch path's; the part profiled to dominate, the emitted token's draw from
the filtered rows (`torch_impl._emit`: some 25 full-row torch passes per row chunk), runs as
three compiled passes per chunk of the torch path's rows (`numba_kernels`):

1. `centred_scores`: z - shift of each row read (z = s / T), -inf where z is below the threshold;
2. torch's `exp_` on those rows (the one exp of the torch path, `specreg.kernels.exp_log`): the
   weights have its bits by construction, and a dropped token's weight is its 0;
3. `draw_weights`: the min-p fill and the division by the kept mass, the residual
   max(p - q, 0) (or p without the rejected draft, target-only) when it has mass, and the block
   masses in the torch path's halving order; then the torch path's own race on those masses
   and weights (`block_race.race_blocks_torch`, `race_tokens_torch`: [k, blocks] and
   [k, RACE_BLOCK] values, cheap beside the rows).

Every compiled operation is an IEEE float32 division, subtraction, addition or comparison in
the torch path's order (no fastmath), so the tokens equal the torch
path's on every machine. Logits only (probability rows take the torch path: their keys need a
log), float32 or bfloat16, contiguous.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import torch

from specreg.kernels.block_race import block_columns, race_blocks_torch, race_tokens_torch
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.kernels.exp_log import exp_
from specreg.kernels.filtering import RowStats
from specreg.kernels.numba_rows import ROW_RAW, ROW_SHIFTS, compiled
from specreg.kernels.random_stream.types import RACE_BLOCK


def _kernels() -> ModuleType | None:
    """The compiled passes, imported on first use; None without numba."""
    return compiled("specreg.kernels.chain_params.numba_kernels")


def available() -> bool:
    """Whether numba imports (the compiled draw can run)."""
    return _kernels() is not None


def supports(inputs: ChainParamsInputs) -> bool:
    """Whether the compiled draw takes these (validated) inputs: CPU logits, float32 or bfloat16
    rows, contiguous."""
    rows = [inputs.target] + ([] if inputs.draft is None else [inputs.draft])
    return not inputs.probabilities and all(
        t.device.type == "cpu" and t.dtype in ROW_SHIFTS and t.is_contiguous() for t in rows
    )


def _raw(flat: torch.Tensor) -> np.ndarray:
    torch_raw, numpy_raw = ROW_RAW[flat.dtype]
    return flat.detach().view(torch_raw).numpy().view(numpy_raw)


def _centred(kernels: ModuleType, flat: torch.Tensor, rows: torch.Tensor, temperature:
             torch.Tensor, stats: RowStats, out: torch.Tensor) -> None:
    kernels.centred_scores(
        _raw(flat), ROW_SHIFTS[flat.dtype], rows.contiguous().numpy(),
        temperature.to(torch.float32).contiguous().numpy(),
        stats.shift.contiguous().numpy(), stats.threshold.contiguous().numpy(), out.numpy(),
    )


def emit_chunk(
    p_flat: torch.Tensor, p_index: torch.Tensor, q_flat: torch.Tensor | None,
    q_index: torch.Tensor | None, temperature: torch.Tensor, min_p: torch.Tensor,
    p_stats: RowStats, q_stats: RowStats | None, hit: torch.Tensor, excluded: torch.Tensor,
    lanes: torch.Tensor,
) -> torch.Tensor:
    """One row chunk of `torch_impl._emit`, compiled: the emitted tokens int64 [k] of flat
    target rows `p_index` (and draft rows `q_index` with `q_stats`, or target-only), `hit` the
    rows drawing from the residual when it has mass, `excluded` the draft left out target-only
    (-1: none), `lanes` [k, 2] the draws' key lanes."""
    kernels = _kernels()
    assert kernels is not None, "numba_impl.available() is False"
    k, vocab = p_index.shape[0], p_flat.shape[-1]
    has_q = q_flat is not None and q_stats is not None
    weights = torch.empty((2 if has_q else 1) * k, vocab, dtype=torch.float32,
                          device=p_flat.device)
    _centred(kernels, p_flat, p_index, temperature, p_stats, weights[:k])
    if has_q:
        _centred(kernels, q_flat, q_index, temperature, q_stats, weights[k:])
    exp_(weights)
    p = weights[:k].numpy()
    q = weights[k:].numpy() if has_q else p
    masses = np.empty((k, -(-vocab // RACE_BLOCK)), np.float32)
    kernels.draw_weights(
        p, q, has_q, min_p.to(torch.float32).contiguous().numpy(),
        p_stats.norm.contiguous().numpy(),
        (q_stats if has_q else p_stats).norm.contiguous().numpy(),
        hit.contiguous().numpy(), excluded.to(torch.int64).contiguous().numpy(), masses,
    )
    # the torch path's race on these weights and masses (`block_race.block_race_torch`)
    drawn = weights[:k]
    blocks = race_blocks_torch(torch.from_numpy(masses), lanes)
    columns, inside = block_columns(blocks, vocab)
    return race_tokens_torch(torch.where(inside, drawn.gather(1, columns), 0.0), columns, lanes)
