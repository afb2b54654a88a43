"""Row argmax: the folded CPU path against the plain per-row rule and torch.argmax, on the values
that break naive argmaxes (ties across chunks and columns, NaN of either sign, -inf, signed zero),
and at the greedy verify call sites against plain greedy decoding."""

import pytest
import torch

from specreg.kernels.argmax import row_argmax
from specreg.kernels.argmax.reference import row_argmax_reference
from specreg.kernels.argmax.torch_impl import FOLD_WIDTH, GROUP, row_argmax_folded_torch
from specreg.kernels.chain import verify_chain_greedy

NAN, INF = float("nan"), float("inf")
W = FOLD_WIDTH


def _adversarial(vocab: int) -> torch.Tensor:
    """One row per hazard, then random rows (no exact ties) to fill up."""
    gen = torch.Generator().manual_seed(vocab)
    rows = torch.randn(24, vocab, generator=gen)
    rows[0, [5, W + 5, 2 * W + 5]] = 9.0  # tie in one column across chunks: first chunk wins
    rows[1, [2 * W + 1, W + 700]] = 9.0  # tie across columns: the earlier index, not column
    rows[2, [3, 3 + GROUP, 3 + 5 * GROUP]] = 9.0  # tie inside one top-level lane
    rows[3, [700, vocab - 1]] = NAN  # NaN beats a larger value; the first NaN wins
    rows[3, 5] = 100.0
    rows[4, vocab - 2] = -NAN  # a negative NaN (what 0 * inf gives on x86) in the last chunk
    rows[5] = -INF  # all -inf: index 0
    rows[6] = -INF
    rows[6, vocab - 1] = -1e30
    rows[7] = 0.0  # signed zeros are equal: the first zero wins
    rows[7, :3] = -0.0
    rows[8, [W + 2, vocab - 3]] = INF
    rows[9] = 1.0  # a constant row: every column ties (falls back to torch.argmax)
    rows[10, vocab - W + 1] = 50.0  # in the overlap of the last chunk only when W does not divide V
    rows[11, vocab - 1] = 50.0
    rows[12] = torch.arange(vocab, dtype=torch.float32).neg()  # decreasing: index 0
    rows[13, [17, 17 + W]] = NAN
    rows[13, 17 + W] = -NAN
    return rows


@pytest.mark.parametrize("vocab", [3 * W, 3 * W + 1, 4 * W - 7, 5 * W + GROUP + 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_folded_equals_plain_rule_and_torch(vocab, dtype):
    rows = _adversarial(vocab).to(dtype)
    expected = row_argmax_reference(rows)
    assert torch.equal(torch.argmax(rows, dim=-1), expected)  # the oracle states torch's rule
    assert torch.equal(row_argmax_folded_torch(rows), expected)
    assert torch.equal(row_argmax(rows), expected)


def test_known_answers():
    vocab = 4 * W - 7
    got = row_argmax_folded_torch(_adversarial(vocab)).tolist()
    assert got[:13] == [5, W + 700, 3, 700, vocab - 2, 0, vocab - 1, 0, W + 2, 0, vocab - W + 1,
                        vocab - 1, 0]  # fmt: skip
    assert got[13] == 17


def test_strided_and_batched_inputs():
    """A position slice of [b, n, V] (row stride n * V), a transposed copy and [b, n, V] input."""
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(5, 3, 4 * W + 9, generator=gen).to(torch.bfloat16)  # many exact ties
    assert torch.equal(row_argmax(logits), torch.argmax(logits, dim=-1))
    assert torch.equal(row_argmax(logits[:, 1]), torch.argmax(logits[:, 1], dim=-1))
    column_major = logits[:, 0].t().contiguous().t()  # last-dim stride != 1
    assert torch.equal(row_argmax_folded_torch(column_major), torch.argmax(column_major, dim=-1))


def test_narrow_rows_and_empty_batch_use_torch_argmax():
    rows = torch.tensor([[1.0, 3.0, 3.0], [NAN, 1.0, NAN]])
    assert row_argmax(rows).tolist() == [1, 0]
    assert row_argmax(torch.empty(0, 4 * W)).shape == (0,)


def test_random_rows_many_seeds():
    for seed in range(8):
        gen = torch.Generator().manual_seed(seed)
        rows = torch.randint(-3, 4, (16, 2 * W + seed * 37), generator=gen).float()  # heavy ties
        rows[seed, seed] = NAN if seed % 2 else -INF
        assert torch.equal(row_argmax(rows), row_argmax_reference(rows))


def test_chain_greedy_call_site_equals_plain_greedy():
    """verify_chain_greedy (whose CPU path now uses row_argmax) against accept-while-equal over
    torch.argmax, with logits whose rows hold ties and NaN-free -inf masks."""
    gen = torch.Generator().manual_seed(3)
    b, n, vocab = 6, 5, 2 * W + 100
    logits = torch.randint(0, 5, (b, n, vocab), generator=gen).float()
    logits[0, :, : vocab // 2] = -INF
    predict = torch.argmax(logits, dim=-1)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    candidates[:, 1:] = torch.where(torch.arange(n - 1) < torch.arange(b)[:, None] % n,
                                    predict[:, :-1], candidates[:, 1:])  # fmt: skip
    result = verify_chain_greedy(candidates, logits)
    for r in range(b):
        accepted = 0
        while accepted < n - 1 and int(candidates[r, accepted + 1]) == int(predict[r, accepted]):
            accepted += 1
        assert int(result.accept_len[r]) == accepted
        assert int(result.bonus[r]) == int(predict[r, accepted])
