"""The pivot search of the torch filter (`specreg.kernels.pivot`) against the sorted
reference, on the rows that break pivot searches: ties at the pivot, all-equal rows, -inf,
top_p = 1, top_k = V, min_p = 0, very peaked rows and float32 rounding at the top-p boundary.

Each case runs at the real fold (1024 columns, V >= 4096) and at a tiny fold (8 columns) so
that short rows, remainder columns and ties past the ranked column maxima are all reached.
Checked: the kept set (threshold and min-p) equals the reference's, the filtered row matches
it, and the statistics equal the sorted topk-prefix path's (the pivot search switched off).
"""

import pytest
import torch

import specreg.kernels.filtering.torch_impl as torch_impl
import specreg.kernels.pivot as pivot_entry
import specreg.kernels.pivot.torch_impl as pivot
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.filtering.torch_impl import filtered_rows, row_stats, scaled_scores
from specreg.contract.filter_order import FILTER_RULES
from specreg.kernels.pivot.reference import prefix_reference

FOLDS = {"real": (1024, 4096, 256), "tiny": (8, 32, 4)}


@pytest.fixture(params=sorted(FOLDS))
def fold(request, monkeypatch):
    columns, min_vocab, ranked = FOLDS[request.param]
    monkeypatch.setattr(pivot, "PIVOT_COLUMNS", columns)
    monkeypatch.setattr(pivot_entry, "PIVOT_COLUMNS", columns)  # as the filter reads it
    monkeypatch.setattr(torch_impl, "PIVOT_MIN_VOCAB", min_vocab)
    monkeypatch.setattr(pivot, "PIVOT_RANKED", ranked)
    monkeypatch.setattr(torch_impl, "PIVOT_MAX_K", 256)
    return request.param


def _rows(kind, vocab, gen):
    if kind == "gaussian":
        return 4.0 * torch.randn(3, vocab, generator=gen)
    if kind == "ties":  # few distinct values: every pivot sits on a tie
        return torch.randint(-3, 3, (3, vocab), generator=gen).float()
    if kind == "all_equal":
        return torch.zeros(3, vocab)
    if kind == "neg_inf":  # two thirds of each row masked out, one row almost entirely
        rows = torch.randn(3, vocab, generator=gen)
        rows[:, ::3] = float("-inf")
        rows[:, 1::3] = float("-inf")
        rows[2, 5:] = float("-inf")
        return rows
    if kind == "peaked":  # one token holds almost all the mass
        rows = torch.randn(3, vocab, generator=gen)
        rows[:, 7] = 40.0
        return rows
    raise AssertionError(kind)


def _check(scores, temperature, top_k, top_p, min_p, order):
    rows = scores.shape[0]
    t = torch.full((rows,), temperature)
    k, p, m = torch.tensor(top_k), torch.tensor(top_p), torch.tensor(min_p)
    z = scaled_scores(scores, t, probabilities=False)
    stats = row_stats(z.clone(), k, p, m, FILTER_RULES[order])
    got = filtered_rows(scores, t, stats, m, probabilities=False)
    for i in range(rows):
        want = filtered_distribution(
            scores[i], temperature=temperature, top_k=top_k[i], top_p=top_p[i],
            min_p=min_p[i], order=order,
        )  # fmt: skip
        weight = (z[i] - stats.shift[i]).exp()
        kept = (z[i] >= stats.threshold[i]) & (weight >= min_p[i])
        vanishing = weight < 1e-30  # float32 underflow where float64 still counts the token
        assert torch.equal(kept & ~vanishing, (want > 0) & ~vanishing), (i, order)
        assert torch.allclose(got[i].double(), want, rtol=1e-5, atol=1e-7), (i, order)
    return stats, z, k, p, m


def _same_as_sorted_prefix(monkeypatch, stats, z, k, p, m, order):
    monkeypatch.setattr(torch_impl, "PIVOT_MIN_VOCAB", 1 << 40)
    sorted_stats = row_stats(z.clone(), k, p, m, FILTER_RULES[order])
    assert torch.equal(stats.shift, sorted_stats.shift)
    assert torch.equal(stats.threshold, sorted_stats.threshold)
    assert torch.allclose(stats.norm, sorted_stats.norm, rtol=1e-5)


