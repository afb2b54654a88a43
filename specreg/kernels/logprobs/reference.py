"""Plain per-slot reference of emitted-token log-probabilities (the test oracle)."""

from __future__ import annotations

import math

import torch

from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.logprobs.types import LogprobInputs


def logprobs_reference(inputs: LogprobInputs) -> tuple[list[float], list[list[tuple[int, float]]]]:
    """Per slot: log pi(token) and the top_n (token, log pi) pairs, most likely first (among
    equals, and among dropped tokens, the higher score first, then the lower id), where pi is
    `filtered_distribution` of the slot's row."""
    tokens_out: list[float] = []
    tops: list[list[tuple[int, float]]] = []
    for m in range(inputs.rows.shape[0]):
        dist = filtered_distribution(
            inputs.flat[int(inputs.rows[m])], temperature=float(inputs.temperature[m]),
            top_k=int(inputs.top_k[m]), top_p=float(inputs.top_p[m]),
            min_p=float(inputs.min_p[m]), probabilities=inputs.probabilities,
            order=inputs.filter_order,  # type: ignore[arg-type]
        )
        logs = [math.log(float(x)) if x > 0 else float("-inf") for x in dist]
        tokens_out.append(logs[int(inputs.tokens[m])])
        row = inputs.flat[int(inputs.rows[m])]
        ranked = sorted(range(len(logs)), key=lambda v: (-logs[v], -float(row[v]), v))[: inputs.top_n]
        tops.append([(v, logs[v]) for v in ranked])
    return tokens_out, tops


def scores_of(inputs: LogprobInputs) -> torch.Tensor:
    """The slots' rows as float32 [M, V] (for tests that want to look at them)."""
    return inputs.flat.index_select(0, inputs.rows).to(torch.float32)
