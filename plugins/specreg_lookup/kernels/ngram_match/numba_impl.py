"""The compiled CPU path of ngram_match's chain proposals (numba, the optional `cpu` extra).

The same rule as `torch_impl.chain_proposals` (vLLM 0.33's: the longest n-gram ending the
history, the earliest of its occurrences), row by row in one compiled loop: each continuation
start whose previous token is the request's last one is extended backwards at most max_ngram
tokens, so each token is read about once, where the torch path pays some 240 small ops a call
(b 64, W 4096 behind vLLM's custom_class seam: 1.24 ms torch, vLLM's own numba proposer
0.35 ms; benchmarks/bench_peers.py).

`kernel()` returns the compiled function, or None when numba does not import (or fails to
set up): the family then runs the torch path. Compiled lazily for the dtypes it meets (int32
and int64 tokens), cached on disk where numba can write its cache.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from specreg_lookup.kernels.ngram_match.types import ChainProposal

_KERNEL: list[Any] = []  # [the compiled function or None], filled on first use


def _propose_rows(tokens: Any, lengths: Any, min_ngram: int, max_ngram: int, k: int,
                  drafts: Any, count: Any, start: Any, ngram_len: Any) -> None:
    """Fills drafts [b, k], count, start and ngram_len [b] (plain Python; numba compiles it).
    Needs 1 <= lengths[r] <= W and min_ngram >= 1 (the family's entry makes sure)."""
    for r in range(tokens.shape[0]):
        row = tokens[r]
        total = lengths[r]
        last = row[total - 1]
        best_len = 0
        best_at = -1
        for s in range(1, total):  # a continuation start: a token follows the n-gram
            if row[s - 1] != last:
                continue
            ell = 1
            for t in range(1, max_ngram):
                if s - 1 - t < 0 or row[s - 1 - t] != row[total - 1 - t]:
                    break
                ell += 1
            if ell >= min_ngram and ell > best_len:  # strictly longer: ties keep the earliest
                best_len = ell
                best_at = s
                if ell >= max_ngram:  # nothing later is longer
                    break
        n = 0
        if best_at >= 0:
            n = min(total - best_at, k)
            start[r] = best_at
        else:
            start[r] = -1
        count[r] = n
        ngram_len[r] = best_len
        for j in range(k):
            drafts[r, j] = row[best_at + j] if j < n else last


def kernel() -> Any:
    """The compiled `_propose_rows`, or None where numba is absent or cannot compile here."""
    if not _KERNEL:
        try:
            import numba

            _KERNEL.append(numba.njit(cache=True, nogil=True)(_propose_rows))
        except Exception:  # noqa: BLE001 - no numba (or a broken one): the torch path runs
            _KERNEL.append(None)
    return _KERNEL[0]


def chain_proposals(tokens: torch.Tensor, lengths: torch.Tensor, min_ngram: int,
                    max_ngram: int, k: int) -> ChainProposal:
    """`torch_impl.chain_proposals` on CPU through the compiled loop: checked int32 or int64
    tokens [b, W] (W >= 2, any strides; only each row's first lengths[r] tokens are read),
    lengths int64 [b] in [1, W], min_ngram >= 1, k >= 0."""
    compiled = kernel()
    assert compiled is not None, "numba_impl.chain_proposals without numba"
    batch = tokens.shape[0]
    rows = tokens.numpy()  # any strides: vLLM's rows arrive as a view of its buffer
    sizes = np.ascontiguousarray(lengths.numpy())
    drafts = np.empty((batch, k), dtype=np.int64)
    count = np.empty(batch, dtype=np.int64)
    start = np.empty(batch, dtype=np.int64)
    ngram_len = np.empty(batch, dtype=np.int64)
    compiled(rows, sizes, int(min_ngram), int(max_ngram), int(k), drafts, count, start,
             ngram_len)
    return ChainProposal(tokens=torch.from_numpy(drafts), num_drafts=torch.from_numpy(count),
                         start=torch.from_numpy(start), ngram_len=torch.from_numpy(ngram_len))
