"""The draft loop's per-step selection and its final pick: validated, then run in torch.

`select_top_k_tokens` chooses the K branches one EAGLE draft step expands next;
`organize_draft_results` keeps the N - 1 best drafts of the finished tree (see `torch_impl` for
the shapes, `reference` for the plain rule). Torch only: both are a few small gathers and a
top-k over at most K + (S - 1) * K**2 scores per request.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specreg.errors import KernelInputError, problem
from specreg.integers import require_int
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_same_device,
    check_shape,
    check_tensor,
)
from specreg_eagle.kernels.select_topk.torch_impl import (
    StepOutput,
    organize_draft_results_torch,
    select_top_k_tokens_torch,
)


def _check_select_inputs(
    i: int,
    topk_p: torch.Tensor,
    topk_index: torch.Tensor,
    hidden_states: torch.Tensor,
    scores: torch.Tensor | None,
    topk: int,
) -> None:
    require_int("topk", topk, low=1, fix="pass the plan's topk")
    check_tensor("topk_p", topk_p)
    check_dtype("topk_p", topk_p, FLOAT_DTYPES)
    check_dtype("topk_index", topk_index, INDEX_DTYPES)
    check_tensor("hidden_states", hidden_states)
    check_shape("topk_p", topk_p, (None, topk))
    check_shape("topk_index", topk_index, tuple(topk_p.shape))
    if i > 0:
        if topk_p.shape[0] % topk:
            raise KernelInputError(
                problem(
                    "SR900",
                    f"step {i}: topk_p has {topk_p.shape[0]} rows, not a multiple of topk={topk}",
                    accepted="[b * topk, topk] after step 0",
                    fix="pass the draft model's top-k over every branch of the previous step",
                    field="topk_p",
                )
            )
        if scores is not None:
            check_shape("scores", scores, (topk_p.shape[0] // topk, topk))
            check_dtype("scores", scores, FLOAT_DTYPES)
    if hidden_states.dim() < 1 or hidden_states.shape[0] != topk_p.shape[0]:
        check_shape("hidden_states", hidden_states, (topk_p.shape[0], None))
    check_same_device(
        topk_p=topk_p, topk_index=topk_index, hidden_states=hidden_states, scores=scores
    )
    if i > 0 and scores is None:
        raise KernelInputError(
            problem(
                "SR213",
                f"select_top_k_tokens step {i} needs the scores returned by step {i - 1}",
                accepted="scores [b, K] for i > 0",
                fix="pass the scores the previous step returned",
                field="scores",
            )
        )


def select_top_k_tokens(
    i: int,
    topk_p: torch.Tensor,
    topk_index: torch.Tensor,
    hidden_states: torch.Tensor,
    scores: torch.Tensor | None,
    topk: int,
) -> StepOutput:
    """One EAGLE draft step: choose the K branches to expand next.

    Step 0: `topk_p`, `topk_index` are [b, K] (the draft-extend output), `hidden_states` [b, H].
    Step i > 0: they are [b*K, K] (K candidates for each of the K branches), `hidden_states`
    [b*K, H] and `scores` [b, K] the cumulative path probabilities of the current branches.

    Returns `(input_ids [b*K], hidden_states [b*K, H], scores [b, K], tree_info)` where
    `tree_info = (step_scores, step_tokens, parents)`: step 0 gives `([b, 1, K], [b, K],
    [b, K+1] = -1, 0..K-1)`; step i gives `([b, K, K] cumulative scores, [b, K*K] tokens,
    [b, K] global ids of the chosen branches)`.
    """
    _check_select_inputs(i, topk_p, topk_index, hidden_states, scores, topk)
    return select_top_k_tokens_torch(i, topk_p, topk_index, hidden_states, scores, topk)


def organize_draft_results(
    score_list: Sequence[torch.Tensor],
    token_list: Sequence[torch.Tensor],
    parents_list: Sequence[torch.Tensor],
    num_draft_tokens: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keep the N - 1 best drafts of the tree.

    Returns `(parent_list, top_scores_index, draft_tokens)`: `parent_list` [b, K*(S-1)+1]
    int64 (empty [b, 0] for one step), `top_scores_index` [b, N-1] int64 global ids sorted
    ascending (so parents come before children), `draft_tokens` [b, N-1].
    """
    if not score_list or len(score_list) != len(token_list) or len(token_list) != len(parents_list):
        raise KernelInputError(
            problem(
                "SR213",
                f"score_list, token_list and parents_list have {len(score_list)}, "
                f"{len(token_list)} and {len(parents_list)} entries",
                accepted="one entry per draft step in each list, at least one step",
                fix="pass the three lists the draft loop built with select_top_k_tokens",
                field="score_list",
            )
        )
    first = check_tensor("score_list", score_list[0])
    batch = first.shape[0] if first.dim() else -1  # a 0-d entry fails the shape check
    for name, items, dtypes, rank in (
        ("score_list", score_list, FLOAT_DTYPES, None),
        ("token_list", token_list, INDEX_DTYPES, 2),
        ("parents_list", parents_list, INDEX_DTYPES, 2),
    ):
        for item in items:
            check_shape(name, item, (batch, *[None] * ((rank or max(item.dim(), 2)) - 1)))
            check_dtype(name, item, dtypes)
            check_same_device(**{"score_list[0]": first, name: item})
    drafted = sum(s.flatten(1).shape[1] for s in score_list)
    tokens = sum(t.shape[1] for t in token_list)
    if drafted != tokens or not 1 <= num_draft_tokens - 1 <= drafted:
        raise KernelInputError(
            problem(
                "SR213",
                f"{drafted} drafted scores, {tokens} drafted tokens, asked to "
                f"keep num_draft_tokens - 1 = {num_draft_tokens - 1}",
                accepted="as many scores as tokens, and 1 <= num_draft_tokens - 1 <= that count",
                fix="check num_draft_tokens against the tree size",
                field="num_draft_tokens",
            )
        )
    return organize_draft_results_torch(score_list, token_list, parents_list, num_draft_tokens)
