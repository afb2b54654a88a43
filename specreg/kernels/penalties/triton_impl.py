"""Triton implementation of the penalties: one program per (request, position) reads its
entries' logits by token id (int64 offsets), penalises them and writes them entry-aligned; the
scatter back into the logits follows in torch.

Every entry of one token computes the same value from the logit before any update, so no entry
may read what another wrote: the kernel only reads the logits, and the scatter writes them once
(repeated tokens write the same value). The entries' features come from
`torch_impl.entry_features`.
"""

from __future__ import annotations

import torch

from specreg.kernels.penalties.torch_impl import request_chunks
from specreg.kernels.penalties.types import Penalties
from specreg.kernels.triton_shim import tl, triton

if triton is not None:

    @triton.jit
    def _penalise_entries_kernel(
        logits_ptr, stride_b, stride_n, stride_v, ids_ptr, count_ptr, prompt_ptr, bias_ptr,
        rep_ptr, freq_ptr, pres_ptr, out_ptr, n, entries, BLOCK: tl.constexpr,
    ):
        r = tl.program_id(0).to(tl.int64)
        j = tl.program_id(1).to(tl.int64)
        rep = tl.load(rep_ptr + r)
        freq = tl.load(freq_ptr + r)
        pres = tl.load(pres_ptr + r)
        row = logits_ptr + r * stride_b + j * stride_n
        base = (r * n + j) * entries
        for start in range(0, entries, BLOCK):
            offs = start + tl.arange(0, BLOCK).to(tl.int64)
            inside = offs < entries
            token = tl.load(ids_ptr + base + offs, mask=inside, other=0)
            count = tl.load(count_ptr + base + offs, mask=inside, other=0).to(tl.float32)
            seen = (tl.load(prompt_ptr + base + offs, mask=inside, other=0) != 0) | (count > 0)
            z = tl.load(row + token * stride_v, mask=inside, other=0.0).to(tl.float32)
            z = z + tl.load(bias_ptr + base + offs, mask=inside, other=0.0)
            z = tl.where(seen, tl.where(z > 0, z / rep, z * rep), z)
            z = z - freq * count - pres * (count > 0).to(tl.float32)
            tl.store(out_ptr + base + offs, z, mask=inside)


def apply_penalties_triton(logits: torch.Tensor, penalties: Penalties, context: torch.Tensor) -> None:
    """As `apply_penalties_torch`, the penalised entries computed by the kernel."""
    n = logits.shape[1]
    for rows, part, (ids, count, in_prompt, bias) in request_chunks(logits, penalties, context):
        r, _, entries = ids.shape
        if not entries:
            continue
        ids = ids.contiguous()
        out = torch.empty(ids.shape, dtype=torch.float32, device=logits.device)
        _penalise_entries_kernel[(r, n)](
            part, part.stride(0), part.stride(1), part.stride(2), ids, count.contiguous(),
            in_prompt.to(torch.int8).contiguous(), bias.contiguous(),
            penalties.repetition[rows].contiguous(), penalties.frequency[rows].contiguous(),
            penalties.presence[rows].contiguous(), out, n, entries, BLOCK=256,
        )
        part.scatter_(2, ids, out.to(part.dtype))
