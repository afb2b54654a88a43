"""DSpark end to end: drafts from the Markov walk + exponential race, verified with
q = softmax(corrected / T). Statistical tests use fixed seeds."""

import torch
from scipy.stats import chisquare
from specreg_dspark.kernels.markov_head import make_markov_head
from specreg_dspark.kernels.markov_head.torch_impl import ExponentialRaceSampler

from tests.support.dspark import load

VOCAB, GAMMA, ROWS, T = 6, 3, 40_000, 1.0


def _pvalue(counts, probs):
    probs = probs.double() / probs.double().sum()
    return chisquare(counts.numpy(), (probs * counts.sum()).numpy()).pvalue


def _setup(seed=0):
    torch.manual_seed(seed)
    head = make_markov_head("vanilla", vocab_size=VOCAB, rank=3)
    with torch.no_grad():
        head.markov_w1.weight.mul_(2.0)
        head.markov_w2.weight.mul_(2.0)
    base = torch.randn(GAMMA, VOCAB).expand(ROWS, GAMMA, VOCAB).contiguous()
    anchor = torch.full((ROWS,), 2, dtype=torch.long)
    target_probs = torch.softmax(torch.randn(GAMMA + 1, VOCAB) * 1.5, -1).expand(ROWS, -1, -1)
    return head, base, anchor, target_probs.contiguous()


def _first_token_counts(registry, use_corrected):
    head, base, anchor, p = _setup()
    verifier = registry.resolve(
        {"algorithm": "dspark", "num_draft_tokens": GAMMA + 1, "draft_config": load("top_level")
         | {"block_size": GAMMA}}
    ).verifier
    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        tokens, corrected = head.sample_block(base, anchor, None, ExponentialRaceSampler(T, generator=gen))
    draft_logits = corrected if use_corrected else base
    candidates = verifier.candidates(anchor, tokens)
    result = verifier.verify_sampling(
        candidates, p, torch.softmax(draft_logits.float() / T, -1), generator=gen
    )
    first = result.output_tokens[:, 0]
    return torch.bincount(first, minlength=VOCAB).double(), p[0, 0].double(), tokens, corrected


def test_drafts_are_distributed_as_the_corrected_logits(registry):
    _, _, tokens, corrected = _first_token_counts(registry, use_corrected=True)
    counts = torch.bincount(tokens[:, 0], minlength=VOCAB).double()
    q0 = torch.softmax(corrected[0, 0].double() / T, -1)  # same anchor: same q in every row
    assert _pvalue(counts, q0) > 1e-3


def test_first_emitted_token_follows_the_target(registry):
    counts, p0, _, _ = _first_token_counts(registry, use_corrected=True)
    assert _pvalue(counts, p0) > 1e-3


def test_base_logits_as_q_is_detected_as_biased(registry):
    counts, p0, _, _ = _first_token_counts(registry, use_corrected=False)
    assert _pvalue(counts, p0) < 1e-6


def test_verify_sampling_from_logits_uses_the_logits_it_is_given(registry):
    head, base, anchor, p = _setup(seed=5)
    verifier = registry.resolve({"algorithm": "dspark", "num_draft_tokens": GAMMA + 1}).verifier
    target_logits = p.log()
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        tokens, corrected = verifier.propose(
            base, anchor, head=head, temperature=T, generator=gen
        )
    result = verifier.verify_sampling_from_logits(
        verifier.candidates(anchor, tokens), target_logits, corrected, temperature=T, generator=gen
    )
    counts = torch.bincount(result.output_tokens[:, 0], minlength=VOCAB).double()
    assert _pvalue(counts, p[0, 0]) > 1e-3


def _plain_greedy(table, start, length):
    out = [start]
    for _ in range(length):
        out.append(int(table[out[-1]].argmax()))
    return out[1:]


def test_greedy_speculative_decoding_equals_plain_greedy(registry):
    """Bigram toy target; the Markov head approximates it (noisy), so acceptance varies."""
    vocab, gamma, b, length = 16, 4, 5, 40
    torch.manual_seed(11)
    table = torch.randn(vocab, vocab) * 3
    head = make_markov_head("vanilla", vocab_size=vocab, rank=vocab)
    with torch.no_grad():
        head.markov_w1.weight.copy_(torch.eye(vocab))
        head.markov_w2.weight.copy_(table.T + torch.randn(vocab, vocab) * 2.5)
    verifier = registry.resolve({"algorithm": "dspark", "num_draft_tokens": gamma + 1}).verifier
    starts = torch.arange(b) * 3 % vocab
    for ragged in (False, True):
        outputs = [[] for _ in range(b)]
        anchor = starts.clone()
        accepted_total = 0
        while min(len(o) for o in outputs) < length:
            with torch.no_grad():
                drafts, _ = verifier.propose(torch.zeros(b, gamma, vocab), anchor, head=head)
            candidates = verifier.candidates(anchor, drafts)
            target_logits = table[candidates]  # row i: logits of the token after candidates[:, i]
            lens = torch.randint(1, gamma + 2, (b,)) if ragged else None
            result = verifier.verify_greedy(candidates, target_logits, verify_lens=lens)
            accepted_total += int(result.accept_len.sum())
            for r in range(b):
                k = int(result.accept_len[r])
                outputs[r] += result.output_tokens[r, : k + 1].tolist()
            anchor = result.bonus
        for r in range(b):
            assert outputs[r][:length] == _plain_greedy(table, int(starts[r]), length)
        assert accepted_total > 0  # the drafts are sometimes right, so acceptance is exercised
