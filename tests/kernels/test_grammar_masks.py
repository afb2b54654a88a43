"""Grammar masks with speculative decoding, against a real grammar engine (xgrammar, CPU).

A JSON-schema grammar over a 15-token vocabulary; the target and draft models are bigram logit
tables. Each step the drafter samples from its masked q (the matcher advanced along the draft
fills one mask row per verified position, then rolls back), `verify_chain_with_params` verifies
with `token_bitmask=`, and the matcher accepts what was emitted. Checked: every emitted sequence
is accepted by the grammar; greedy equals plain constrained greedy token for token; the joint
distribution of the first three emitted tokens equals non-speculative constrained sampling
(chi-square at a fixed seed), and a negative control (the draft's q not masked, as a verifier that
masks only p would do) fails. The bitmask kernels themselves: torch and Triton (interpreter)
against the per-row reference; bad masks coded.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from scipy.stats import chisquare

from specreg.errors import KernelInputError
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.token_mask import apply_token_bitmask_, bitmask_words
from specreg.kernels.token_mask.reference import allowed_tokens, masked_row
from specreg.contract.sampling_params import SamplingParams

xgr = pytest.importorskip("xgrammar")

VOCAB = ['{', '}', '"a"', '"b"', ':', ',', 'true', 'false', '0', '1', '2', ' ', 'x', ']', '<eos>']
EOS = 14
SCHEMA = {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "integer"}},
          "required": ["a"], "additionalProperties": False}
PROMPT = ['{', '"a"', ':', ' ', 'true', ',', ' ', '"b"', ':', ' ']  # then: digits, '}' , eos
GAMMA = 3
V = len(VOCAB)
W = bitmask_words(V)


@pytest.fixture(scope="module")
def grammar():
    info = xgr.TokenizerInfo(VOCAB, vocab_type=xgr.VocabType.RAW, stop_token_ids=[EOS])
    return xgr.GrammarCompiler(info).compile_json_schema(json.dumps(SCHEMA), any_whitespace=False)


def _tables(seed):
    gen = torch.Generator().manual_seed(seed)
    target = 1.5 * torch.randn(V, V, generator=gen)
    draft = target + 1.2 * torch.randn(V, V, generator=gen)
    return target, draft


def _matcher(grammar, prompt=PROMPT):
    m = xgr.GrammarMatcher(grammar)
    for t in prompt:
        assert m.accept_token(VOCAB.index(t))
    return m


def _fill(m, row):
    """The matcher's next-token mask into `row` (int32 [W]); only EOS once it has terminated."""
    if m.is_terminated():
        row.zero_()
        row[EOS // 32] = 1 << (EOS % 32)
    else:
        m.fill_next_token_bitmask(row.view(1, W))


def _masked_probs(logits, words):
    return torch.softmax(masked_row(logits, words, probabilities=False), -1)


def _speculate(grammar, b, steps_tokens, *, temperature, seed, mask_draft=True):
    """Run b requests until each emitted `steps_tokens` tokens (or EOS); the emitted lists."""
    target_t, draft_t = _tables(1)
    gen = torch.Generator().manual_seed(seed)
    matchers = [_matcher(grammar) for _ in range(b)]
    last = torch.full((b,), VOCAB.index(PROMPT[-1]), dtype=torch.long)
    emitted: list[list[int]] = [[] for _ in range(b)]
    params = SamplingParams.of(b, temperature=temperature)
    while any(len(e) < steps_tokens and (not e or e[-1] != EOS) for e in emitted):
        cand = torch.zeros(b, GAMMA + 1, dtype=torch.long)
        cand[:, 0] = last
        mask = torch.zeros(b, GAMMA + 1, W, dtype=torch.int32)
        for r, m in enumerate(matchers):
            steps = 0
            for j in range(GAMMA):
                _fill(m, mask[r, j])
                q = _masked_probs(draft_t[cand[r, j]], mask[r, j])
                if temperature == 0:
                    token = int(q.argmax())
                else:
                    token = int(torch.multinomial(q, 1, generator=gen))
                cand[r, j + 1] = token
                if not m.is_terminated():
                    assert m.accept_token(token)
                    steps += 1
            _fill(m, mask[r, GAMMA])
            m.rollback(steps)
        target = target_t[cand].clone()
        draft = draft_t[cand[:, :-1]].clone()
        verify_mask = mask if mask_draft else None
        if not mask_draft:  # the control: p masked, q left as raw scores
            apply_token_bitmask_(target, mask)
        out = verify_chain_with_params(cand, target, draft, params=params, generator=gen,
                                       token_bitmask=verify_mask)
        for r, m in enumerate(matchers):
            count = int(out.accept_len[r]) + 1
            for token in out.output_tokens[r, :count].tolist():
                if emitted[r] and emitted[r][-1] == EOS:
                    break  # tokens after the end are discarded, as a server does
                if mask_draft:
                    assert m.accept_token(token), (emitted[r], token)
                elif not m.accept_token(token):
                    m = matchers[r] = _matcher(grammar)  # the control may leave the grammar
                emitted[r].append(token)
            last[r] = emitted[r][-1]
    return emitted


def test_greedy_equals_plain_constrained_greedy_and_sequences_parse(grammar):
    target_t, _ = _tables(1)
    m = _matcher(grammar)
    plain, row, prev = [], torch.zeros(W, dtype=torch.int32), VOCAB.index(PROMPT[-1])
    while len(plain) < 12 and (not plain or plain[-1] != EOS):
        _fill(m, row)
        prev = int(masked_row(target_t[prev], row, probabilities=False).argmax())
        assert m.accept_token(prev)
        plain.append(prev)
    (spec,) = {tuple(e[:len(plain)]) for e in _speculate(grammar, 4, len(plain), temperature=0.0,
                                                          seed=0)}
    assert list(spec) == plain


def _exact_joint(grammar, k):
    """P(first k emitted tokens) under non-speculative constrained sampling, by enumeration."""
    target_t, _ = _tables(1)
    out: dict[tuple[int, ...], float] = {}

    def walk(m, prev, prefix, prob):
        if len(prefix) == k or (prefix and prefix[-1] == EOS):
            out[tuple(prefix)] = out.get(tuple(prefix), 0.0) + prob
            return
        row = torch.zeros(W, dtype=torch.int32)
        _fill(m, row)
        p = _masked_probs(target_t[prev], row).double()
        for token in range(V):
            if p[token] > 0:
                assert m.accept_token(token)
                walk(m, token, [*prefix, token], prob * float(p[token]))
                m.rollback(1)

    walk(_matcher(grammar), VOCAB.index(PROMPT[-1]), [], 1.0)
    return out


def _pvalue(samples, exact):
    """Chi-square of the sampled outcomes against `exact`; outcomes expected fewer than 5 times
    share one bin. 0 when an outcome of probability 0 occurs."""
    if any(s not in exact for s in samples):
        return 0.0
    n = len(samples)
    big = sorted(key for key, p in exact.items() if p * n >= 5)
    counts = [sum(1 for s in samples if s == key) for key in big]
    expected = [exact[key] * n for key in big]
    rest_expected = n * (1.0 - sum(exact[key] for key in big))
    if rest_expected > 0:
        counts.append(n - sum(counts))
        expected.append(rest_expected)
    scale = sum(counts) / sum(expected)  # float32 probabilities: sum to 1 within 1e-6
    return float(chisquare(counts, [e * scale for e in expected]).pvalue)


def test_distribution_equals_constrained_sampling_and_control_fails(grammar):
    k, b = 3, 4000
    exact = _exact_joint(grammar, k)
    assert len(exact) >= 8 and math.isclose(sum(exact.values()), 1.0, rel_tol=1e-6)
    emitted = _speculate(grammar, b, k, temperature=1.0, seed=5)
    samples = [tuple(e[:k]) if EOS not in e[:k] else tuple(e[:e.index(EOS) + 1]) for e in emitted]
    for e in emitted:  # every sequence parses: a fresh matcher takes all of it, and ends
        m = _matcher(grammar)
        upto = e[:e.index(EOS) + 1] if EOS in e else e
        assert all(m.accept_token(t) for t in upto)
        assert m.is_terminated() == (EOS in e)
    assert _pvalue(samples, exact) > 1e-3
    control = _speculate(grammar, b, k, temperature=1.0, seed=5, mask_draft=False)
    control_samples = [tuple(e[:k]) if EOS not in e[:k] else tuple(e[:e.index(EOS) + 1])
                       for e in control]
    assert all(sample in exact for sample in control_samples)  # grammatical, yet biased:
    assert _pvalue(control_samples, exact) < 1e-6


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_bitmask_kernel_equals_reference(backend):
    gen = torch.Generator().manual_seed(3)
    vocab = 77
    scores = torch.randn(5, 4, vocab, generator=gen)
    words = torch.randint(-2**31, 2**31 - 1, (5, 4, bitmask_words(vocab)), generator=gen,
                          dtype=torch.int64).to(torch.int32)
    want = torch.stack([torch.stack([masked_row(scores[i, j], words[i, j], probabilities=False)
                                     for j in range(4)]) for i in range(5)])
    strided = torch.randn(5, 6, vocab, generator=gen)[:, 1:5]  # a non-contiguous view
    strided.copy_(scores)
    apply_token_bitmask_(strided, words, backend=backend)
    assert torch.equal(strided, want)
    probs = torch.softmax(scores, -1)
    apply_token_bitmask_(probs, words, probabilities=True, backend=backend)
    keep = torch.tensor([[allowed_tokens(words[i, j], vocab) for j in range(4)] for i in range(5)])
    assert torch.equal(probs == 0, ~keep)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_scores_of_any_rank_are_masked_as_xgrammar_masks_them(backend):
    """[..., V], as the docstring says: a 1-D row (xgrammar's apply_token_bitmask_inplace takes
    one; it was SR917) and four dimensions give what the rows give one by one."""
    gen = torch.Generator().manual_seed(4)
    vocab = 77
    row = torch.randn(vocab, generator=gen)
    word = torch.randint(-2**31, 2**31 - 1, (bitmask_words(vocab),), generator=gen,
                         dtype=torch.int64).to(torch.int32)
    theirs = row.clone()
    xgr.apply_token_bitmask_inplace(theirs, word)
    ours = apply_token_bitmask_(row.clone(), word, backend=backend)
    assert torch.equal(ours, theirs)
    scores = torch.randn(2, 3, 2, vocab, generator=gen)
    words = torch.randint(-2**31, 2**31 - 1, (2, 3, 2, bitmask_words(vocab)), generator=gen,
                          dtype=torch.int64).to(torch.int32)
    want = torch.stack([masked_row(r, w, probabilities=False)
                        for r, w in zip(scores.reshape(-1, vocab), words.reshape(12, -1),
                                        strict=True)]).reshape(scores.shape)
    assert torch.equal(apply_token_bitmask_(scores, words, backend=backend), want)
    with pytest.raises(KernelInputError) as info:  # the row it names is [0] for one row
        apply_token_bitmask_(row.clone(), torch.zeros_like(word), backend=backend)
    assert info.value.codes == ("SR918",) and "[[0]]" in str(info.value)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_chain_with_mask_equals_the_reference_on_masked_scores(backend):
    """The verifier with `token_bitmask=` against the chain rule's plain reference run on scores
    masked row by row by the mask's reference, on the same draws (a seeded request is keyed by
    its seed; its acceptance uniforms are the stream's, rebuilt by the independent stream)."""
    from specreg.kernels.chain_params.reference import verify_chain_with_params_reference
    from specreg.kernels.chain_params.types import ChainParamsInputs
    from tests.support.independent_race import accept_uniform

    gen = torch.Generator().manual_seed(9)
    b, n = 6, 4
    cand = torch.randint(0, V, (b, n), generator=gen)
    target = torch.randn(b, n, V, generator=gen)
    draft = torch.randn(b, n - 1, V, generator=gen)
    mask = torch.randint(1, 2**15, (b, n, W), generator=gen, dtype=torch.int32)
    params = SamplingParams.of(b, temperature=[0.0, 1.0, 0.7, 1.0, 0.0, 1.3], seed=list(range(b)))
    positions = torch.arange(b) * 5
    got = verify_chain_with_params(cand, target.clone(), draft.clone(), params=params,
                                   positions=positions, token_bitmask=mask, backend=backend)
    pre_t = torch.stack([torch.stack([masked_row(target[r, j], mask[r, j], probabilities=False)
                                      for j in range(n)]) for r in range(b)])
    pre_d = torch.stack([torch.stack([masked_row(draft[r, j], mask[r, j], probabilities=False)
                                      for j in range(n - 1)]) for r in range(b)])
    coins = torch.tensor([[accept_uniform(r, 5 * r + i, int(cand[r, i + 1])) for i in range(n - 1)]
                          for r in range(b)])  # the seeded requests' acceptance uniforms
    want = verify_chain_with_params_reference(ChainParamsInputs(
        candidates=cand, target=pre_t, draft=pre_d, params=params, coins=coins,
        keys=torch.arange(b), positions=positions, verify_lens=None, probabilities=False,
        filter_order="specreg",
    ))
    assert torch.equal(got.output_tokens, want.output_tokens)
    assert torch.equal(got.accept_len.long(), want.accept_len.long())
    allowed = torch.tensor([[allowed_tokens(mask[r, j], V) for j in range(n)] for r in range(b)])
    for r in range(b):
        for j in range(int(got.accept_len[r]) + 1):
            assert allowed[r, j, int(got.output_tokens[r, j])]  # every emitted token allowed


def test_bad_masks_are_coded():
    target = torch.randn(2, 3, V)
    with pytest.raises(KernelInputError) as info:
        apply_token_bitmask_(target, torch.zeros(2, 3, W + 1, dtype=torch.int64))
    assert info.value.codes == ("SR917", "SR917")
    empty = torch.full((2, 3, W), -1, dtype=torch.int32)
    empty[1, 2] = 0
    with pytest.raises(KernelInputError) as info:
        apply_token_bitmask_(target, empty)
    assert info.value.codes == ("SR918",) and "[1, 2]" in str(info.value)
    empty[1, 2] = 1 << 20  # only a bit past the vocabulary (V = 15): still nothing allowed
    with pytest.raises(KernelInputError):
        apply_token_bitmask_(target, empty)
    params = SamplingParams.of(2, temperature=1.0)
    cand = torch.zeros(2, 3, dtype=torch.long)
    verify_chain_with_params(cand, target, None, params=params, token_bitmask=empty,
                             verify_lens=torch.tensor([3, 2]))  # the empty row is never read
