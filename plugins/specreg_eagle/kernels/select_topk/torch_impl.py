"""The draft loop's top-k selection and final pick in torch (batched over requests).

Notation: b = batch, K = topk, S = num_steps. Draft token global ids are described in
`specreg_eagle.sizes`. Inputs are validated by `specreg_eagle.kernels.select_topk`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

#: (input_ids, hidden_states, scores, (step_scores, step_tokens, parents)).
StepOutput = tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]
]


def select_top_k_tokens_torch(
    i: int,
    topk_p: torch.Tensor,
    topk_index: torch.Tensor,
    hidden_states: torch.Tensor,
    scores: torch.Tensor | None,
    topk: int,
) -> StepOutput:
    """`select_top_k_tokens` on validated inputs (`scores` given for i > 0)."""
    if i == 0:
        batch = topk_p.shape[0]
        input_ids = topk_index.flatten()
        hidden = hidden_states.repeat_interleave(topk, dim=0)
        parents = torch.arange(-1, topk, dtype=torch.int64, device=topk_p.device)
        tree_info = (topk_p.unsqueeze(1), topk_index, parents.unsqueeze(0).expand(batch, topk + 1))
        return input_ids, hidden, topk_p, tree_info
    assert scores is not None
    batch = scores.shape[0]
    expand = scores.unsqueeze(2) * topk_p.view(batch, topk, topk)
    chosen_p, chosen = torch.topk(expand.flatten(1), topk, dim=-1)
    step_tokens = topk_index.view(batch, topk * topk)
    input_ids = torch.gather(step_tokens, 1, chosen).flatten()
    rows = chosen // topk + torch.arange(batch, device=chosen.device).unsqueeze(1) * topk
    hidden = hidden_states[rows.flatten()]
    parents = chosen + (topk * topk * (i - 1) + topk)
    return input_ids, hidden, chosen_p, (expand, step_tokens, parents)


def organize_draft_results_torch(
    score_list: Sequence[torch.Tensor],
    token_list: Sequence[torch.Tensor],
    parents_list: Sequence[torch.Tensor],
    num_draft_tokens: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`organize_draft_results` on validated lists."""
    scores = torch.cat([s.flatten(1) for s in score_list], dim=1)
    tokens = torch.cat(list(token_list), dim=1)
    top_scores_index = torch.topk(scores, num_draft_tokens - 1, dim=-1).indices
    top_scores_index = torch.sort(top_scores_index, dim=-1).values
    draft_tokens = torch.gather(tokens, 1, top_scores_index)
    if len(parents_list) > 1:
        parent_list = torch.cat(list(parents_list[:-1]), dim=1).to(torch.int64)
    else:
        parent_list = torch.empty(scores.shape[0], 0, dtype=torch.int64, device=scores.device)
    return parent_list, top_scores_index, draft_tokens
