"""Repetition, frequency and presence penalties and logit bias at every verified position.

`apply_penalties_(logits, penalties, context)` penalises target scores [b, n, V] in place, per
request (`Penalties`, vLLM's semantics and order: the logit bias first; then the repetition
penalty on every token of the prompt or the output so far; then frequency x count and presence
over the output so far). At a verified position "the output so far" is the request's output plus
the draft tokens before that position (`context` [b, n, D], -1 padded): `chain_context` builds it
for chains (position j: drafts 1..j), `tree_context` for trees (node i: the drafts on the path
from the root to i). Speculative verification then sees, at every position, the logits plain
decoding would penalise there, so it emits plain decoding's tokens (greedy) and distribution
(sampling). The verifiers with per-request parameters take `penalties=` and do this themselves.

Family: `types` (`Penalties`), `reference` (per position, by hand), `torch_impl` (sparse over
the history's tokens: no [b, V] counts), `triton_impl` (one program per position). Bad values
are SR919, bad token tensors SR920, before any launch.
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import should_check_values
from specreg.kernels.penalties.torch_impl import apply_penalties_torch
from specreg.kernels.penalties.triton_impl import apply_penalties_triton
from specreg.kernels.penalties.types import Penalties

__all__ = ["Penalties", "apply_penalties_", "chain_context", "tree_context"]


def chain_context(candidates: torch.Tensor) -> torch.Tensor:
    """[b, n, n-1]: at position j, the drafts candidates[:, 1..j] (then -1)."""
    b, n = candidates.shape
    drafts = candidates[:, 1:].to(torch.int64)
    upto = torch.arange(n, device=candidates.device)[:, None] > torch.arange(
        n - 1, device=candidates.device)[None, :]
    return torch.where(upto[None], drafts[:, None, :].expand(b, n, n - 1), -1)


def tree_context(
    candidates: torch.Tensor, retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor, depth: int,
) -> torch.Tensor:
    """[b, N, depth]: at node i, the draft tokens of the path root -> i (the root excluded; -1
    padded). Links are local node indices, -1 for none, as `build_tree` makes them."""
    b, n = candidates.shape
    device = candidates.device
    parent = torch.full((b, n), -1, dtype=torch.int64, device=device)
    rows = torch.arange(b, device=device)[:, None].expand(b, n)
    nodes = torch.arange(n, device=device)[None, :].expand(b, n)
    first = retrieve_next_token.to(torch.int64)
    has = first >= 0
    parent[rows[has], first[has]] = nodes[has]
    sibling = retrieve_next_sibling.to(torch.int64)
    for _ in range(n):  # a sibling's parent is its elder sibling's
        has = (sibling >= 0) & (parent >= 0)
        parent[rows[has], sibling[has]] = parent[has]
    out = torch.full((b, n, depth), -1, dtype=torch.int64, device=device)
    cur = nodes.clone()
    for step in range(depth):  # walk up from each node; the order does not matter to counts
        up = cur > 0
        token = candidates.to(torch.int64).gather(1, cur.clamp_min(0))
        out[..., step] = torch.where(up, token, -1)
        cur = torch.where(up, parent.gather(1, cur.clamp_min(0)), cur)
    return out


def apply_penalties_(
    logits: torch.Tensor,
    penalties: Penalties,
    context: torch.Tensor,
    *,
    check_values: bool | None = None,
    backend: str | None = None,
) -> torch.Tensor:
    """Penalise `logits` [b, n, V] in place (module docstring); returns `logits`."""
    check_penalties(logits, penalties, context,
                    values=should_check_values(logits.device, check_values))
    if select_backend(logits, requested=backend) == "triton":
        apply_penalties_triton(logits, penalties, context)
    else:
        apply_penalties_torch(logits, penalties, context)
    return logits


def check_penalties(logits: torch.Tensor, penalties: Penalties, context: torch.Tensor, *,
                    values: bool) -> None:
    """SR920 for token tensors that do not fit, SR919 for penalty values out of range (with
    `values`); every problem at once."""
    if not isinstance(penalties, Penalties):
        raise KernelInputError(problem(
            "SR920", f"penalties must be a Penalties, got {type(penalties).__name__}",
            accepted="specreg.kernels.penalties.Penalties", fix="build it with Penalties.of(b, ...)",
            field="penalties",
        ))
    b, n, vocab = logits.shape
    found = []
    for name in ("repetition", "frequency", "presence"):
        t = getattr(penalties, name)
        if t.shape != (b,) or t.dtype != torch.float32 or t.device != logits.device:
            found.append(("SR920", f"penalties.{name} is {t.dtype} {list(t.shape)} on {t.device}",
                          f"float32 [{b}] on {logits.device}", f"penalties.{name}"))
    for name in ("prompt_tokens", "output_tokens", "bias_ids"):
        t = getattr(penalties, name)
        if t.dim() != 2 or t.shape[0] != b or t.dtype != torch.int64 or t.device != logits.device:
            found.append(("SR920", f"penalties.{name} is {t.dtype} {list(t.shape)} on {t.device}",
                          f"int64 [{b}, any] on {logits.device}, -1 padded", f"penalties.{name}"))
    if penalties.bias_values.shape != penalties.bias_ids.shape:
        found.append(("SR920", f"penalties.bias_values {list(penalties.bias_values.shape)} does "
                      f"not match bias_ids {list(penalties.bias_ids.shape)}",
                      "one value per bias id", "penalties.bias_values"))
    if context.dim() != 3 or context.shape[:2] != (b, n) or context.device != logits.device:
        found.append(("SR920", f"context is {list(context.shape)} on {context.device}",
                      f"[{b}, {n}, D] on {logits.device}", "context"))
    if not found and values:
        rep, freq, pres = penalties.repetition, penalties.frequency, penalties.presence
        for name, bad, accepted in (
            ("repetition", ~(rep > 0) | ~torch.isfinite(rep), "> 0 (1 = off)"),
            ("frequency", ~((freq >= -2) & (freq <= 2)), "[-2, 2] (0 = off)"),
            ("presence", ~((pres >= -2) & (pres <= 2)), "[-2, 2] (0 = off)"),
        ):
            rows = bad.nonzero().flatten().tolist()
            if rows:
                found.append(("SR919", f"penalties.{name} is out of range for request(s) "
                              f"{rows[:8]}", accepted, f"penalties.{name}"))
        for name in ("prompt_tokens", "output_tokens", "bias_ids"):
            t = getattr(penalties, name)
            if t.numel() and bool(((t < -1) | (t >= vocab)).any()):
                found.append(("SR920", f"penalties.{name} holds ids outside [-1, {vocab})",
                              f"token ids in [0, {vocab}), -1 for padding", f"penalties.{name}"))
        if not bool(torch.isfinite(penalties.bias_values).all()):
            found.append(("SR919", "penalties.bias_values has a value that is not finite",
                          "finite biases", "penalties.bias_values"))
        ids = torch.where(penalties.bias_ids < 0, vocab, penalties.bias_ids).sort(-1).values
        if ids.shape[1] > 1 and bool(((ids[:, 1:] == ids[:, :-1]) & (ids[:, 1:] < vocab)).any()):
            found.append(("SR920", "penalties.bias_ids repeats a token within a request",
                          "distinct ids per request", "penalties.bias_ids"))
    if found:
        raise KernelInputError([
            problem(code, text, accepted=accepted, fix="build the penalties with Penalties.of("
                    "batch, ...) from the requests' sampling parameters", field=field)
            for code, text, accepted, field in found
        ])
