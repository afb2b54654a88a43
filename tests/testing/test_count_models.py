"""The fitted count models behind the real-text benchmark's draft networks: their probabilities
are the stated interpolation of the training counts, the heads are skip-grams, and the draft
runner's cache behaves like a KV cache."""

from __future__ import annotations

import pytest
import torch

from specreg.testing.count_models import FLOOR, CountLM

STREAM = [1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3, 4]
V = 8


def _row(model: CountLM, context: list[int], offset: int = 0) -> torch.Tensor:
    seqs = torch.tensor([context])
    return model.head_logits(seqs, torch.tensor([len(context)]), offset + 1)[0, offset].exp().double()


def test_probabilities_are_the_interpolated_counts():
    model = CountLM.fit([STREAM], V, offsets=2)
    # after (2, 3): 4 twice and 5 once; after 3: the same; unigram over the 10 counted targets
    targets = STREAM[2:]
    unigram = torch.bincount(torch.tensor(targets), minlength=V).double() / len(targets)
    want = 0.6 * torch.tensor([0, 0, 0, 0, 2 / 3, 1 / 3, 0, 0]).double()
    want += 0.3 * torch.tensor([0, 0, 0, 0, 2 / 3, 1 / 3, 0, 0]).double() + 0.1 * unigram
    torch.testing.assert_close(_row(model, [2, 3]), want + FLOOR, rtol=1e-5, atol=1e-7)
    # an unseen two-token context moves its weight to the shorter ones
    shorter = 0.3 * torch.tensor([0, 0, 0, 0, 2 / 3, 1 / 3, 0, 0]).double() + 0.7 * unigram
    torch.testing.assert_close(_row(model, [7, 3]), shorter + FLOOR, rtol=1e-5, atol=1e-7)
    # offset 1 is the token two places on: after (1, 2) comes 3, then 4 or 5 (4 twice)
    assert int(_row(model, [1, 2], offset=1).argmax()) == 4


def test_heads_are_skip_grams_and_next_logits_is_head_zero():
    model = CountLM.fit([STREAM], V, offsets=3)
    seqs = torch.tensor([[1, 2, 0], [2, 3, 0]])
    lengths = torch.tensor([2, 2])
    heads = model.head_logits(seqs, lengths, 3).argmax(-1)
    assert heads.tolist() == [[3, 4, 1], [4, 1, 2]]
    torch.testing.assert_close(model.next_logits(seqs, lengths), model.head_logits(seqs, lengths, 1)[:, 0])
    with pytest.raises(ValueError):
        model.head_logits(seqs, lengths, 4)


def test_draft_runner_replaces_from_start_and_refuses_gaps():
    model = CountLM.fit([STREAM], V)
    runner = model.draft_runner(1, 16)
    fed = runner(torch.tensor([[1, 2, 7]]), torch.tensor([0]), torch.tensor([3]))
    again = runner(torch.tensor([[3]]), torch.tensor([2]), torch.tensor([1]))  # 7 rolled back
    assert int(fed.argmax()) != int(again.argmax()) and int(again.argmax()) == 4
    with pytest.raises(AssertionError):
        runner(torch.tensor([[1]]), torch.tensor([5]), torch.tensor([1]))


def test_bigram_factors_factorise_the_bigram_pmi():
    model = CountLM.fit([STREAM], V)
    # the PMI by hand: after 3, the one-token context gives 4 (2 of 3) and 5 (1 of 3)
    targets = STREAM[2:]
    unigram = torch.bincount(torch.tensor(targets), minlength=V).double() / len(targets)
    after3 = 0.3 * torch.tensor([0, 0, 0, 0, 2 / 3, 1 / 3, 0, 0]).double() + 0.7 * unigram + FLOOR
    w1, w2 = model.bigram_factors(V)  # full rank: the product is the matrix itself
    pmi = w1 @ w2.T
    torch.testing.assert_close(pmi[3].double(), (after3 / (unigram + FLOOR)).log(), atol=2e-3, rtol=1e-3)
    assert pmi[7].abs().max() < 1e-3  # 7 never precedes anything: no correction
    # a low rank keeps the strongest correction: after 3, the bias ranks 4 first
    low1, low2 = model.bigram_factors(2)
    assert low1.shape == low2.shape == (V, 2)
    assert int((low2 @ low1[3]).argmax()) == 4
    assert model.bigram_factors(2)[0] is low1  # cached
