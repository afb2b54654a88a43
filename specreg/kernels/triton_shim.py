"""The one place specreg imports Triton: `triton` and `tl`, or None when it is not installed.

Kernel modules write `from specreg.kernels.triton_shim import triton, tl` and define their
`@triton.jit` functions under `if triton is not None:`. `vocab_tile` is the one rule for the
vocabulary tile (BLOCK_V) every Triton kernel streams the vocabulary in.
"""

from __future__ import annotations

from specreg.errors import KernelInputError, problem

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is optional
    triton = None
    tl = None

#: Default vocabulary tile of the Triton kernels.
DEFAULT_BLOCK_V = 2048


def _next_power_of_2(value: int) -> int:
    return 1 << max(value - 1, 0).bit_length()


def vocab_tile(vocab: int, block_v: int | None, *, default: int = DEFAULT_BLOCK_V) -> int:
    """BLOCK_V for a vocabulary of `vocab`: `block_v` as given (a power of two >= 16), or the
    default capped at the vocabulary rounded up to a power of two (at least 16)."""
    if block_v is None:
        return max(16, min(default, _next_power_of_2(max(vocab, 1))))
    if isinstance(block_v, bool) or not isinstance(block_v, int) or block_v < 16 or block_v & (block_v - 1):
        raise KernelInputError(
            problem(
                "SR904",
                f"block_v={block_v!r} is not a power of two >= 16",
                accepted="a power of two >= 16, or None",
                fix="pass block_v=None",
                field="block_v",
            )
        )
    return block_v