@pytest.mark.parametrize("kind", ["gaussian", "ties", "all_equal", "neg_inf", "peaked"])
@pytest.mark.parametrize("order", sorted(FILTER_RULES))
def test_pivot_search_keeps_the_reference_set(fold, kind, order, monkeypatch):
    vocab = 4100 if fold == "real" else 61  # a remainder past the folded columns
    gen = torch.Generator().manual_seed(hash((fold, kind, order)) % 1000)
    scores = _rows(kind, vocab, gen)
    parameter_sets = [
        ([0, 5, 40], [0.9, 0.5, 1.0], [0.0, 0.0, 0.05]),
        ([8, 0, 1], [1.0, 0.95, 0.3], [0.0, 0.1, 0.0]),
        ([3, vocab, 0], [0.99, 0.9, 0.2], [0.2, 0.0, 0.0]),  # top_k = V: no cut
    ]
    for top_k, top_p, min_p in parameter_sets:
        found = _check(scores, 0.7, top_k, top_p, min_p, order)
        _same_as_sorted_prefix(monkeypatch, *found, order)
        monkeypatch.setattr(torch_impl, "PIVOT_MIN_VOCAB", FOLDS[fold][1])


def test_ties_at_the_pivot_past_the_ranked_columns_are_all_kept(fold, monkeypatch):
    """Every column's maximum is the same value, so more columns tie at the pivot than are
    ranked: the k-th value is that value, and every tied element (not only the ranked
    columns') is kept, as the reference keeps every tie at the cut."""
    vocab = 8192 if fold == "real" else 64
    scores = torch.full((3, vocab), -1.0)
    scores[:, ::2] = 2.0  # half the row tied at the top
    for top_p in ([1.0, 1.0, 1.0], [1.0, 0.1, 0.5]):  # top-k alone ranks no extra maxima
        stats, *rest = _check(scores, 1.0, [3, 1, 2], top_p, [0.0, 0.0, 0.0], "specreg")
        assert torch.equal(stats.threshold, torch.full((3,), 2.0))
        assert torch.equal(stats.norm, torch.full((3,), vocab / 2))
        _same_as_sorted_prefix(monkeypatch, stats, *rest, "specreg")
        monkeypatch.setattr(torch_impl, "PIVOT_MIN_VOCAB", FOLDS[fold][1])


@pytest.mark.parametrize("order", sorted(FILTER_RULES))
def test_top_p_exactly_at_a_float32_boundary(fold, order, monkeypatch):
    """Dyadic weights (exact in float32; the rest of the row -inf): the mass above the .25
    pair is 1.5 = top_p * total exactly, so `specreg` / `vllm` cut the pair (mass above not
    < p) and `sglang` keeps it (<= p); one float32 step above that top_p the pair is kept in
    every order. Checked against the documented rule directly: the float64 reference weighs
    exp of the float32 log(.25), which is not exactly .25, so it cannot sit on this boundary."""
    vocab = 4096 if fold == "real" else 32
    weights = torch.zeros(vocab)
    weights[vocab - 4 :] = torch.tensor([0.25, 1.0, 0.25, 0.5])
    scores = torch.log(weights)[None].repeat(2, 1)
    assert torch.equal((scores[0] - scores[0].max()).exp(), weights)  # exact in float32
    above = float(torch.nextafter(torch.tensor(0.75), torch.tensor(1.0)))
    k, p, m = torch.zeros(2, dtype=torch.long), torch.tensor([0.75, above]), torch.zeros(2)
    z = scaled_scores(scores, torch.ones(2), probabilities=False)
    stats = row_stats(z.clone(), k, p, m, FILTER_RULES[order])
    pair = float(scores[0, vocab - 4])
    if order == "sglang":
        assert float(stats.threshold[0]) == pair and float(stats.norm[0]) == 2.0
    else:
        assert float(stats.threshold[0]) == float(scores[0, vocab - 1])  # the .5 token
        assert float(stats.norm[0]) == 1.5
    assert float(stats.threshold[1]) == pair and float(stats.norm[1]) == 2.0
    _same_as_sorted_prefix(monkeypatch, stats, z, k, p, m, order)


