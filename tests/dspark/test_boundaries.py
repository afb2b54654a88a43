"""Boundaries of DSpark's Markov heads, each against the plain rule (`markov_head.reference`):
temperature exactly 0 (and below) is greedy, temperature 1 is not; the head's size limits; a
greedy walk validates its inputs before any step."""

import pytest
import torch
from specreg_dspark.kernels.markov_head import make_markov_head
from specreg_dspark.kernels.markov_head.reference import markov_block_reference
from specreg_dspark.kernels.markov_head.torch_impl import ExponentialRaceSampler, MarkovHead

from specreg.errors import ConfigError, KernelInputError
from specreg.kernels.sampling import exponential_race_sample


def _head(kind, vocab=13, rank=4, hidden=6, seed=0):
    torch.manual_seed(seed)
    head = make_markov_head(kind, vocab_size=vocab, rank=rank, hidden_size=hidden)
    with torch.no_grad():
        for p in head.parameters():
            p.mul_(3.0)
    return head


def _block(seed, b=6, gamma=4, vocab=13):
    g = torch.Generator().manual_seed(seed)
    base, hidden = torch.randn(b, gamma, vocab, generator=g), torch.randn(b, gamma, 6, generator=g)
    return base, torch.arange(b) % vocab, hidden


@pytest.mark.parametrize("kind", ["vanilla", "gated", "rnn"])
@pytest.mark.parametrize("temperature", [0.0, -0.0, -1.0])
def test_a_temperature_of_zero_or_below_walks_greedily(kind, temperature):
    """T = 0 exactly: greedy (the reference's first argmax), never a division by zero. A
    generator is passed so that a sampling draw would consume it (it must stay untouched)."""
    head = _head(kind, seed=11)
    base, anchor, hidden = _block(11)
    expected, corrected = markov_block_reference(head, base, anchor, hidden, temperature=0.0)
    generator = torch.Generator().manual_seed(3)
    before = generator.get_state()
    with torch.no_grad():
        sampler = ExponentialRaceSampler(temperature, generator=generator)
        tokens, logits = head.sample_block(base, anchor, hidden, sampler)
        assert torch.equal(head.greedy_block(base, anchor, hidden, backend="torch"), expected)
    assert torch.equal(tokens, expected)
    assert torch.allclose(logits.double(), corrected, atol=1e-4)
    assert torch.equal(generator.get_state(), before)


def test_a_temperature_of_zero_walks_greedily_through_the_triton_step():
    """The vanilla head's greedy walk on Triton (interpreter) equals the T = 0 rule, ties
    included (integer weights: every sum is exact)."""
    vocab, rank = 40, 3
    head = make_markov_head("vanilla", vocab_size=vocab, rank=rank)
    g = torch.Generator().manual_seed(9)
    with torch.no_grad():
        head.markov_w1.weight.copy_(torch.randint(-1, 2, (vocab, rank), generator=g).float())
        head.markov_w2.weight.copy_(torch.randint(-1, 2, (vocab, rank), generator=g).float())
    base = torch.randint(-2, 3, (4, 3, vocab), generator=g).float()
    anchor = torch.tensor([0, 5, 17, 39])
    expected, _ = markov_block_reference(head, base, anchor, temperature=0.0)
    with torch.no_grad():
        greedy = ExponentialRaceSampler(0.0)
        assert torch.equal(head.sample_block(base, anchor, None, greedy)[0], expected)
        assert torch.equal(head.greedy_block(base, anchor, backend="triton"), expected)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_a_positive_temperature_samples_by_the_exponential_race(temperature):
    """T = 1 (and 0.5) draws from softmax(logits / T): the draw of the core race with the same
    generator state, and (flat logits over many rows) not always the argmax."""
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(64, 50, generator=g) * 0.1
    sampler = ExponentialRaceSampler(temperature, generator=torch.Generator().manual_seed(5))
    got = sampler(logits)
    probs = torch.softmax(logits / temperature, dim=-1)
    expected = exponential_race_sample(probs, generator=torch.Generator().manual_seed(5))
    assert torch.equal(got, expected)
    assert torch.allclose(sampler.probs(logits), probs)
    assert not torch.equal(got, logits.argmax(-1))


@pytest.mark.parametrize(("vocab", "rank"), [(13, 0), (0, 4), (-1, 4), (13, -2)])
def test_a_head_without_rank_or_vocab_is_refused(vocab, rank):
    with pytest.raises(ConfigError) as info:
        MarkovHead(vocab, rank)
    assert info.value.code == "SR303"


def test_the_smallest_head_is_accepted_and_walks_as_the_reference():
    head = MarkovHead(1, 1)
    base = torch.zeros(2, 3, 1)
    tokens, _ = markov_block_reference(head, base, torch.zeros(2, dtype=torch.int64))
    with torch.no_grad():
        assert torch.equal(head.greedy_block(base, torch.zeros(2, dtype=torch.int64)), tokens)


def test_the_greedy_walk_checks_its_inputs_before_any_step():
    head = _head("vanilla")
    base = torch.randn(2, 3, 13)
    with pytest.raises(KernelInputError) as info:
        head.greedy_block(base, torch.tensor([0, 13]), backend="torch")  # anchor out of range
    assert info.value.code == "SR903"
    with pytest.raises(KernelInputError):
        head.greedy_block(base[..., :12], torch.tensor([0, 1]), backend="torch")  # wrong vocab


def test_the_greedy_walk_checks_what_its_fused_step_does_not_see():
    """The vanilla walk validates the whole block up front: a hidden block of the wrong shape
    (which the fused step never reads) and an anchor out of range in an empty block (no step
    would run) are refused, as `sample_block` refuses them."""
    head = _head("vanilla")
    base = torch.randn(2, 3, 13)
    with pytest.raises(KernelInputError):
        head.greedy_block(base, torch.tensor([0, 1]), torch.randn(2, 2, 6), backend="torch")
    with pytest.raises(KernelInputError) as info:
        head.greedy_block(base[:, :0], torch.tensor([0, 13]), backend="torch")
    assert info.value.code == "SR903"
