"""DSpark kernels (import torch): the draft-block builder and the fused Markov greedy step."""

from specreg_dspark.kernels.draft_block import build_draft_block, build_draft_block_torch
from specreg_dspark.kernels.markov_greedy import (
    markov_greedy_step,
    markov_greedy_step_chunked_torch,
    markov_greedy_step_torch,
)

__all__ = [
    "build_draft_block",
    "build_draft_block_torch",
    "markov_greedy_step",
    "markov_greedy_step_chunked_torch",
    "markov_greedy_step_torch",
]
