"""Greedy chain verification: known answers, ragged caps, equality with plain greedy decoding."""

import pytest
import torch

from specreg.step.chain_verifier import ChainVerifier
from specreg.kernels.chain import (
    verify_chain_greedy,
    verify_chain_greedy_from_predict,
)


def _one_hot_logits(rows, vocab=6):
    """rows: per request, the argmax token of each position."""
    logits = torch.full((len(rows), len(rows[0]), vocab), -1.0)
    for r, row in enumerate(rows):
        for i, token in enumerate(row):
            logits[r, i, token] = 3.0
    return logits


def test_known_answers():
    candidates = torch.tensor([[3, 1, 2, 3], [0, 1, 2, 3], [0, 4, 2, 3], [0, 1, 5, 3]])
    logits = _one_hot_logits([[1, 2, 3, 4], [1, 2, 0, 5], [1, 2, 3, 4], [1, 2, 3, 4]])
    r = verify_chain_greedy(candidates, logits)
    assert r.accept_len.dtype == torch.int32 and r.bonus.dtype == torch.int64
    assert r.accept_len.tolist() == [3, 2, 0, 1]
    assert r.bonus.tolist() == [4, 0, 1, 2]
    assert r.output_tokens.tolist() == [
        [1, 2, 3, 4],
        [1, 2, 0, -1],
        [1, -1, -1, -1],
        [1, 2, -1, -1],
    ]
    assert r.num_emitted.tolist() == [4, 3, 1, 2]


def test_ties_go_to_lowest_index():
    candidates = torch.tensor([[0, 2], [0, 1]])
    logits = torch.tensor([[[0.0, 1.0, 1.0], [5.0, 5.0, 5.0]]] * 2)
    r = verify_chain_greedy(candidates, logits)
    assert r.accept_len.tolist() == [0, 1]
    assert r.bonus.tolist() == [1, 0]


def test_ragged_verify_caps_and_retakes_bonus():
    candidates = torch.tensor([[0, 1, 2, 3]] * 4)
    logits = _one_hot_logits([[1, 2, 3, 5]] * 4)
    r = verify_chain_greedy(candidates, logits, verify_lens=torch.tensor([4, 3, 2, 1]))
    assert r.accept_len.tolist() == [3, 2, 1, 0]
    assert r.bonus.tolist() == [5, 3, 2, 1]
    assert r.output_tokens.tolist()[1] == [1, 2, 3, -1]


def test_padding_after_verify_len_is_ignored():
    candidates = torch.tensor([[0, 1, -1, -1]])
    logits = _one_hot_logits([[1, 2, 3, 5]])
    r = verify_chain_greedy(candidates, logits, verify_lens=torch.tensor([2], dtype=torch.int32))
    assert r.accept_len.tolist() == [1] and r.bonus.tolist() == [2]


def test_from_predict_matches_logits_path():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(16, 5, 7, generator=gen)
    predict = logits.argmax(-1)
    candidates = torch.cat([torch.zeros(16, 1, dtype=torch.long), predict[:, :-1]], 1)
    candidates[::3, 2] = (candidates[::3, 2] + 1) % 7
    lens = torch.randint(1, 6, (16,), generator=gen)
    a = verify_chain_greedy(candidates, logits, verify_lens=lens)
    b = verify_chain_greedy_from_predict(candidates, predict, verify_lens=lens, vocab_size=7)
    assert torch.equal(a.output_tokens, b.output_tokens)
    assert torch.equal(a.accept_len, b.accept_len)


def test_single_column_chain():
    r = verify_chain_greedy(torch.tensor([[3]]), _one_hot_logits([[4]]))
    assert r.accept_len.tolist() == [0] and r.output_tokens.tolist() == [[4]]


def _greedy_decode(table: torch.Tensor, start: int, steps: int) -> list[int]:
    tokens = [start]
    for _ in range(steps):
        tokens.append(int(torch.argmax(table[tokens[-1]])))
    return tokens[1:]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("ragged", [False, True])
def test_speculative_greedy_equals_plain_greedy(dtype, ragged):
    """Drafts from a perturbed table, verified against the target table, step by step, emit
    exactly the target's greedy sequence."""
    vocab, gamma, length = 48, 4, 60
    gen = torch.Generator().manual_seed(17)
    target = torch.randn(vocab, vocab, generator=gen).to(dtype)  # logits of next | prev
    draft = target.float() + 0.8 * torch.randn(vocab, vocab, generator=gen)
    verifier = ChainVerifier(num_draft_tokens=gamma + 1)
    accepted_total = 0
    for start in range(6):
        expected = _greedy_decode(target.float(), start, length)
        emitted: list[int] = []
        anchor = start
        while len(emitted) < length:
            chain = [anchor]
            for _ in range(gamma):
                chain.append(int(torch.argmax(draft[chain[-1]])))
            candidates = torch.tensor([chain])
            lens = torch.randint(1, gamma + 2, (1,), generator=gen) if ragged else None
            result = verifier.verify_greedy(candidates, target[candidates], verify_lens=lens)
            n_out = int(result.num_emitted[0])
            emitted += result.output_tokens[0, :n_out].tolist()
            accepted_total += int(result.accept_len[0])
            anchor = emitted[-1]
        assert emitted[:length] == expected
    assert accepted_total > 0  # the drafter is good enough that acceptance is exercised


def test_chain_verifier_attributes():
    verifier = ChainVerifier(num_draft_tokens=5)
    assert verifier.num_draft_tokens == 5 and verifier.gamma == 4
    assert verifier.rules == ("greedy", "chain_sampling")
    assert "gamma=4" in verifier.describe()
