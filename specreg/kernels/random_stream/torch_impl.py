"""The torch implementation of the counter-based random stream: integer tensor ops only.

The 32-bit words live in int64 tensors (values in [0, 2**32)); a product of two such values is
taken modulo 2**64 by the int64 multiply (two's complement wrap-around, as every torch backend
computes it) and masked to its low 32 bits, which are exact. The two key lanes run stacked in one
tensor, so a key costs six block steps of tensor ops, not twelve. CPU and every accelerator
compute the same words bit for bit (tested against the Python-int reference). Inputs broadcast
together; every allocation follows the inputs' device.
"""

from __future__ import annotations

import torch

from specreg.kernels.random_stream.types import ACCEPT_ROLE, LANE_STARTS, MASK32, UNIFORM_BITS


def _mul32(value: torch.Tensor, constant: int) -> torch.Tensor:
    """(value * constant) mod 2**32 for value in [0, 2**32)."""
    return (value * constant) & MASK32


def _fmix32_int(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK32
    return h ^ (h >> 16)


#: Each lane's start value after the finalizer.
_LANE_HASHES = tuple(_fmix32_int(start) for start in LANE_STARTS)


def _rotl(x: torch.Tensor, r: int) -> torch.Tensor:
    return ((x << r) | (x >> (32 - r))) & MASK32


def fmix32(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def absorb(h: torch.Tensor, word: torch.Tensor) -> torch.Tensor:
    k = _mul32(word & MASK32, 0xCC9E2D51)
    k = _mul32(_rotl(k, 15), 0x1B873593)
    h = _rotl(h ^ k, 13)
    return fmix32((_mul32(h, 5) + 0xE6546B64) & MASK32)


def key_words_torch(
    seed: torch.Tensor, request: torch.Tensor, position: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two key lanes (int64 tensors of 32-bit values) of int64 (seed, request, position)."""
    seed, request, position = torch.broadcast_tensors(
        seed.to(torch.int64), request.to(torch.int64), position.to(torch.int64)
    )
    h = torch.stack([torch.full_like(seed, start) for start in _LANE_HASHES])
    for value in (seed, request, position):
        h = absorb(h, value & MASK32)
        h = absorb(h, (value >> 32) & MASK32)
    return h[0], h[1]


def draw_lanes_torch(
    keys: torch.Tensor, role: torch.Tensor | int, positions: torch.Tensor
) -> torch.Tensor:
    """int64 [..., 2] key lanes of the draws (request key, role, absolute position): the stream
    key (seed, request, position) = (keys, role, positions), broadcast together."""
    role = torch.as_tensor(role, dtype=torch.int64, device=keys.device)
    k0, k1 = key_words_torch(keys, role, positions)
    return torch.stack([k0, k1], dim=-1)


def accept_coins_torch(
    keys: torch.Tensor, positions: torch.Tensor, drafts: torch.Tensor
) -> torch.Tensor:
    """float32 [b, g] acceptance uniforms: draft `drafts[r, i]` (any int64, a -1 padding id
    included) at absolute position `positions[r] + i`, under request key `keys[r]`, one
    independent uniform per (position, draft token) in the ACCEPT role."""
    g = drafts.shape[1]
    columns = torch.arange(g, dtype=torch.int64, device=drafts.device)
    k0, k1 = key_words_torch(
        keys.to(torch.int64)[:, None], torch.full_like(columns, ACCEPT_ROLE),
        positions.to(torch.int64)[:, None] + columns,
    )
    return uniforms_of(token_words_torch((k0, k1), drafts.to(torch.int64) & MASK32))


def token_words_torch(
    key: tuple[torch.Tensor, torch.Tensor], tokens: torch.Tensor
) -> torch.Tensor:
    """The words of `tokens` (int64, in [0, 2**32)) under key lanes that broadcast with them."""
    return absorb(absorb(key[0], tokens.to(torch.int64)), key[1])


def uniforms_of(words: torch.Tensor) -> torch.Tensor:
    """float32 uniforms in (0, 1): ((word >> 9) + 0.5) * 2**-23 (exact in float32)."""
    top = (words >> (32 - UNIFORM_BITS)).to(torch.float32)
    return (top + 0.5) * 2.0**-UNIFORM_BITS


def exponentials_of(words: torch.Tensor) -> torch.Tensor:
    """float32 Exp(1) values: -log((word + 0.5) * 2**-32) in float64, rounded to float32."""
    return (-torch.log((words.to(torch.float64) + 0.5) * 2.0**-32)).to(torch.float32)


def stream_words_torch(
    seed: torch.Tensor, request: torch.Tensor, position: torch.Tensor, tokens: torch.Tensor
) -> torch.Tensor:
    """Words of (seed, request, position) [...] (broadcast) at `tokens`, shape [..., T]
    when `tokens` is 1-D [T]: one row of the stream per key."""
    key = key_words_torch(seed, request, position)
    return token_words_torch((key[0][..., None], key[1][..., None]), tokens)
