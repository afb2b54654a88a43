"""Sampling primitives: exponential race, seeded coins, inverse CDF, residuals."""

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from specreg.errors import KernelInputError
from specreg.kernels.sampling import (
    exponential_race_sample,
    inverse_cdf_sample,
    residual_weights,
    uniform_coins,
)
from specreg.kernels.sampling.torch_impl import MAX_SEEDED_COIN, hash_coins

P_THRESHOLD = 1e-3


def test_exponential_race_matches_distribution():
    probs = torch.tensor([0.05, 0.0, 0.45, 0.2, 0.3, 0.0])
    samples = 50_000
    gen = torch.Generator().manual_seed(1234)
    draws = exponential_race_sample(probs.expand(samples, -1), generator=gen)
    counts = torch.bincount(draws, minlength=6).numpy()
    assert counts[1] == 0 and counts[5] == 0
    support = probs.numpy() > 0
    expected = probs.double().numpy()[support]
    result = chisquare(counts[support], expected / expected.sum() * counts.sum())
    assert result.pvalue > P_THRESHOLD


def test_exponential_race_detects_wrong_distribution():
    """Negative control: the same chi-square rejects a slightly different target."""
    probs = torch.tensor([0.25, 0.25, 0.25, 0.25])
    gen = torch.Generator().manual_seed(99)
    draws = exponential_race_sample(probs.expand(50_000, -1), generator=gen)
    counts = torch.bincount(draws, minlength=4).numpy()
    wrong = np.array([0.27, 0.25, 0.25, 0.23]) * 50_000
    assert chisquare(counts, wrong).pvalue < P_THRESHOLD


def test_exponential_race_unnormalised_and_bf16():
    probs = torch.tensor([[0.0, 3.0, 1.0]], dtype=torch.bfloat16).expand(40_000, -1)
    gen = torch.Generator().manual_seed(5)
    counts = torch.bincount(exponential_race_sample(probs, generator=gen), minlength=3)
    assert counts[0] == 0
    assert chisquare(counts[1:].numpy(), [30_000, 10_000]).pvalue > P_THRESHOLD


