"""Markov heads, the block walk, and the verifier object."""

import pytest
import torch
from specreg_dspark.kernels.markov_head import make_markov_head
from specreg_dspark.kernels.markov_head.torch_impl import (
    ExponentialRaceSampler,
    GatedMarkovHead,
    MarkovHead,
    RNNMarkovHead,
    greedy_sampler,
)

from specreg import ConfigError, KernelInputError
from tests.support.dspark import load


def _head(kind, vocab=11, rank=4, hidden=6, seed=0):
    torch.manual_seed(seed)
    head = make_markov_head(kind, vocab_size=vocab, rank=rank, hidden_size=hidden)
    with torch.no_grad():
        for p in head.parameters():
            p.mul_(3.0)
    return head


def test_factory_and_weight_layout():
    head = _head("vanilla")
    assert type(head) is MarkovHead
    assert tuple(head.markov_w1.weight.shape) == (11, 4)
    assert tuple(head.markov_w2.weight.shape) == (11, 4) and head.markov_w2.bias is None
    assert isinstance(_head("gated"), GatedMarkovHead) and isinstance(_head("RNN"), RNNMarkovHead)


@pytest.mark.parametrize("kind", ["vanilla", "gated", "rnn"])
def test_corrected_logits_are_base_plus_teacher_forced_bias(kind):
    head = _head(kind)
    b, gamma, vocab = 3, 4, 11
    base = torch.randn(b, gamma, vocab)
    hidden = torch.randn(b, gamma, 6)
    anchor = torch.tensor([0, 5, 10])
    with torch.no_grad():
        tokens, corrected = head.sample_block(base, anchor, hidden, ExponentialRaceSampler(1.0))
        prevs = torch.cat([anchor[:, None], tokens[:, :-1]], dim=1)
        state = head.init_state(b, base)
        for k in range(gamma):
            bias, state = head(prevs[:, k], hidden[:, k], state)
            assert torch.allclose(corrected[:, k], base[:, k] + bias, atol=1e-5)
    assert tokens.dtype == torch.int64 and tuple(corrected.shape) == (b, gamma, vocab)


@pytest.mark.parametrize("kind", ["vanilla", "gated", "rnn"])
def test_greedy_block_matches_the_greedy_walk(kind):
    head = _head(kind, seed=1)
    base, hidden = torch.randn(4, 5, 11), torch.randn(4, 5, 6)
    anchor = torch.tensor([1, 2, 3, 4])
    with torch.no_grad():
        walked, corrected = head.sample_block(base, anchor, hidden, greedy_sampler)
        assert torch.equal(head.greedy_block(base, anchor, hidden), walked)
    assert torch.equal(walked, corrected.argmax(-1))


def test_vanilla_greedy_block_through_triton(force_backend):
    head = _head("vanilla", vocab=21, seed=2)
    base, anchor = torch.randn(2, 3, 21), torch.tensor([4, 20])
    with torch.no_grad():
        expected = head.sample_block(base, anchor, None, greedy_sampler)[0]
        force_backend("triton")
        assert torch.equal(head.greedy_block(base, anchor), expected)


def test_rnn_state_carries_across_slots():
    head = _head("rnn", seed=3)
    hidden = torch.randn(1, 2, 6)
    prev = torch.tensor([2])
    with torch.no_grad():
        first, state = head(prev, hidden[:, 0], head.init_state(1, hidden))
        again, _ = head(prev, hidden[:, 0], state)
    assert not torch.allclose(first, again)


