"""The per-request buffers an eagle plan implies, in bytes, computed from its widths alone."""

from __future__ import annotations

from specreg.memory import PER_REQUEST, Buffer

_BOOL, _I32, _I64, _F32 = 1, 4, 8, 4


def _mask_bytes(num_verify_tokens: int, mask_mode: str, context_len: int) -> int:
    """One request's tree mask: `full` [(context_len + N) * N] bool, `qlen_only` [N * N] bool,
    `qlen_only_bitpacking` N words of `bitpacked_dtype(N)`."""
    n = num_verify_tokens
    if mask_mode == "qlen_only_bitpacking":
        return n * (1 if n <= 8 else 2 if n <= 16 else 4)
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


def draft_buffers(topk: int, num_steps: int, num_verify_tokens: int) -> list[Buffer]:
    """The draft loop's per-request tensors over `num_steps` top-k steps (`select_top_k_tokens`)
    and the best N - 1 drafts `organize_draft_results` keeps. The hidden states the draft model
    runs on ([topk, hidden] per request) belong to the model and are not counted."""
    k, s, n = topk, num_steps, num_verify_tokens
    listed = k + (s - 1) * k * k
    return [
        Buffer(name="draft_score_list", device_bytes=listed * _F32, per=PER_REQUEST),
        Buffer(name="draft_token_list", device_bytes=listed * _I64, per=PER_REQUEST),
        Buffer(name="draft_parents_list", device_bytes=(k + 1 + (s - 1) * k) * _I64,
               per=PER_REQUEST),
        Buffer(name="branch_input_ids+scores", device_bytes=k * (_I64 + _F32), per=PER_REQUEST),
        Buffer(name="parent_list", device_bytes=(k * (s - 1) + 1 if s > 1 else 0) * _I64,
               per=PER_REQUEST),
        Buffer(name="top_scores_index+draft_tokens", device_bytes=2 * (n - 1) * _I64,
               per=PER_REQUEST),
    ]
