"""The plain per-row rule of a Markov head step and of its block walk: the heads' test oracle.

Everything is float64 Python lists, one request and one element at a time. A head's weights are
read from the module (`markov_w1`, `markov_w2`, and `gate_proj` / `cell` for the gated / rnn head).
"""

from __future__ import annotations

import math
from typing import Any

import torch

_TINY = torch.finfo(torch.float32).tiny


def _rows(matrix: torch.Tensor) -> list[list[float]]:
    return matrix.detach().double().tolist()


def _affine(weight: list[list[float]], bias: list[float], x: list[float]) -> list[float]:
    out = []
    for row, b in zip(weight, bias, strict=True):
        out.append(sum(w * xi for w, xi in zip(row, x, strict=True)) + b)
    return out


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def markov_step_reference(
    head: Any, prev: int, hidden: list[float] | None, state: list[float] | None
) -> tuple[list[float], list[float] | None]:
    """One head step for one request: (bias [V], next state).

    vanilla: ``bias_v = sum_r W2[v][r] * W1[prev][r]``;
    gated: ``gate = sigmoid(G [h, W1[prev]] + g)``,
    ``bias_v = sum_r W2[v][r] * gate_r * W1[prev][r]``;
    rnn: ``[g, c, o] = C [s, W1[prev], h] + c0``, ``s <- sigmoid(g) s + (1 - sigmoid(g)) tanh(c)``,
    ``bias_v = sum_r W2[v][r] * tanh(o_r)``.
    """
    embed = _rows(head.markov_w1.weight)[prev]
    w2 = _rows(head.markov_w2.weight)
    if head.head_type == "vanilla":
        mix = embed
    elif head.head_type == "gated":
        pre = _affine(_rows(head.gate_proj.weight), head.gate_proj.bias.double().tolist(),
                      list(hidden) + embed)  # fmt: skip
        mix = [_sigmoid(p) * e for p, e in zip(pre, embed, strict=True)]
    else:
        rank = head.rank
        assert state is not None
        gates = _affine(_rows(head.cell.weight), head.cell.bias.double().tolist(),
                        list(state) + embed + list(hidden))  # fmt: skip
        g, c, o = gates[:rank], gates[rank : 2 * rank], gates[2 * rank :]
        new_state = []
        for s_r, g_r, c_r in zip(state, g, c, strict=True):
            keep = _sigmoid(g_r)
            new_state.append(keep * s_r + (1 - keep) * math.tanh(c_r))
        state = new_state
        mix = [math.tanh(o_r) for o_r in o]
    bias = [sum(w * m for w, m in zip(row, mix, strict=True)) for row in w2]
    return bias, state


def _first_argmax(values: list[float]) -> int:
    best = 0
    for v, value in enumerate(values):
        if value > values[best]:
            best = v
    return best


def markov_block_reference(
    head: Any,
    base_logits: torch.Tensor,
    anchor: torch.Tensor,
    hidden: torch.Tensor | None = None,
    *,
    temperature: float = 0.0,
    noise: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The block walk per request: ``prev = anchor``; slot k: ``logits_k = base_k + bias(prev,
    h_k)``, ``tok_k`` = the first argmax of ``logits_k`` (greedy, temperature <= 0) or of
    ``softmax(logits_k / T)_v / max(E_v, tiny)`` with ``E = noise[row, k]`` (the exponential race);
    ``prev = tok_k``. Returns tokens int64 [b, gamma] and corrected logits float64 [b, gamma, V]."""
    b, gamma, _ = base_logits.shape
    tokens, corrected = [], []
    for row in range(b):
        prev = int(anchor[row])
        state = [0.0] * head.rank if head.head_type == "rnn" else None
        row_tokens, row_logits = [], []
        for k in range(gamma):
            h_k = hidden[row, k].double().tolist() if hidden is not None else None
            bias, state = markov_step_reference(head, prev, h_k, state)
            base = base_logits[row, k].double().tolist()
            logits = [x + y for x, y in zip(base, bias, strict=True)]
            if temperature <= 0:
                prev = _first_argmax(logits)
            else:
                assert noise is not None
                top = max(x / temperature for x in logits)
                weights = [math.exp(x / temperature - top) for x in logits]
                total = sum(weights)
                race = [
                    (w / total) / max(e, _TINY)
                    for w, e in zip(weights, noise[row, k].double().tolist(), strict=True)
                ]
                prev = _first_argmax(race)
            row_tokens.append(prev)
            row_logits.append(logits)
        tokens.append(row_tokens)
        corrected.append(row_logits)
    return (
        torch.tensor(tokens, dtype=torch.int64).reshape(b, gamma),
        torch.tensor(corrected, dtype=torch.float64).reshape(base_logits.shape),
    )