def test_head_errors():
    with pytest.raises(ConfigError) as info:
        make_markov_head("lstm", vocab_size=4, rank=2)
    assert info.value.code == "SR302"
    with pytest.raises(ConfigError) as info:
        make_markov_head("gated", vocab_size=4, rank=2)
    assert info.value.code == "SR301"
    with pytest.raises(ConfigError) as info:
        make_markov_head("vanilla", vocab_size=4, rank=0)
    assert info.value.code == "SR303"
    gated = _head("gated")
    with pytest.raises(KernelInputError) as info:
        gated.sample_block(torch.randn(1, 2, 11), torch.tensor([0]))
    assert info.value.code == "SR900"
    with pytest.raises(KernelInputError) as info:
        _head("vanilla").sample_block(torch.randn(1, 2, 10), torch.tensor([0]))
    assert info.value.code == "SR900"
    with pytest.raises(KernelInputError) as info:
        _head("vanilla").sample_block(torch.randn(1, 2, 11), torch.tensor([11]))
    assert info.value.code == "SR903"


def _plan(registry, draft, **extra):
    return registry.resolve({"algorithm": "dspark", "draft_config": draft, **extra})


def test_verifier_builds_the_block_for_each_layout(registry):
    dense = _plan(registry, load("top_level")).verifier  # gamma 6, mask 3
    ids, pos = dense.build_draft_block(torch.tensor([7]), torch.tensor([20]), vocab_size=64)
    assert ids.tolist() == [[7, 3, 3, 3, 3, 3]] and pos.tolist() == [list(range(20, 26))]
    bonus = _plan(registry, load("bonus_anchor_explicit")).verifier  # gamma 7, width 8
    ids, _ = bonus.build_draft_block(torch.tensor([7]), torch.tensor([0]))
    assert ids.shape == (1, 8) and bonus.gamma == 7
    with pytest.raises(ConfigError) as info:
        registry.resolve({"algorithm": "dspark"}).verifier.build_draft_block(
            torch.tensor([1]), torch.tensor([0])
        )
    assert info.value.code == "SR304"


def test_ragged_verify_caps_each_request(registry):
    verifier = _plan(registry, load("top_level"), num_draft_tokens=7).verifier
    b, n, vocab = 3, 7, 64
    candidates = torch.randint(0, vocab, (b, n))
    target = torch.full((b, n, vocab), -5.0)
    target[:, :-1].scatter_(2, candidates[:, 1:, None], 5.0)  # every draft matches
    target[:, -1, 9] = 5.0
    full = verifier.verify_greedy(candidates, target)
    assert full.accept_len.tolist() == [6, 6, 6] and full.bonus.tolist() == [9, 9, 9]
    lens = torch.tensor([1, 4, 7])
    capped = verifier.verify_greedy(candidates, target, verify_lens=lens)
    assert capped.accept_len.tolist() == [0, 3, 6]
    assert capped.bonus[1] == candidates[1, 4]  # bonus re-read at the capped position


def test_dflash_rejects_ragged_verify_and_dspark_needs_a_head(registry):
    dflash = registry.resolve(
        {"algorithm": "dflash", "draft_config": load("dflash_only"), "num_draft_tokens": 4}
    ).verifier
    candidates, target = torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4, 64)
    with pytest.raises(ConfigError) as info:
        dflash.verify_greedy(candidates, target, verify_lens=torch.tensor([2]))
    assert info.value.code == "SR311"
    tokens, q = dflash.propose(torch.randn(1, 16, 64), torch.tensor([0]))
    assert tokens.shape == (1, 3) and q is None
    dspark = _plan(registry, load("top_level")).verifier
    with pytest.raises(ConfigError) as info:
        dspark.propose(torch.randn(1, 6, 64), torch.tensor([0]))
    assert info.value.code == "SR303"
    with pytest.raises(KernelInputError) as info:
        dspark.verify_sampling_from_logits(
            torch.zeros(1, 7, dtype=torch.long), torch.zeros(1, 7, 64), torch.zeros(1, 6, 64),
            temperature=0.0,
        )
    assert info.value.code == "SR904"
    with pytest.raises(KernelInputError) as info:
        dspark.propose(torch.randn(1, 2, 64), torch.tensor([0]), head=_head("vanilla", vocab=64))
    assert info.value.code == "SR900"
