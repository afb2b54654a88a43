"""The mixed batch of per-request sampling parameters that `specreg demo` and the benchmarks run.

Request r has kind r % len(MIXED_DEMO_KINDS): greedy, plain temperature, top-k, top-p, min-p and
all three filters together, each request seeded with its own index.
"""

from __future__ import annotations

import torch

from specreg.contract.sampling_params import SamplingParams

#: The request kinds `mixed_demo_params` cycles through: request r has kind r % len(...).
MIXED_DEMO_KINDS: tuple[dict[str, float], ...] = (
    dict(temperature=0.0),
    dict(temperature=0.7),
    dict(temperature=1.0, top_k=20),
    dict(temperature=0.8, top_p=0.9),
    dict(temperature=1.3, min_p=0.1),
    dict(temperature=0.6, top_k=50, top_p=0.95, min_p=0.05),
)


def mixed_demo_params(batch: int, *, device: torch.device | str = "cpu") -> SamplingParams:
    """A batch cycling through greedy, plain temperature, top-k, top-p and min-p requests with
    per-request seeds: the mixed-parameter row of `specreg demo` and of the benchmarks."""
    kinds = MIXED_DEMO_KINDS
    rows = [kinds[r % len(kinds)] for r in range(batch)]
    return SamplingParams.of(
        batch,
        temperature=[row.get("temperature", 0.0) for row in rows],
        top_k=[int(row.get("top_k", 0)) for row in rows],
        top_p=[row.get("top_p", 1.0) for row in rows],
        min_p=[row.get("min_p", 0.0) for row in rows],
        seed=list(range(batch)),
        device=device,
    )
