"""The counter-based random stream: torch == Triton (interpreter) == the reference bit for bit,
independent of the batch, strictly inside (0, 1), and uniform / Exp(1) by chi-square and
Kolmogorov-Smirnov at fixed seeds, with negative controls that must reject."""

import math

import pytest
import torch

from specreg.errors import KernelInputError
from specreg.kernels.random_stream import stream_exponentials, stream_uniforms
from specreg.kernels.random_stream.reference import (
    stream_exponential_reference,
    stream_uniform_reference,
)
from specreg.testing.lossless import chi_square_p_value

#: Keys with both 32-bit halves in play: large, negative and past 2**32 values.
SEEDS = torch.tensor([0, 1, 2**40 + 5, -3, 12345, 2**63 - 1], dtype=torch.int64)
REQUESTS = torch.tensor([0, 7, 3, 2**33, -1, 5], dtype=torch.int64)
POSITIONS = torch.tensor([0, 1, 2**31, 99, 7, 2**32 + 1], dtype=torch.int64)


@pytest.mark.parametrize("kind", ["uniform", "exponential"])
def test_torch_triton_and_reference_agree_bit_for_bit(kind):
    draw = stream_uniforms if kind == "uniform" else stream_exponentials
    oracle = stream_uniform_reference if kind == "uniform" else stream_exponential_reference
    on_torch = draw(SEEDS, REQUESTS, POSITIONS, 5000, backend="torch")
    on_triton = draw(SEEDS, REQUESTS, POSITIONS, 5000, backend="triton")
    assert on_torch.dtype == on_triton.dtype == torch.float32
    assert torch.equal(on_torch.view(torch.int32), on_triton.view(torch.int32))
    expected = [
        [oracle(int(s), int(r), int(p), t) for t in range(0, 5000, 37)]
        for s, r, p in zip(SEEDS, REQUESTS, POSITIONS, strict=True)
    ]
    assert torch.equal(on_torch[:, ::37].double(), torch.tensor(expected, dtype=torch.float64))


def test_triton_tiles_and_int32_keys_give_the_same_values():
    wide = stream_uniforms(3, REQUESTS, POSITIONS, 3000, backend="triton")
    narrow = stream_uniforms(
        torch.full((6,), 3, dtype=torch.int32), REQUESTS.to(torch.int32),
        POSITIONS.to(torch.int32), 3000, backend="triton",
    )
    assert torch.equal(wide, stream_uniforms(3, REQUESTS, POSITIONS, 3000, backend="torch"))
    # int32 keys are the same int64 values sign-extended: only the truncated ones differ
    same = (REQUESTS.to(torch.int32).long() == REQUESTS) & (POSITIONS.to(torch.int32).long() == POSITIONS)
    assert torch.equal(wide[same], narrow[same])
    assert not torch.equal(wide[~same], narrow[~same])


def test_values_do_not_depend_on_the_batch():
    full = stream_uniforms(SEEDS, REQUESTS, POSITIONS, 257, backend="torch")
    order = torch.tensor([4, 0, 5, 2])
    for backend in ("torch", "triton"):
        part = stream_uniforms(SEEDS[order], REQUESTS[order], POSITIONS[order], 257, backend=backend)
        assert torch.equal(part, full[order])
        alone = stream_uniforms(SEEDS[3:4], REQUESTS[3:4], POSITIONS[3:4], 100, backend=backend)
        assert torch.equal(alone, full[3:4, :100])


def test_every_key_changes_the_values():
    base = stream_uniforms(SEEDS, REQUESTS, POSITIONS, 64, backend="torch")
    for changed in (
        (SEEDS + 1, REQUESTS, POSITIONS), (SEEDS, REQUESTS + 1, POSITIONS),
        (SEEDS, REQUESTS, POSITIONS + 1), (SEEDS + 2**32, REQUESTS, POSITIONS),
        (SEEDS, REQUESTS, POSITIONS + 2**32),
    ):
        other = stream_uniforms(*changed, 64, backend="torch")
        assert (other != base).float().mean() > 0.99


