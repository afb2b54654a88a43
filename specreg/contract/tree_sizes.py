"""The sizes every draft-tree user shares: draft global ids, mask layouts and the tree's buffers.

Torch-free (plugins' hooks import it). Draft token *global ids* number the drafted tokens of one
request: level 0 holds ids 0..K-1, level j >= 1 holds ids K + K*K*(j-1) ... K + K*K*j - 1
(K children for each of the K expanded nodes of level j - 1); the tree adds the root. This is
the numbering `specreg.kernels.tree_build` reads `top_scores_index` in (EAGLE's draft loop and
Medusa's static trees both use it). Buffer statements are computed from the widths alone
(`specreg.contract.memory.Buffer`).
"""

from __future__ import annotations

from specreg.contract.memory import PER_REQUEST, Buffer

#: The tree mask layouts `build_tree` writes.
MASK_MODES = ("full", "qlen_only", "qlen_only_bitpacking")
#: The widest tree a bit-packed mask row (one 32-bit word) holds.
MAX_BITPACKED_NODES = 32

_BOOL, _I64, _I32 = 1, 8, 4


def num_draft_ids(topk: int, depth: int) -> int:
    """How many draft global ids a tree of `depth` levels of `topk` branches numbers per
    request: K + (S - 1) * K**2."""
    return topk + (depth - 1) * topk * topk


def bitpacked_word_bytes(num_verify_tokens: int) -> int:
    """Bytes of one packed mask row: 1 (N <= 8), 2 (<= 16), 4 (<= 32)."""
    n = num_verify_tokens
    return 1 if n <= 8 else 2 if n <= 16 else 4


def _mask_bytes(num_verify_tokens: int, mask_mode: str, context_len: int) -> int:
    """One request's tree mask: `full` [(context_len + N) * N] bool, `qlen_only` [N * N] bool,
    `qlen_only_bitpacking` N words of `bitpacked_word_bytes(N)`."""
    n = num_verify_tokens
    if mask_mode == "qlen_only_bitpacking":
        return n * bitpacked_word_bytes(n)
    if mask_mode == "qlen_only":
        return n * n * _BOOL
    return (context_len + n) * n * _BOOL


def tree_buffers(num_verify_tokens: int, mask_mode: str, *, context_len: int = 0) -> list[Buffer]:
    """What `build_tree` returns for one request of N nodes. The `full` mask also holds N
    columns per context token: `context_len` counts them (0 states the tree columns only)."""
    n = num_verify_tokens
    mask_per = PER_REQUEST if mask_mode != "full" else (
        f"{PER_REQUEST} at context {context_len}, plus {n} B per context token"
    )
    return [
        Buffer(name=f"tree_mask ({mask_mode})",
               device_bytes=_mask_bytes(n, mask_mode, context_len), per=mask_per),
        Buffer(name="tree_positions", device_bytes=n * _I64, per=PER_REQUEST),
        Buffer(name="retrieve_index+next_token+next_sibling", device_bytes=3 * n * _I64,
               per=PER_REQUEST),
        Buffer(name="tree_tokens", device_bytes=n * _I64, per=PER_REQUEST),
        Buffer(name="tree_invalid", device_bytes=_I32, per=PER_REQUEST),
    ]