def test_a_nucleus_wider_than_the_ranked_maxima_ranks_more(fold, monkeypatch):
    """A flat row: top-p 0.9 needs most of the columns, more than the first ranked ones; the
    search ranks more maxima (or falls back to the binned search) and finds the same cut."""
    vocab = 4096 if fold == "real" else 64
    gen = torch.Generator().manual_seed(3)
    scores = 0.01 * torch.randn(2, vocab, generator=gen)
    found = _check(scores, 1.0, [0, 0], [0.9, 0.6], [0.0, 0.0], "specreg")
    _same_as_sorted_prefix(monkeypatch, *found, "specreg")


def test_pivot_prefix_is_the_sorted_row_down_to_the_pivot(fold):
    """`pivot_prefix` against its reference: every element >= L, largest first, -inf after
    (rows whose pivot no unranked tie can reach: `complete`)."""
    vocab = 4100 if fold == "real" else 61
    gen = torch.Generator().manual_seed(11)
    for kind in ("gaussian", "ties", "neg_inf", "peaked"):
        z = _rows(kind, vocab, gen)
        shift = z.amax(-1)
        top_k, top_p = torch.tensor([0, 7, 2]), torch.tensor([0.8, 1.0, 0.6])
        values, low, complete = pivot.pivot_prefix(
            z, pivot.column_maxima(z), shift, pivot.RowWeights(z, shift), torch.arange(3),
            top_k, top_k > 0, top_p, torch.zeros(3), "top_k", False,
        )  # fmt: skip
        for i in range(3):
            want = [v for v in prefix_reference(z[i], float(low[i])) if v > float("-inf")]
            got = values[i][values[i] > float("-inf")].tolist()
            if bool(complete[i]):
                assert got == want, (kind, i)
            else:  # ties at L past the ranked columns may be missing, nothing else
                assert got == want[: len(got)] and set(want[len(got):]) <= {float(low[i])}


@pytest.mark.parametrize("order", sorted(FILTER_RULES))
def test_triton_pivot_search_on_the_adversarial_rows_equals_the_torch_statistics(order):
    """The Triton filter's pivot search (bounds jumping to element keys) under the interpreter:
    thresholds equal to torch's (both are element values) and kept mass within rounding, on
    ties, all-equal rows, -inf and a peaked row, with top_k = V, top_p = 1 and min_p = 0 mixed in."""
    from specreg.kernels.filtering.triton_impl import row_stats_triton

    vocab = 45
    gen = torch.Generator().manual_seed(5)
    rows = torch.cat([_rows(kind, vocab, gen)[:2] for kind in
                      ("ties", "all_equal", "neg_inf", "peaked", "gaussian")])  # fmt: skip
    count = rows.shape[0]
    top_k = torch.tensor([3, 0, vocab, 1, 7, 0, 2, 0, 5, 9])[:count]
    top_p = torch.tensor([1.0, 0.5, 0.9, 1.0, 0.3, 0.95, 1.0, 0.6, 0.8, 1.0])[:count]
    min_p = torch.tensor([0.0, 0.0, 0.1, 0.0, 0.0, 0.2, 0.0, 0.0, 0.05, 0.0])[:count]
    temperature = torch.full((count,), 0.9)
    z = scaled_scores(rows, temperature, probabilities=False)
    want = row_stats(z.clone(), top_k, top_p, min_p, FILTER_RULES[order])
    shift, threshold, norm = row_stats_triton(
        rows, torch.arange(count), temperature, top_k, top_p, min_p, probabilities=False,
        block_v=16, rule=FILTER_RULES[order],
    )  # fmt: skip
    assert torch.equal(shift, want.shift)
    assert torch.equal(threshold, want.threshold)
    assert torch.allclose(norm, want.norm, rtol=1e-5)
