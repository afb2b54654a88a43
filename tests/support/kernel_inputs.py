"""Hypothesis strategies for kernel inputs: plausible shapes with hostile dtypes, devices, values."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

INDEX_DTYPES = [torch.int64, torch.int32]
FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
ODD_DTYPES = [torch.int16, torch.uint8, torch.bool, torch.complex64]
HUGE = [2**31, -(2**31) - 1, 2**62, -(2**62)]


@st.composite
def index_tensor(draw, shape, low: int, high: int, *, odd: float = 0.15, huge: bool = True):
    """Ints mostly in [low, high), sometimes negative, huge, or of a wrong dtype or shape."""
    shape = tuple(shape)
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    values = torch.randint(low, max(high, low + 1), shape, generator=gen, dtype=torch.int64)
    if values.numel() and draw(st.floats(0, 1)) < odd:
        flat = values.view(-1)
        flat[draw(st.integers(0, flat.numel() - 1))] = draw(
            st.one_of(st.sampled_from(HUGE if huge else [-1]), st.integers(-5, high + 5))
        )
    dtype = draw(st.sampled_from(INDEX_DTYPES)) if draw(st.floats(0, 1)) > odd / 3 else draw(
        st.sampled_from(ODD_DTYPES + FLOAT_DTYPES)
    )
    values = values.clamp(-(2**31), 2**31 - 1) if dtype == torch.int32 else values
    return _maybe_reshape(draw, values.to(dtype), odd)


@st.composite
def float_tensor(draw, shape, *, probabilities: bool, odd: float = 0.15):
    """Floats (probabilities when asked), sometimes with NaN/Inf/negatives or a wrong dtype."""
    shape = tuple(shape)
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    values = torch.rand(shape, generator=gen, dtype=torch.float64)
    if probabilities:
        if values.numel() and draw(st.booleans()):
            values = values * (values > 0.5)  # sparse rows, sometimes all zero
        values = values / values.sum(-1, keepdim=True).clamp_min(1e-9) if values.dim() else values
    else:
        values = values * 20 - 10
    if values.numel() and draw(st.floats(0, 1)) < odd:
        flat = values.view(-1)
        flat[draw(st.integers(0, flat.numel() - 1))] = draw(
            st.sampled_from([float("nan"), float("inf"), -float("inf"), -1.0, 1e30])
        )
    dtype = draw(st.sampled_from(FLOAT_DTYPES)) if draw(st.floats(0, 1)) > odd / 3 else draw(
        st.sampled_from(ODD_DTYPES[:2] + INDEX_DTYPES)
    )
    return _maybe_reshape(draw, values.to(dtype), odd)


def _maybe_reshape(draw, tensor: torch.Tensor, odd: float) -> torch.Tensor:
    roll = draw(st.floats(0, 1))
    if roll < odd / 4:
        return tensor.reshape(-1)  # wrong rank
    if roll < odd / 2:
        return tensor.unsqueeze(0).expand(2, *tensor.shape)  # wrong rank, stride 0
    if roll < odd * 0.6 and tensor.dim() >= 1:
        return tensor.transpose(0, -1)  # non-contiguous, maybe wrong shape
    if roll < odd * 0.7:
        return tensor.to("meta")  # device check
    return tensor


def all_meta(*tensors) -> bool:
    present = [t for t in tensors if isinstance(t, torch.Tensor)]
    return bool(present) and all(t.device.type == "meta" for t in present)
