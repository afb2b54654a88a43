"""Building the Markov head a DSpark checkpoint names (`make_markov_head`), arguments checked.

The heads are torch modules (`torch_impl`: `MarkovHead` = vanilla, `GatedMarkovHead`,
`RNNMarkovHead`, and the samplers their block walk draws with: `greedy_sampler`,
`ExponentialRaceSampler`), exported here for the drafter that runs them; `checks.check_block` validates a
walk's inputs; `reference` holds the plain per-row rule of a head step and of the block walk (test
oracle). The vanilla head's greedy walk runs the fused step of
`specreg_dspark.kernels.markov_greedy`.
"""

from __future__ import annotations

from specreg.errors import ConfigError, problem
from specreg_dspark.checkpoint import MARKOV_HEAD_TYPES
from specreg_dspark.kernels.markov_head.torch_impl import (
    HEADS,
    ExponentialRaceSampler,
    GatedMarkovHead,
    MarkovHead,
    RNNMarkovHead,
    greedy_sampler,
)

__all__ = [
    "ExponentialRaceSampler",
    "GatedMarkovHead",
    "MarkovHead",
    "RNNMarkovHead",
    "greedy_sampler",
    "make_markov_head",
]


def make_markov_head(
    head_type: str, *, vocab_size: int, rank: int, hidden_size: int = 0
) -> MarkovHead:
    """Build the head named by a checkpoint's markov_head_type (SR302 for an unknown one)."""
    key = str(head_type).strip().lower()
    if key not in HEADS:
        raise ConfigError(
            problem(
                "SR302",
                f"unsupported DSpark markov_head_type={head_type!r}",
                accepted=", ".join(MARKOV_HEAD_TYPES),
                fix="use one of the supported heads",
                field="markov_head_type",
            )
        )
    if key == "vanilla":
        return MarkovHead(vocab_size, rank, hidden_size)
    if hidden_size <= 0:
        raise ConfigError(
            problem(
                "SR301",
                f"the {key} Markov head needs hidden_size > 0, got {hidden_size}",
                accepted="hidden_size >= 1 (the draft model's hidden size)",
                fix="pass hidden_size from the draft config",
                field="hidden_size",
            )
        )
    return HEADS[key](vocab_size, rank, hidden_size)