def test_values_lie_strictly_inside_the_unit_interval():
    rows = torch.arange(64, dtype=torch.int64)
    u = stream_uniforms(11, rows, rows * 3, 20000, backend="torch")
    e = stream_exponentials(11, rows, rows * 3, 20000, backend="torch")
    assert bool((u > 0).all()) and bool((u < 1).all())
    assert bool((e > 0).all()) and bool(torch.isfinite(e).all())


def _ks_p_value(sample: torch.Tensor, cdf) -> float:
    """Two-sided Kolmogorov-Smirnov p-value (asymptotic Kolmogorov series)."""
    x, _ = torch.sort(sample.double())
    n = x.numel()
    f = cdf(x)
    ranks = torch.arange(1, n + 1, dtype=torch.float64)
    d = float(torch.maximum(ranks / n - f, f - (ranks - 1) / n).max())
    t = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    return max(0.0, min(1.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * t * t) for k in range(1, 101))))


def test_uniforms_pass_chi_square_and_ks_and_a_biased_control_fails():
    rows = torch.arange(40, dtype=torch.int64)
    u = stream_uniforms(2024, rows, rows + 1000, 5000, backend="torch").flatten()
    bins = 256
    counts = torch.bincount((u * bins).long(), minlength=bins).double()
    flat = torch.full((bins,), 1.0 / bins, dtype=torch.float64)
    assert chi_square_p_value(counts, flat) > 1e-3
    assert _ks_p_value(u, lambda x: x) > 1e-3
    biased = u.pow(1.02)  # a 2 % tilt towards 0
    assert chi_square_p_value(torch.bincount((biased * bins).long(), minlength=bins).double(), flat) < 1e-6
    assert _ks_p_value(biased, lambda x: x) < 1e-6
    # pairs across neighbouring tokens: no correlation a 16x16 grid can see
    pairs = (u[:-1:2] * 16).long() * 16 + (u[1::2] * 16).long()
    assert chi_square_p_value(torch.bincount(pairs, minlength=256).double(), flat) > 1e-3
    stuck = (u[:-1:2] * 16).long() * 16 + (u[:-1:2] * 16).long()  # control: perfectly correlated
    assert chi_square_p_value(torch.bincount(stuck, minlength=256).double(), flat) < 1e-6


def test_exponentials_pass_ks_and_a_scaled_control_fails():
    rows = torch.arange(20, dtype=torch.int64)
    e = stream_exponentials(99, rows, rows, 5000, backend="triton").flatten()
    assert _ks_p_value(e, lambda x: 1 - torch.exp(-x)) > 1e-3
    assert _ks_p_value(e * 1.03, lambda x: 1 - torch.exp(-x)) < 1e-6


def test_neighbouring_keys_are_not_correlated():
    rows = torch.arange(2000, dtype=torch.int64)
    u = stream_uniforms(5, torch.zeros_like(rows), rows, 2, backend="torch")  # position + 1
    grid = torch.full((256,), 1.0 / 256, dtype=torch.float64)
    cells = (u[:-1, 0] * 16).long() * 16 + (u[1:, 0] * 16).long()
    assert chi_square_p_value(torch.bincount(cells, minlength=256).double(), grid) > 1e-3


def test_bad_keys_are_coded_errors():
    with pytest.raises(KernelInputError, match="SR901"):
        stream_uniforms(1.5, REQUESTS, POSITIONS, 4)
    with pytest.raises(KernelInputError, match="SR900"):
        stream_uniforms(1, REQUESTS, POSITIONS[:2], 4)
    with pytest.raises(KernelInputError, match="SR901"):
        stream_uniforms(1, REQUESTS.float(), POSITIONS, 4)
    with pytest.raises(KernelInputError, match="SR904"):
        stream_uniforms(1, REQUESTS, POSITIONS, -1)
    with pytest.raises(KernelInputError, match="SR902"):
        stream_uniforms(1, REQUESTS, POSITIONS.to("meta"), 4)
