"""The plain per-request rule of the draft step's top-k selection and the final pick (test oracle).

Python loops over requests and branches; ties between equal scores go to the lower position
(`torch.topk` leaves their order open, so tests use scores without ties).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specreg_eagle.kernels.select_topk.torch_impl import StepOutput


def _best(values: list[float], count: int) -> list[int]:
    """Positions of the `count` largest values, largest first (ties: lower position first)."""
    return sorted(range(len(values)), key=lambda j: (-values[j], j))[:count]


def select_top_k_tokens_reference(
    i: int,
    topk_p: torch.Tensor,
    topk_index: torch.Tensor,
    hidden_states: torch.Tensor,
    scores: torch.Tensor | None,
    topk: int,
) -> StepOutput:
    """Same outputs as `select_top_k_tokens`, one request and one branch at a time."""
    k = topk
    if i == 0:
        batch = topk_p.shape[0]
        input_ids = [int(t) for row in topk_index.tolist() for t in row]
        hidden = torch.stack([hidden_states[r] for r in range(batch) for _ in range(k)])
        parents = [[-1, *range(k)] for _ in range(batch)]
        info = (topk_p.unsqueeze(1).clone(), topk_index.clone(), torch.tensor(parents))
        return torch.tensor(input_ids), hidden, topk_p.clone(), info
    assert scores is not None
    batch = scores.shape[0]
    dtype = topk_p.dtype
    input_ids, rows, chosen_p, step_scores, step_tokens, parents = [], [], [], [], [], []
    for r in range(batch):
        # expand[a][c]: path score of candidate c of branch a (float32 products, as torch's).
        expand = [[float(torch.tensor(float(scores[r, a]) * float(topk_p[r * k + a, c]),
                                      dtype=dtype)) for c in range(k)] for a in range(k)]
        flat = [v for row in expand for v in row]
        tokens = [int(topk_index[r * k + a, c]) for a in range(k) for c in range(k)]
        chosen = _best(flat, k)
        step_scores.append(expand)
        step_tokens.append(tokens)
        chosen_p.append([flat[j] for j in chosen])
        input_ids.extend(tokens[j] for j in chosen)
        rows.extend(r * k + j // k for j in chosen)
        parents.append([j + k * k * (i - 1) + k for j in chosen])
    info = (torch.tensor(step_scores, dtype=dtype), torch.tensor(step_tokens),
            torch.tensor(parents))
    hidden = torch.stack([hidden_states[row] for row in rows])
    return torch.tensor(input_ids), hidden, torch.tensor(chosen_p, dtype=dtype), info


def organize_draft_results_reference(
    score_list: Sequence[torch.Tensor],
    token_list: Sequence[torch.Tensor],
    parents_list: Sequence[torch.Tensor],
    num_draft_tokens: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Same outputs as `organize_draft_results`: per request, the global ids of the N - 1 best
    scores in ascending order, their tokens, and the parents of every step but the last."""
    batch = score_list[0].shape[0]
    kept, drafts, parent_rows = [], [], []
    for r in range(batch):
        scores = [float(v) for s in score_list for v in s[r].flatten().tolist()]
        tokens = [int(v) for t in token_list for v in t[r].tolist()]
        ids = sorted(_best(scores, num_draft_tokens - 1))
        kept.append(ids)
        drafts.append([tokens[j] for j in ids])
        parent_rows.append([int(v) for p in parents_list[:-1] for v in p[r].tolist()])
    parent_list = torch.tensor(parent_rows, dtype=torch.int64).view(batch, -1)
    return parent_list, torch.tensor(kept, dtype=torch.int64), torch.tensor(drafts)
