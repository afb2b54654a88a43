"""Torch implementation of the penalties: sparse over the tokens the history holds.

A position's bias and penalties change only the tokens in its request's prompt, output, drafts
before it and logit bias: E entries per position, not V. `entry_features` finds, for every entry,
its token's output count (the output's plus the drafts' before the position), whether the prompt
holds it and its bias, by `searchsorted` over sorted histories (no [b, V] counts, no pairwise
[E, L] comparison); `apply_entries` gathers the entries' logits, penalises them and scatters them
back. Entries of one token compute the same value, so repeated tokens and padding (clamped to
token 0, computed for token 0) write consistent values. Requests go in chunks, so the entry
tensors stay small whatever the batch.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from specreg.kernels.penalties.types import Penalties

#: Entries (positions x tokens) per request chunk.
CHUNK_ENTRIES = 1 << 18


def _counts_in(sorted_rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Occurrences of each of `ids` [r, M] in the sorted rows [r, L] (int64 [r, M])."""
    if sorted_rows.shape[-1] == 0:
        return torch.zeros(ids.shape, dtype=torch.int64, device=ids.device)
    right = torch.searchsorted(sorted_rows, ids, right=True)
    left = torch.searchsorted(sorted_rows, ids, right=False)
    return right - left


def _sorted(tokens: torch.Tensor, sentinel: int) -> torch.Tensor:
    """Rows sorted with the -1 padding moved past every token (to `sentinel`)."""
    return torch.where(tokens < 0, sentinel, tokens).sort(-1).values.contiguous()


def entry_features(
    penalties: Penalties, rows: slice, context: torch.Tensor, vocab: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For the requests `rows` and their positions' `context` [r, n, D] (-1 padded): entry
    token ids [r, n, E] (clamped to [0, V)), output counts int64, prompt membership bool and
    bias float32, each [r, n, E]. The history's entries are looked up once per request and
    shared by its positions; the drafts before a position add to the counts by comparison."""
    r, n, depth = context.shape
    prompt = penalties.prompt_tokens[rows]
    output = penalties.output_tokens[rows]
    bias_ids = penalties.bias_ids[rows]
    sentinel = vocab + 1
    out_sorted, prompt_sorted = _sorted(output, sentinel), _sorted(prompt, sentinel)
    order = torch.where(bias_ids < 0, sentinel, bias_ids).sort(-1)
    bias_sorted = order.values.contiguous()
    bias_values = penalties.bias_values[rows].gather(1, order.indices)

    def lookup(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(output count, in prompt, bias) of token ids [r, M] from the request's history."""
        count = _counts_in(out_sorted, ids)
        in_prompt = _counts_in(prompt_sorted, ids) > 0
        bias = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
        if bias_sorted.shape[1]:
            where = torch.searchsorted(bias_sorted, ids).clamp_max(bias_sorted.shape[1] - 1)
            bias = torch.where(bias_sorted.gather(1, where) == ids, bias_values.gather(1, where), 0.0)
        return count, in_prompt, bias

    base = torch.cat([prompt, output, bias_ids], 1).clamp(0, vocab - 1)
    drafts = context.clamp(0, vocab - 1).reshape(r, n * depth)
    features = [torch.cat([a[:, None, :].expand(r, n, a.shape[1]), c.view(r, n, depth)], 2)
                for a, c in zip(lookup(base), lookup(drafts), strict=True)]
    ids = torch.cat([base[:, None, :].expand(r, n, base.shape[1]), drafts.view(r, n, depth)], 2)
    count, in_prompt, bias = features
    if depth:  # the drafts before each position count as output
        count = count + (ids[..., None] == context[:, :, None, :]).sum(-1)
    return ids, count, in_prompt, bias


def penalised(
    logits: torch.Tensor, count: torch.Tensor, in_prompt: torch.Tensor, bias: torch.Tensor,
    repetition: torch.Tensor, frequency: torch.Tensor, presence: torch.Tensor,
) -> torch.Tensor:
    """The entries' new logits (float32; per-request values [r] broadcast over [r, n, E])."""
    z = logits.to(torch.float32) + bias
    rep = repetition[:, None, None]
    seen = in_prompt | (count > 0)
    z = torch.where(seen, torch.where(z > 0, z / rep, z * rep), z)
    return z - frequency[:, None, None] * count - presence[:, None, None] * (count > 0)


def request_chunks(
    logits: torch.Tensor, penalties: Penalties, context: torch.Tensor
) -> Iterator[tuple[slice, torch.Tensor, tuple[torch.Tensor, ...]]]:
    """(rows, logits[rows], entry_features) per chunk of requests of about CHUNK_ENTRIES entries."""
    b, n, vocab = logits.shape
    per_request = n * (penalties.prompt_tokens.shape[1] + penalties.output_tokens.shape[1]
                       + penalties.bias_ids.shape[1] + context.shape[2])
    step = max(1, CHUNK_ENTRIES // max(per_request, 1))
    for start in range(0, b, step):
        rows = slice(start, min(b, start + step))
        yield rows, logits[rows], entry_features(penalties, rows, context[rows], vocab)


def apply_penalties_torch(logits: torch.Tensor, penalties: Penalties, context: torch.Tensor) -> None:
    """Penalise `logits` [b, n, V] in place (`context` [b, n, D]: the drafts before each position)."""
    for rows, part, (ids, count, in_prompt, bias) in request_chunks(logits, penalties, context):
        new = penalised(part.gather(2, ids), count, in_prompt, bias, penalties.repetition[rows],
                        penalties.frequency[rows], penalties.presence[rows])
        part.scatter_(2, ids, new.to(part.dtype))
