"""The pruned greedy Markov step (the CPU path) against the plain per-row reference (at these small
sizes with `min_work=0`, else the dense step answers): where the bias
bound prunes (the dense fallback forbidden, so the pruned code is what answers), at the bound
itself (a W2 row parallel to W1[prev] reaches Cauchy-Schwarz exactly), with exact ties, a tail
block, and where it must fall back (non-finite logits, weights too large to separate tokens)."""

from __future__ import annotations

import pytest
import torch
from specreg_dspark.kernels.markov_greedy import markov_greedy_step
from specreg_dspark.kernels.markov_greedy import torch_impl as impl
from specreg_dspark.kernels.markov_greedy.reference import markov_greedy_step_reference

from specreg import KernelInputError


@pytest.fixture
def no_fallback(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the pruned step fell back to the dense algorithm")

    monkeypatch.setattr(impl, "markov_greedy_step_chunked_torch", refuse)


def _spread_case(b, vocab, rank, seed, spread=20000):
    """Integers (every sum exact in float32): base logits spread over [-spread, spread], bias
    within [-rank, rank], and every row an exact tie for the maximum (a twin a third of the
    vocabulary on, in another block)."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(-spread, spread + 1, (b, vocab), generator=g).float()
    w1 = torch.randint(-1, 2, (vocab, rank), generator=g).float()
    w2 = torch.randint(-1, 2, (vocab, rank), generator=g).float()
    prev = torch.randint(0, vocab, (b,), generator=g)
    scores = base + w1[prev] @ w2.T
    best = scores.argmax(-1)
    twin = (best + vocab // 3) % vocab
    rows = torch.arange(b)
    base[rows, twin] += scores[rows, best] - scores[rows, twin]
    return base, prev, w1, w2


@pytest.mark.parametrize(("b", "vocab", "rank"), [(6, 1000, 4), (3, 300, 3), (4, 5000, 6), (4, 4096, 5)])
def test_pruned_step_equals_the_reference_where_it_prunes(no_fallback, b, vocab, rank):
    base, prev, w1, w2 = _spread_case(b, vocab, rank, seed=vocab)
    expected = markov_greedy_step_reference(base, prev, w1, w2)
    assert torch.equal(impl.markov_greedy_step_pruned_torch(base, prev, w1, w2, min_work=0),
                       expected)
    norms = impl.w2_row_norms(w2)
    assert torch.equal(impl.markov_greedy_step_pruned_torch(base, prev, w1, w2, w2_norms=norms,
                                                            min_work=0), expected)


@pytest.mark.parametrize(("winner", "lift", "want"), [
    (700, 1.0, 700),  # the bias at the bound makes a far-off token win by 1
    (700, 0.0, 5),  # ... or tie the maximum at a higher index: the lower index wins
    (2, 0.0, 2),  # ... or tie it at a lower index: the bound's token wins
    (999, 1.0, 999),  # in the tail block (1000 = 62 blocks of 16 + 8)
])
def test_a_token_reaching_the_bound_exactly_is_kept(no_fallback, winner, lift, want):
    vocab, rank = 1000, 4
    base = torch.zeros(1, vocab) - 30.0
    base[0, 5] = 10.0  # the base maximum, no bias (its W2 row is zero)
    w1, w2 = torch.zeros(vocab, rank), torch.zeros(vocab, rank)
    w1[9] = torch.tensor([0.0, 2.0, 0.0, 0.0])  # e = W1[prev], ||e|| = 2
    w2[winner] = torch.tensor([0.0, 3.0, 0.0, 0.0])  # parallel to e: bias 6 = ||W2|| ||e||
    w2[11] = torch.tensor([0.0, -3.0, 0.0, 0.0])  # another large row, opposite: never wins
    base[0, winner] = 10.0 - 6.0 + lift
    prev = torch.tensor([9])
    assert markov_greedy_step_reference(base, prev, w1, w2).tolist() == [want]
    assert impl.markov_greedy_step_pruned_torch(base, prev, w1, w2, min_work=0).tolist() == [want]


def test_non_finite_logits_and_wide_bounds_take_the_dense_algorithm(monkeypatch):
    calls = []

    def spy(name):
        dense = getattr(impl, name)

        def call(*args, **kwargs):
            calls.append(name)
            return dense(*args, **kwargs)
        monkeypatch.setattr(impl, name, call)

    spy("markov_greedy_step_torch")
    spy("markov_greedy_step_chunked_torch")
    vocab, rank = 40, 3
    g = torch.Generator().manual_seed(0)
    w1, w2 = torch.randn(vocab, rank, generator=g), torch.randn(vocab, rank, generator=g)
    prev = torch.tensor([0, 1, 2, 3])
    base = torch.randn(4, vocab, generator=g)
    base[0] = float("-inf")  # all -inf: token 0, as torch.argmax
    base[1, 7] = float("inf")
    base[2, 3] = float("nan")
    got = impl.markov_greedy_step_pruned_torch(base, prev, w1, w2, min_work=0)
    assert calls == ["markov_greedy_step_torch"]
    assert torch.equal(got, torch.argmax(base + w1[prev] @ w2.T, -1))  # the previous CPU path's
    assert got.tolist()[:3] == [0, 7, 3]
    # finite, but weights so large that no block is out of reach: chunked, the same answer
    calls.clear()
    base = torch.randn(4, vocab, generator=g) * 0.01
    big1, big2 = w1 * 100, w2 * 100
    got = impl.markov_greedy_step_pruned_torch(base, prev, big1, big2, min_work=0)
    assert calls == ["markov_greedy_step_chunked_torch"]
    assert torch.equal(got, markov_greedy_step_reference(base, prev, big1, big2))


def test_the_wrapper_runs_the_pruned_step_on_cpu(monkeypatch):
    """At b x rank x V >= PRUNE_MIN_WORK the CPU path prunes (the dense fallback forbidden),
    the norms given or not; below it the dense step answers."""
    base, prev, w1, w2 = _spread_case(4, 1 << 20, 4, seed=7, spread=1 << 23)
    assert 4 * 4 * (1 << 20) >= impl.PRUNE_MIN_WORK
    expected = impl.markov_greedy_step_torch(base, prev, w1, w2)  # integers: exact, first max
    small = _spread_case(2, 300, 3, seed=3)
    monkeypatch.setattr(impl, "markov_greedy_step_chunked_torch", lambda *a, **k: 1 / 0)
    norms = impl.w2_row_norms(w2)
    assert torch.equal(markov_greedy_step(base, prev, w1, w2, backend="torch"), expected)
    assert torch.equal(markov_greedy_step(base, prev, w1, w2, backend="torch", w2_norms=norms),
                       expected)
    with pytest.raises(ZeroDivisionError):  # small: the dense (chunked) step was asked
        markov_greedy_step(*small, backend="torch")


def test_w2_norms_are_checked():
    base, prev, w1, w2 = _spread_case(2, 50, 3, seed=1)
    for bad in (torch.ones(49), torch.ones(50, dtype=torch.float64)):
        with pytest.raises(KernelInputError) as info:
            markov_greedy_step(base, prev, w1, w2, backend="torch", w2_norms=bad)
        assert info.value.code.startswith("SR90")
