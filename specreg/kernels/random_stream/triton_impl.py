"""The Triton implementation of the counter-based random stream: uint32 integer ops in-kernel.

`key_words` and `token_word` are device functions the verify kernels call to draw their
uniforms and exponentials where they need them (the same words as `torch_impl`, bit for bit);
`uniform_of` and `exponential_of` turn a word into a float32 uniform in (0, 1) and a float32
Exp(1) value. `_random_stream_kernel` fills a [rows, T] table (one program per row and tile),
the stream's public Triton path and its test against torch.
"""

from __future__ import annotations

import torch

from specreg.kernels.triton_shim import tl, triton, vocab_tile

if triton is not None:

    @triton.jit
    def _mul32(x, c: tl.constexpr):
        return x * tl.full(x.shape, c, tl.uint32)

    @triton.jit
    def _rotl(x, r: tl.constexpr):
        return (x << r) | (x >> (32 - r))

    @triton.jit
    def fmix32(h):
        h = h ^ (h >> 16)
        h = _mul32(h, 0x85EBCA6B)
        h = h ^ (h >> 13)
        h = _mul32(h, 0xC2B2AE35)
        return h ^ (h >> 16)

    @triton.jit
    def absorb(h, word):
        k = _mul32(word, 0xCC9E2D51)
        k = _mul32(_rotl(k, 15), 0x1B873593)
        h = _rotl(h ^ k, 13)
        return fmix32(_mul32(h, 5) + tl.full(h.shape, 0xE6546B64, tl.uint32))

    @triton.jit
    def _low(value):
        return (value & 0xFFFFFFFF).to(tl.uint32)

    @triton.jit
    def _high(value):
        return ((value >> 32) & 0xFFFFFFFF).to(tl.uint32)

    @triton.jit
    def _lane(start, seed, request, position):
        h = fmix32(tl.full(seed.shape, start, tl.uint32))
        h = absorb(h, _low(seed))
        h = absorb(h, _high(seed))
        h = absorb(h, _low(request))
        h = absorb(h, _high(request))
        h = absorb(h, _low(position))
        return absorb(h, _high(position))

    @triton.jit
    def key_words(seed, request, position):
        """The two uint32 key lanes of int64 (seed, request, position)."""
        seed = seed.to(tl.int64)
        request = request.to(tl.int64)
        position = position.to(tl.int64)
        return (_lane(0x9E3779B9, seed, request, position),
                _lane(0x85EBCA77, seed, request, position))

    @triton.jit
    def token_word(k0, k1, tokens):
        """The uint32 word of int64 `tokens` under the key lanes (k0, k1)."""
        return absorb(absorb(k0, _low(tokens.to(tl.int64))), k1)

    @triton.jit
    def uniform_of(word):
        """float32 in (0, 1): ((word >> 9) + 0.5) * 2**-23."""
        return ((word >> 9).to(tl.float32) + 0.5) * 1.1920928955078125e-07

    @triton.jit
    def exponential_of(word):
        """float32 Exp(1): -log((word + 0.5) * 2**-32) in float64, rounded to float32."""
        return (-tl.log((word.to(tl.float64) + 0.5) * 2.3283064365386963e-10)).to(tl.float32)

    @triton.jit
    def _random_stream_kernel(
        seed_ptr, request_ptr, position_ptr, out_ptr, num_tokens,
        EXPONENTIAL: tl.constexpr, BLOCK_T: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        tokens = tl.program_id(1).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T).to(tl.int64)
        inside = tokens < num_tokens
        k0, k1 = key_words(
            tl.load(seed_ptr + row), tl.load(request_ptr + row), tl.load(position_ptr + row)
        )
        words = token_word(k0, k1, tokens)
        if EXPONENTIAL:
            tl.store(out_ptr + row * num_tokens + tokens, exponential_of(words), mask=inside)
        else:
            tl.store(out_ptr + row * num_tokens + tokens, uniform_of(words), mask=inside)


def random_stream_triton(
    seed: torch.Tensor,
    request: torch.Tensor,
    position: torch.Tensor,
    num_tokens: int,
    *,
    exponential: bool,
) -> torch.Tensor:
    """[rows, num_tokens] of the stream for int64 key rows `seed`, `request`, `position` [rows]:
    float32 uniforms, or float32 exponentials."""
    rows = seed.shape[0]
    out = torch.empty((rows, num_tokens), dtype=torch.float32, device=seed.device)
    if rows == 0 or num_tokens == 0:
        return out
    block = vocab_tile(num_tokens, None, default=1024)
    _random_stream_kernel[(rows, triton.cdiv(num_tokens, block))](
        seed, request, position, out, num_tokens, EXPONENTIAL=exponential, BLOCK_T=block,
    )
    return out
