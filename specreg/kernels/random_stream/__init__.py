"""The counter-based random stream: uniforms and exponentials keyed on (seed, request, position,
token), the same on every backend and in every batch.

A value is a pure integer hash of its four keys (murmur3 block steps over their 32-bit halves,
see `reference`), so a request's draws depend on nothing but its own (seed, request id,
position): not on the batch it shares, its place in it, the device or the backend. The torch
implementation (int64 tensors holding 32-bit words) and the Triton one (uint32 in-kernel) compute
the same words bit for bit; from a word:

- the uniform is `((word >> 9) + 0.5) * 2**-23`, a float32 strictly inside (0, 1) (the smallest
  2**-24, the largest 1 - 2**-24), exact on every backend;
- the exponential is `-log((word + 0.5) * 2**-32)`, computed in float64 and rounded to float32
  (so it never is 0 or infinite). Float64 `log` of two math libraries differs by at most an ulp,
  which changes the rounded float32 only within 2**-52 of a rounding boundary.

Verifiers and drafters key their draws by (request key, role, absolute position): the stream's
(seed, request, position) words hold (the request's key, the draw's role, the token's position
in the request's output); the roles (`types.SAMPLE_ROLE`, `RESIDUAL_ROLE`, `ACCEPT_ROLE`) are
independent streams of one position. A request's key is its seed when it has one, else a key
drawn once for it (`fresh_keys`).

The wrappers here give the stream's rows as tensors, validated. The verifiers and drafters draw
where they need to through the unchecked pieces exported here: the torch ones (`draw_lanes_torch`
and `key_words_torch`: a draw's key lanes; `token_words_torch`: the words of tokens under them;
`uniforms_of`, `exponentials_of`; `accept_coins_torch`: the acceptance uniforms) and, where
Triton is installed, the device functions the verify kernels fuse (`key_words`, `token_word`,
`uniform_of`, `exponential_of`), the same words bit for bit.

Family: `reference` (Python ints, the oracle), `torch_impl`, `triton_impl`.
"""

from __future__ import annotations

from typing import Literal

import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import check_dtype, check_same_device, check_shape
from specreg.kernels.random_stream.torch_impl import (
    accept_coins_torch,
    draw_lanes_torch,
    exponentials_of,
    key_words_torch,
    stream_words_torch,
    token_words_torch,
    uniforms_of,
)
from specreg.kernels.random_stream.triton_impl import random_stream_triton
from specreg.kernels.triton_shim import triton

if triton is not None:
    from specreg.kernels.random_stream.triton_impl import (
        exponential_of,
        key_words,
        token_word,
        uniform_of,
    )

__all__ = [
    "accept_coins_torch",
    "draw_lanes_torch",
    "exponentials_of",
    "fresh_keys",
    "key_words_torch",
    "stream_exponentials",
    "stream_keys",
    "stream_uniforms",
    "token_words_torch",
    "uniforms_of",
]
if triton is not None:
    __all__ += ["exponential_of", "key_words", "token_word", "uniform_of"]

#: A wrapper's `backend=` argument: None reads SPECREG_KERNEL_BACKEND.
BackendChoice = Literal["auto", "torch", "triton"] | None

_INDEX_DTYPES = (torch.int32, torch.int64)


