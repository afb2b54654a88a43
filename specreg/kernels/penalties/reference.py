"""Plain per-position reference of the penalties (the test oracle): vLLM's order, by hand."""

from __future__ import annotations

import torch

from specreg.kernels.penalties.types import Penalties


def penalised_row(
    logits: torch.Tensor, penalties: Penalties, request: int, context: list[int]
) -> torch.Tensor:
    """One position's logits [V] after the request's bias and penalties, where `context` are the
    draft tokens before the position (they count as output)."""
    out = logits.to(torch.float32).clone()
    ids = [int(t) for t in penalties.bias_ids[request] if t >= 0]
    for k, token in enumerate(ids):
        out[token] += float(penalties.bias_values[request, k])
    prompt = {int(t) for t in penalties.prompt_tokens[request] if t >= 0}
    output = [int(t) for t in penalties.output_tokens[request] if t >= 0] + list(context)
    rep = float(penalties.repetition[request])
    freq, pres = float(penalties.frequency[request]), float(penalties.presence[request])
    for token in prompt | set(output):
        value = float(out[token])
        out[token] = value / rep if value > 0 else value * rep
    for token in set(output):
        count = output.count(token)
        out[token] -= freq * count + pres
    return out
