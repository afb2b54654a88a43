"""The compiled CPU path of chain sampling (numba): the torch path's tokens, in one pass per row.

Optional: used on CPU when numba imports (`pip install 'specreg[cpu]'`), the torch path
otherwise (`available`); numba is imported on the first call that asks, not with the family.
It computes what `torch_impl.verify_chain_sampling_torch` computes, bit for bit, in three
compiled passes over the requests (`numba_kernels`):

1. per request, the acceptance walk (`coin * q(x) < p(x)` in float32), then its stopping row
   read once: the weights (p; max(p - q, 0) or p without the rejected draft after a
   rejection; p again when that residual has no mass), their block masses summed in the
   torch path's order (zero padding, halves added elementwise), the draw's key lanes and the
   stream's words of the block keys;
2. the winning block (first argmax of mass / E in float64, a NaN winning as in torch.argmax)
   and the words of its token ids;
3. the winning token within the block, its weights read again.

The exponentials E between the passes are torch's (`random_stream.exponentials_of`, on tensors
of the torch path's shapes [b, blocks] and [b, RACE_BLOCK]): the stream's one float64 log is
torch's on both paths, so no value depends on numba's libm. Everything else is integer
arithmetic and IEEE float32 adds, subtractions, products and float64 divisions in the torch
path's order (no fastmath), which have the same bits on every machine.

Read checks (`check_reads`, the CPU default): pass 1 also flags each request whose values fail
a quick test at least as strict as the torch path's (a drafted p(x) or q(x) of a verified
position outside [0, inf), a q(x) of 0 (the torch path then reads that q row whole), a value
of a row read outside [0, 2**103), weights without mass). Unflagged requests would pass the
torch path's checks, so their result stands; a flag sends the whole call to the torch path,
whose exact checks raise its errors (or pass, and give the same tokens).

Rows are read as their raw bits (float32 rows as uint32, bfloat16 rows as uint16 shifted into
the high half of a float32, a bit cast in registers), block by block: the first level of a
block's halving sum is taken as its weights are read, so a row is read once, from memory. Other dtypes, non-contiguous
tensors and an empty batch take the torch path.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import torch

from specreg.kernels.chain.torch_impl import (
    accept_limits,
    assemble,
    verify_chain_sampling_torch,
)
from specreg.kernels.chain.types import ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.numba_rows import ROW_RAW, ROW_SHIFTS, compiled
from specreg.kernels.random_stream import exponentials_of
from specreg.kernels.random_stream.types import RACE_BLOCK


def _kernels() -> ModuleType | None:
    """The compiled passes, imported on first use; None without numba."""
    return compiled("specreg.kernels.chain.numba_kernels")


def _compiled() -> ModuleType:
    kernels = _kernels()
    assert kernels is not None, "numba_impl.available() is False"
    return kernels


def available() -> bool:
    """Whether numba imports (the compiled path can run)."""
    return _kernels() is not None


def supports(inputs: ChainSamplingInputs) -> bool:
    """Whether the compiled path takes these (validated) inputs: CPU, float32 or bfloat16
    rows, contiguous, at least one request."""
    if inputs.candidates.shape[0] == 0:
        return False
    rows = [inputs.target_probs] + ([] if inputs.draft_probs is None else [inputs.draft_probs])
    return all(t.device.type == "cpu" and t.dtype in ROW_SHIFTS and t.is_contiguous() for t in rows)


def _raw(t: torch.Tensor) -> np.ndarray:
    """The raw bits of a float32 / bfloat16 tensor as an unsigned numpy array (no copy)."""
    torch_raw, numpy_raw = ROW_RAW[t.dtype]
    return t.detach().view(torch_raw).numpy().view(numpy_raw)


def first_pass(inputs: ChainSamplingInputs) -> dict[str, Any]:
    """Pass 1 of the compiled path (`numba_kernels.walk_and_masses`) on validated inputs: per
    request its accepted drafts `accept`, the `excluded` draft (-1 when none), `flags`
    (rejected, draws from the residual, fails the read checks' quick test), the block `masses` of the weights it draws from, the
    draw's key `lanes` and the stream's `words` of the block keys. The raw rows ride along
    (`p`, `q`, their shifts, `has_q`) for the later passes."""
    kernels = _compiled()
    candidates, target, draft = inputs.candidates, inputs.target_probs, inputs.draft_probs
    b, n, vocab = target.shape
    gamma = n - 1
    limits = accept_limits(inputs.verify_lens, b, n, candidates.device).contiguous().numpy()
    drafts = candidates[:, 1:].to(torch.int64).contiguous().numpy()
    coins = inputs.coins[:, :gamma].detach().to(torch.float32).contiguous().numpy()
    keys = inputs.keys.to(torch.int64).contiguous().numpy()
    positions = inputs.positions.to(torch.int64).contiguous().numpy()
    q_rows = draft if draft is not None and gamma > 0 else None
    has_q = q_rows is not None
    blocks = -(-vocab // RACE_BLOCK)
    state: dict[str, Any] = dict(
        p=_raw(target), shift_p=ROW_SHIFTS[target.dtype], has_q=has_q,
        accept=np.empty(b, np.int64), excluded=np.empty(b, np.int64),
        flags=np.empty((b, 3), np.uint8), masses=np.empty((b, blocks), np.float32),
        lanes=np.empty((b, 2), np.int64), words=np.empty((b, blocks), np.int64),
    )
    # p stands in (never read) when there is no q
    state["q"] = _raw(q_rows) if q_rows is not None else state["p"]
    state["shift_q"] = ROW_SHIFTS[q_rows.dtype] if q_rows is not None else state["shift_p"]
    kernels.walk_and_masses(
        state["p"], state["q"], state["shift_p"], state["shift_q"], has_q, inputs.check_reads,
        drafts, limits, coins, keys, positions, state["accept"], state["excluded"],
        state["flags"], state["masses"], state["lanes"], state["words"],
    )
    return state


def verify_chain_sampling_numba(inputs: ChainSamplingInputs) -> ChainVerifyResult:
    """`verify_chain_sampling_torch` (the classic rule, or target-only without q), compiled:
    the same tokens. The inputs are validated, numba is `available` and `supports(inputs)`."""
    kernels = _compiled()
    s = first_pass(inputs)
    if inputs.check_reads and s["flags"][:, 2].any():
        return verify_chain_sampling_torch(inputs)  # its exact checks raise, or pass
    b, _, vocab = inputs.target_probs.shape
    noise = exponentials_of(torch.from_numpy(s["words"])).numpy()
    block = np.empty(b, np.int64)
    token_words = np.empty((b, RACE_BLOCK), np.int64)
    kernels.race_blocks(s["masses"], noise, s["lanes"], vocab, block, token_words)
    token_noise = exponentials_of(torch.from_numpy(token_words)).numpy()
    bonus = np.empty(b, np.int64)
    kernels.race_tokens(s["p"], s["q"], s["shift_p"], s["shift_q"], s["has_q"], s["accept"],
                        s["excluded"], s["flags"], block, token_noise, bonus)
    return assemble(inputs.candidates, torch.from_numpy(s["accept"]), torch.from_numpy(bonus))