def _checked_keys(
    seed: torch.Tensor | int, requests: torch.Tensor, positions: torch.Tensor, num_tokens: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    check_shape("requests", requests, (None,))
    check_dtype("requests", requests, _INDEX_DTYPES)
    rows = requests.shape[0]
    check_shape("positions", positions, (rows,))
    check_dtype("positions", positions, _INDEX_DTYPES)
    if isinstance(seed, torch.Tensor):
        check_shape("seed", seed, (rows,))
        check_dtype("seed", seed, _INDEX_DTYPES)
    elif isinstance(seed, bool) or not isinstance(seed, int):
        raise KernelInputError(
            problem(
                "SR901",
                f"seed must be an int or an int64 tensor [rows], got {type(seed).__name__}",
                accepted="int, or an int32/int64 tensor of shape [rows]",
                fix="pass seed=int(seed)",
                field="seed",
            )
        )
    else:
        seed = torch.full((rows,), seed, dtype=torch.int64, device=requests.device)
    check_same_device(requests=requests, positions=positions, seed=seed)
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 0:
        raise KernelInputError(
            problem(
                "SR904",
                f"num_tokens={num_tokens!r} is not a non-negative int",
                accepted="an int >= 0 (the vocabulary size, say)",
                fix="pass num_tokens=vocab_size",
                field="num_tokens",
            )
        )
    return seed.to(torch.int64), requests.to(torch.int64), positions.to(torch.int64)


def _stream(
    seed: torch.Tensor | int,
    requests: torch.Tensor,
    positions: torch.Tensor,
    num_tokens: int,
    backend: BackendChoice,
    *,
    exponential: bool,
) -> torch.Tensor:
    seed, requests, positions = _checked_keys(seed, requests, positions, num_tokens)
    if select_backend(requests, requested=backend) == "triton":
        return random_stream_triton(
            seed.contiguous(), requests.contiguous(), positions.contiguous(), num_tokens,
            exponential=exponential,
        )
    tokens = torch.arange(num_tokens, dtype=torch.int64, device=requests.device)
    words = stream_words_torch(seed, requests, positions, tokens)
    return exponentials_of(words) if exponential else uniforms_of(words)


def stream_uniforms(
    seed: torch.Tensor | int,
    requests: torch.Tensor,
    positions: torch.Tensor,
    num_tokens: int,
    *,
    backend: BackendChoice = None,
) -> torch.Tensor:
    """float32 [rows, num_tokens]: row k holds the uniforms of (seed[k], requests[k],
    positions[k], token) for tokens 0..num_tokens-1, each strictly inside (0, 1).

    `seed` is an int (every row) or an int tensor [rows]; `requests` and `positions` are int
    tensors [rows] on one device (any int64 values: negative ones are hashed as their two's
    complement). `backend`: None reads SPECREG_KERNEL_BACKEND, or 'torch' / 'triton'.
    """
    return _stream(seed, requests, positions, num_tokens, backend, exponential=False)


def stream_exponentials(
    seed: torch.Tensor | int,
    requests: torch.Tensor,
    positions: torch.Tensor,
    num_tokens: int,
    *,
    backend: BackendChoice = None,
) -> torch.Tensor:
    """float32 [rows, num_tokens] of Exp(1) values, `-log(u)` of the stream's words (see the
    module docstring); same keys and arguments as `stream_uniforms`."""
    return _stream(seed, requests, positions, num_tokens, backend, exponential=True)


def fresh_keys(
    rows: int, device: torch.device | str, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """int64 [rows] request keys drawn from `generator` (torch's default one when None), all 64
    bits: the key of a request that has no seed, drawn once for it. The only draw outside the
    stream; the stream's values under distinct keys are independent."""
    where = generator.device if generator is not None else torch.device(device)
    drawn = torch.randint(
        -(2**63), 2**63 - 1, (rows,), dtype=torch.int64, device=where, generator=generator
    )
    return drawn.to(device)


def stream_keys(
    rows: int,
    device: torch.device | str,
    keys: torch.Tensor | None,
    positions: torch.Tensor | None,
    *,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (keys, positions) int64 [rows] a verifier keys its draws by: `keys` as given, else
    `fresh_keys` from `generator`; `positions` as given, else 0. Shapes and dtypes are checked
    by the callers' validation."""
    keys = fresh_keys(rows, device, generator=generator) if keys is None else keys
    if positions is None:
        positions = torch.zeros(rows, dtype=torch.int64, device=device)
    return keys.to(torch.int64).contiguous(), positions.to(torch.int64).contiguous()
