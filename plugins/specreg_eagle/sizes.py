"""What a resolved eagle config implies: tree sizes, inferred widths and per-request buffers.

Torch-free (the hooks import it). The draft loop numbers its tokens by the core's draft global
ids (`specreg.contract.tree_sizes`, which also states the verify tree's buffers). Buffer
statements are computed from the widths alone (`specreg.contract.memory.Buffer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specreg.contract.memory import PER_REQUEST, Buffer
from specreg.contract.tree_sizes import num_draft_ids

if TYPE_CHECKING:
    from specreg.contract.resolution import Resolution

_I64, _F32 = 8, 4


def max_tree_nodes(num_steps: int, topk: int) -> int:
    """Nodes the draft loop can produce, root included: 1 + topk + (num_steps - 1) * topk**2."""
    return 1 + num_draft_ids(topk, num_steps)


def infer_num_draft_tokens(num_steps: int, topk: int) -> int:
    """The verify width used when num_draft_tokens is unset.

    topk 1 (a chain): num_steps + 1. topk > 1: min(tree nodes, 1 + num_steps * topk), i.e. on
    average `topk` drafts kept per level, never more than the tree holds.
    """
    if topk == 1:
        return num_steps + 1
    return min(max_tree_nodes(num_steps, topk), 1 + num_steps * topk)


def resolved_draft_tokens(steps: int, topk: int, given: int | None) -> int:
    """The main config's verify width: the user's, else inferred (out-of-range steps/topk are
    reported by validation, SR103; something harmless is inferred for them)."""
    if given is not None:
        return given
    return infer_num_draft_tokens(steps, topk) if steps >= 1 and topk >= 1 else 2


def candidate_draft_tokens(steps: int, topk: int, main_steps: int, main_draft_tokens: int) -> int:
    """The verify width of adaptive candidate `steps`: a chain (topk 1) verifies steps + 1; a
    tree whose main config verifies the inferred width (`infer_num_draft_tokens`, given or left
    unset alike) infers its own the same way, and a tree whose main width differs keeps that
    width where the candidate's tree holds that many nodes (fewer where it does not).

    The rule reads values only, never whether the user typed them, so a plan's resolved config
    resolves to the same plan."""
    if topk == 1:
        return steps + 1
    if main_draft_tokens == infer_num_draft_tokens(main_steps, topk):
        return infer_num_draft_tokens(steps, topk)
    return min(main_draft_tokens, max_tree_nodes(steps, topk))


def widths_by_steps(resolution: Resolution) -> dict[int, int]:
    """Every served step count (the main config's and each candidate's) -> its verify width."""
    out: dict[int, int] = {}
    for config in resolution.configs():
        assert config.num_steps is not None and config.num_draft_tokens is not None
        out[config.num_steps] = max(out.get(config.num_steps, 0), config.num_draft_tokens)
    return out


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