def test_exponential_race_with_given_noise_is_deterministic():
    probs = torch.tensor([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    noise = torch.tensor([[1.0, 0.1, 1.0], [0.0, 1.0, 1.0]])  # 0 is clamped to tiny
    assert exponential_race_sample(probs, noise=noise).tolist() == [1, 0]


def test_exponential_race_rejects_bad_values():
    with pytest.raises(KernelInputError) as err:
        exponential_race_sample(torch.tensor([[0.5, float("nan")]]))
    assert err.value.code == "SR904"
    with pytest.raises(KernelInputError) as err:
        exponential_race_sample(torch.tensor([[0.5, 0.5]]), noise=torch.tensor([[1.0, -1.0]]))
    assert err.value.code == "SR904"
    with pytest.raises(KernelInputError) as err:
        exponential_race_sample(torch.tensor([0.5, 0.5]))
    assert err.value.code == "SR900"


def test_seeded_coins_are_deterministic_and_in_range():
    offsets = torch.tensor([0, 7, 7, 2**40 + 3])
    first = uniform_coins((4, 6), device="cpu", seed=11, offsets=offsets)
    again = uniform_coins((4, 6), device="cpu", seed=11, offsets=offsets.clone())
    assert first.dtype == torch.float32
    assert torch.equal(first, again)
    assert torch.equal(first[1], first[2])  # same offset, same coins
    assert not torch.equal(first[0], first[1])  # different offset
    assert not torch.equal(first[1], first[3])  # high offset bits count
    other_seed = uniform_coins((4, 6), device="cpu", seed=12, offsets=offsets)
    assert not torch.equal(first, other_seed)
    assert len(set(first[0].tolist())) == 6  # columns differ


def test_seeded_coins_are_uniform():
    coins = uniform_coins((20_000, 8), device="cpu", seed=3, offsets=torch.arange(20_000))
    assert float(coins.min()) >= 0.0 and float(coins.max()) <= MAX_SEEDED_COIN < 1.0
    counts = np.histogram(coins.numpy().ravel(), bins=20, range=(0.0, 1.0))[0]
    assert chisquare(counts).pvalue > P_THRESHOLD


def _reference_hash(seed: int, offset: int, column: int) -> float:
    """Pure-Python murmur3-style hash with the same word order as `hash_coins`."""
    mask = 0xFFFFFFFF

    def fmix(h):
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & mask
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & mask
        return h ^ (h >> 16)

    def absorb(h, word):
        k = (word * 0xCC9E2D51) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * 0x1B873593) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
        return fmix(h)

    h = fmix((seed & mask) ^ 0x9E3779B9)
    for word in ((seed >> 32) & mask, offset & mask, (offset >> 32) & mask, column & mask):
        h = absorb(h, word)
    return (h >> 8) / 2**24


def test_seeded_coins_match_pure_integer_reference():
    """The torch int64 arithmetic is exact 32-bit arithmetic (what CUDA computes identically)."""
    seed = 0xDEADBEEF12345
    offsets = [0, 1, 4096, 2**31 + 5, 2**33 - 1]
    got = hash_coins(seed, torch.tensor(offsets)[:, None], torch.arange(5))
    for i, offset in enumerate(offsets):
        for column in range(5):
            assert float(got[i, column]) == _reference_hash(seed, offset, column)


def test_unseeded_coins_use_generator():
    a = uniform_coins((3, 4), device="cpu", generator=torch.Generator().manual_seed(1))
    b = uniform_coins((3, 4), device="cpu", generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert float(a.min()) >= 0 and float(a.max()) < 1


def test_seeded_coins_offsets_shape_checked():
    with pytest.raises(KernelInputError) as err:
        uniform_coins((3, 4), device="cpu", seed=1, offsets=torch.zeros(4, dtype=torch.long))
    assert err.value.code == "SR900"


def test_inverse_cdf_sample_known_answers():
    weights = torch.tensor([[0.0, 1.0, 0.0, 1.0]] * 4 + [[0.0, 0.0, 2.0, 0.0]])
    coins = torch.tensor([0.0, 0.49, 0.5, 0.999999, 0.7])
    assert inverse_cdf_sample(weights, coins).tolist() == [1, 1, 3, 3, 2]


def test_inverse_cdf_never_returns_zero_weight_index():
    weights = torch.tensor([[1e-30, 0.0, 0.0], [0.3, 0.7, 0.0]])
    coins = torch.tensor([0.9999999, 0.9999999])
    assert inverse_cdf_sample(weights, coins).tolist() == [0, 1]


def test_residual_weights():
    p = torch.tensor([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])
    q = torch.tensor([[0.1, 0.6, 0.3], [0.2, 0.3, 0.5]])
    res = residual_weights(p, q)
    assert torch.allclose(res[0], torch.tensor([0.4, 0.0, 0.0]))
    assert torch.equal(res[1], p[1])  # no residual mass: falls back to p
    removed = residual_weights(p, exclude=torch.tensor([0, -1]))
    assert torch.equal(removed[0], torch.tensor([0.0, 0.3, 0.2]))
    assert torch.equal(removed[1], p[1])


def test_cpu_exp_is_torch_exp_flushed_below_the_floor_and_the_same_bits_anywhere():
    """`exp_`, the one exp of the torch sampling path: torch's exp where x > EXP_FLOOR, 0 at or
    below it (so no weight is subnormal), NaN kept; and a value's result does not depend on
    the tensor it sits in (one element alone, gathered, strided, in a long row), which
    exp2(x * log2 e) did not give (its scalar tail differs from its vector body)."""
    from specreg.kernels.exp_log import EXP_FLOOR, exp_

    x = torch.linspace(-90.0, 0.0, 200_001)
    got = exp_(x.clone())
    above = x > EXP_FLOOR
    assert torch.equal(got[above], torch.exp(x[above]))
    assert bool((got[~above] == 0).all())
    edges = exp_(torch.tensor([float("-inf"), 0.0, -1e30, EXP_FLOOR, float("nan")]))
    assert edges[:4].tolist() == [0.0, 1.0, 0.0, 0.0] and edges[4].isnan()
    gen = torch.Generator().manual_seed(0)
    row = 30 * torch.randn(100_003, generator=gen) - 20
    row[::7] = float("-inf")
    whole = exp_(row.clone())
    alone = torch.stack([exp_(row[i : i + 1].clone())[0] for i in range(0, 3000)])
    assert torch.equal(alone, whole[:3000])
    picked = torch.randint(0, row.numel(), (5000,), generator=gen)
    assert torch.equal(exp_(row[picked]), whole[picked])
    assert torch.equal(exp_(row[1::3].clone()), whole[1::3])
