"""The two-level exponential race on the random stream in torch: block masses, block, then token.

A row of weights [V] is cut into blocks of `RACE_BLOCK` tokens; the winning block is the first
argmax of mass / E_block, then the winning token within it the first argmax of w / E_token, the
E's the random stream's exponentials under the row's key lanes (block j keyed as token
BLOCK_KEY_BASE + j). The token follows the weights exactly and reads the row once plus one
block. `block_race_torch` is the whole draw; the verifiers that read their rows in chunks call
its steps (`block_masses_torch`, `race_blocks_torch`, `block_columns`, `race_tokens_torch`).
The Triton twin is `specreg.kernels.race_tiles`; the oracle
`specreg.kernels.sampling.reference.block_race_reference`.
"""

from __future__ import annotations

import torch

from specreg.kernels.random_stream import exponentials_of, token_words_torch
from specreg.kernels.random_stream.types import BLOCK_KEY_BASE, RACE_BLOCK


def block_masses_torch(weights: torch.Tensor, block: int = RACE_BLOCK) -> torch.Tensor:
    """float32 [k, ceil(V / block)] block masses of float32 `weights` [k, V], summed as the
    Triton kernels and the reference sum them (zero padding, then halves added elementwise), so
    every backend gets the same bits."""
    k, vocab = weights.shape
    full = vocab // block
    parts = []
    if full:
        parts.append(_halving_sum(weights[:, : full * block].reshape(k, full, block)))
    if vocab % block:
        tail = weights.new_zeros((k, 1, block))
        tail[:, 0, : vocab % block] = weights[:, full * block :]
        parts.append(_halving_sum(tail))
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def _halving_sum(x: torch.Tensor) -> torch.Tensor:
    """[k, m, block] -> [k, m]: x[..., :h] + x[..., h:] until one value is left."""
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        x = x[..., :half] + x[..., half:]
    return x[..., 0]


def race_blocks_torch(masses: torch.Tensor, lanes: torch.Tensor) -> torch.Tensor:
    """The winning block per row: first argmax of mass / E_block (float64), E of the stream's
    token key BLOCK_KEY_BASE + j under the row's key `lanes` int64 [k, 2]."""
    keys = BLOCK_KEY_BASE + torch.arange(masses.shape[1], dtype=torch.int64, device=masses.device)
    noise = exponentials_of(token_words_torch((lanes[:, :1], lanes[:, 1:]), keys))
    return torch.argmax(masses.to(torch.float64) / noise.to(torch.float64), dim=-1)


def race_tokens_torch(
    block_weights: torch.Tensor, columns: torch.Tensor, lanes: torch.Tensor
) -> torch.Tensor:
    """The winning token per row within its block: `columns` int64 [k, RACE_BLOCK] the block's
    token ids, `block_weights` their float32 weights (0 past the vocabulary); first argmax of
    w / E_token (float64)."""
    noise = exponentials_of(token_words_torch((lanes[:, :1], lanes[:, 1:]), columns))
    best = torch.argmax(block_weights.to(torch.float64) / noise.to(torch.float64), dim=-1)
    return columns.gather(1, best[:, None]).squeeze(1)


def block_columns(blocks: torch.Tensor, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [k, RACE_BLOCK] of each row's block (clamped into the vocabulary) and the
    mask of those inside it."""
    offsets = torch.arange(RACE_BLOCK, dtype=torch.int64, device=blocks.device)
    columns = blocks[:, None] * RACE_BLOCK + offsets
    inside = columns < vocab
    return columns.clamp_max(vocab - 1), inside


def block_race_torch(weights: torch.Tensor, lanes: torch.Tensor) -> torch.Tensor:
    """`block_race_reference` for float32 rows `weights` [k, V] under key lanes [k, 2]."""
    blocks = race_blocks_torch(block_masses_torch(weights), lanes)
    columns, inside = block_columns(blocks, weights.shape[1])
    return race_tokens_torch(
        torch.where(inside, weights.gather(1, columns), 0.0), columns, lanes
    )
