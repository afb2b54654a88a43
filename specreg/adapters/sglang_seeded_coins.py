"""SGLang's seeded verify coins on a CPU, for `eagle_utils._seeded_verify_coins`.

SGLang derives a seeded request's acceptance coins from murmur_hash32 of (seed, sequence
length, column) in its compiled `sgl_kernel`, which a CPU build lacks; `seeded_verify_coins`
computes the same coins in torch there (SGLang's own function everywhere else), so seeded
requests decide acceptance exactly as SGLang does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import INDEX_DTYPES, check_dtype

_MASK32 = 0xFFFFFFFF
#: The largest float32 below one: SGLang clamps its coins to it (half-open [0, 1)).
_MAX_COIN = 1.0 - 2**-24


def _rotl32(x: torch.Tensor, r: int) -> torch.Tensor:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _murmur_mix(h: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    k = _rotl32((k * 0xCC9E2D51) & _MASK32, 15)
    h = _rotl32(h ^ ((k * 0x1B873593) & _MASK32), 13)
    return (h * 5 + 0xE6546B64) & _MASK32


def murmur_hash32(seed: torch.Tensor, positions: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """SGLang's `murmur_hash32(seed [n], positions [n], cols [m])` -> int64 [n, m] in
    [0, 2^32): the 64-bit seed's two halves, the position and the column mixed in that order,
    then MurmurHash3's finaliser (int64 arithmetic; products keep their low 32 bits)."""
    s = seed.to(torch.int64)
    h = torch.zeros_like(s)
    h = _murmur_mix(h, s & _MASK32)
    h = _murmur_mix(h, (s >> 32) & _MASK32)
    h = _murmur_mix(h, positions.to(torch.int64) & _MASK32)[:, None]
    h = _murmur_mix(h, (cols.to(torch.int64) & _MASK32)[None, :]) ^ 16
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & _MASK32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & _MASK32
    return h ^ (h >> 16)


def seeded_verify_coins(
    original: Callable[..., Any], *, sampling_seed: torch.Tensor, seq_lens: torch.Tensor,
    draft_token_num: int, device: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """AROUND hook of `_seeded_verify_coins`: on a CPU, SGLang's coins computed here (it needs
    its compiled CPU kernel for the hash); elsewhere SGLang's own function."""
    if torch.device(device).type != "cpu":
        return original(sampling_seed=sampling_seed, seq_lens=seq_lens,
                        draft_token_num=draft_token_num, device=device)
    check_dtype("sampling_seed", sampling_seed, INDEX_DTYPES)
    if sampling_seed.numel() and bool((sampling_seed < 0).any()):
        raise KernelInputError(
            problem("SR915", "sampling_seed holds a negative seed", accepted="seeds >= 0",
                    fix="pass sampling_seed >= 0 in the request's sampling parameters",
                    field="sampling_seed")
        )
    cols = torch.arange(draft_token_num + 1, device=seq_lens.device, dtype=torch.int64)
    uniforms = murmur_hash32(sampling_seed, seq_lens, cols).to(torch.float64) / _MASK32
    coins = uniforms[:, :draft_token_num].to(torch.float32).clamp_(max=_MAX_COIN).contiguous()
    final = uniforms[:, draft_token_num].to(torch.float32).clamp_(max=_MAX_COIN).contiguous()
    return coins, final
