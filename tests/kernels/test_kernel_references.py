"""Every kernel family against its plain reference (`reference.py`), on the same inputs.

The torch implementation (CPU-tuned branches included: the progressive greedy with most or few
requests active, the chunked CPU draw with one and with many chunks, the batched path the
accelerators take) and the Triton one (interpreter) must equal the reference exactly: greedy
paths by construction, sampling paths because the rule is deterministic given the coins.
"""

import pytest
import torch

from specreg.testing.demo_params import mixed_demo_params
from specreg.kernels.argmax.reference import row_argmax_reference
from specreg.kernels.chain import reference as chain_ref
from specreg.kernels.chain import torch_impl as chain_torch
from specreg.kernels.chain import triton_impl as chain_triton
from specreg.kernels.chain import (
    verify_chain_greedy,
    verify_chain_greedy_from_predict,
    verify_chain_sampling,
    verify_chain_target_only,
)
from specreg.kernels.chain.types import ChainSamplingInputs
from specreg.kernels.chain_params import reference as params_ref
from specreg.kernels.chain_params import torch_impl as params_torch
from specreg.kernels.chain_params import triton_impl as params_triton
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.filtering.torch_impl import row_stats, scaled_scores
from specreg.kernels.filtering.triton_impl import row_stats_triton
from specreg.kernels.sampling import (
    exponential_race_sample,
    inverse_cdf_sample,
    request_coins,
    residual_weights,
    uniform_coins,
)
from specreg.kernels.row_chunks import cpu_row_chunks
from specreg.kernels.sampling import reference as sampling_ref
from specreg.kernels.sampling import torch_impl as sampling_torch
from specreg.contract.sampling_params import SamplingParams
from tests.support.independent_race import RESIDUAL, accept_uniform, race


def _same(got, want, *, params=False):
    assert torch.equal(got.accept_len, want.accept_len), (got.accept_len, want.accept_len)
    assert torch.equal(got.bonus, want.bonus), (got.bonus, want.bonus)
    assert torch.equal(got.output_tokens, want.output_tokens)
    if params:
        assert torch.equal(got.param_error, want.param_error)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------------- greedy


def _greedy_inputs(b, n, vocab, *, matching, seed=0, ties=False):
    """Logits [b, n, V] and candidates whose drafts follow the argmax for the `matching` first
    requests (with one mismatch at a random position) and are random for the others."""
    gen = _gen(seed)
    if ties:  # few distinct values: ties everywhere, the lowest index must win
        logits = torch.randint(0, 3, (b, n, vocab), generator=gen).to(torch.float32)
    else:
        logits = torch.randn(b, n, vocab, generator=gen)
    predict = logits.argmax(-1)
    drafts = torch.randint(0, vocab, (b, n - 1), generator=gen)
    drafts[:matching] = predict[:matching, :-1]
    if n > 1:
        cut = torch.randint(0, n, (matching,), generator=gen)
        for r in range(matching):
            if cut[r] < n - 1:
                drafts[r, cut[r]] = (predict[r, cut[r]] + 1) % vocab
    candidates = torch.cat([torch.zeros(b, 1, dtype=torch.int64), drafts], 1)
    return candidates, logits


def _ragged(b, n, seed):
    return torch.randint(1, n + 1, (b,), generator=_gen(seed))


@pytest.mark.parametrize(
    ("b", "n", "vocab", "matching"),
    [
        (16, 5, 37, 14),  # most requests active: every row is read
        (16, 5, 37, 2),  # few active: only their rows are gathered
        (4, 3, 2100, 3),  # wide rows: the folded CPU argmax
        (3, 1, 9, 0),  # no drafts
        (0, 4, 9, 0),  # empty batch
    ],
)
@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize("ties", [False, True])
def test_greedy_torch_and_triton_equal_reference(b, n, vocab, matching, ragged, ties):
    candidates, logits = _greedy_inputs(b, n, vocab, matching=matching, ties=ties)
    lens = _ragged(b, n, 5) if ragged else None
    want = chain_ref.verify_chain_greedy_reference(candidates, logits, verify_lens=lens)
    _same(verify_chain_greedy(candidates, logits, verify_lens=lens, backend="torch"), want)
    predict = logits.argmax(-1)  # the batched path (accelerators): from the argmax
    _same(chain_torch.verify_chain_greedy_from_predict_torch(
        candidates, predict, verify_lens=lens), want)
    _same(chain_triton.verify_chain_greedy_triton(
        candidates, logits, verify_lens=lens, block_v=16), want)
    if b:
        assert want.accept_len.tolist() != [0] * b or matching == 0 or n == 1


@pytest.mark.parametrize("ragged", [False, True])
def test_greedy_from_predict_equals_reference(ragged):
    b, n, vocab = 12, 6, 20
    candidates, logits = _greedy_inputs(b, n, vocab, matching=9, seed=3)
    predict = logits.argmax(-1)
    lens = _ragged(b, n, 4) if ragged else None
    if ragged:  # positions past a request's length may hold -1 padding
        pad = torch.arange(n)[None, :] >= lens[:, None]
        candidates = candidates.masked_fill(pad, -1)
        predict = predict.masked_fill(pad, -1)
    want = chain_ref.verify_chain_greedy_from_predict_reference(
        candidates, predict, verify_lens=lens
    )
    got = verify_chain_greedy_from_predict(
        candidates, predict, verify_lens=lens, vocab_size=vocab
    )
    _same(got, want)
    assert len(set(want.accept_len.tolist())) >= 3


# ----------------------------------------------------------------------------------- sampling


def _sampling_inputs(b, n, vocab, *, seed, target_only, ragged, zeros=False):
    """p and q with some shared mass; drafts sampled from q (or from p for the target-only
    rule) so that acceptance varies; coins from `uniform_coins`."""
    gen = _gen(seed)
    p = torch.softmax(2 * torch.randn(b, n, vocab, generator=gen), -1)
    q = torch.softmax(2 * torch.randn(b, n - 1, vocab, generator=gen), -1)
    q = 0.5 * q + 0.5 * p[:, : n - 1]
    if zeros:  # zero entries: drafts p(x) = 0 (never accepted) and empty residual tails
        p = p * (torch.rand(b, n, vocab, generator=gen) > 0.3)
        p[..., 0] += 1e-3
        p = p / p.sum(-1, keepdim=True)
    source = p[:, : n - 1] if target_only else q
    drafts = torch.multinomial(source.reshape(-1, vocab), 1, generator=gen).reshape(b, n - 1)
    candidates = torch.cat([torch.zeros(b, 1, dtype=torch.int64), drafts], 1)
    drawn = uniform_coins((b, n - 1), device="cpu", seed=seed, offsets=torch.arange(b))
    return ChainSamplingInputs(
        candidates=candidates, target_probs=p, draft_probs=None if target_only else q,
        coins=drawn, keys=torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
        positions=torch.randint(0, 2**33, (b,), generator=gen),
        verify_lens=_ragged(b, n, seed + 1) if ragged else None,
    )


def _small_chunks(num_rows, vocab, elements=None):
    return cpu_row_chunks(num_rows, vocab, 3 * vocab)


@pytest.mark.parametrize("target_only", [False, True])
@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize(("b", "n", "vocab", "zeros"), [
    (24, 5, 11, False), (24, 5, 11, True), (6, 4, 300, False), (5, 1, 7, False), (0, 3, 5, False),
])
def test_sampling_torch_and_triton_equal_reference(
    monkeypatch, target_only, ragged, b, n, vocab, zeros
):
    inputs = _sampling_inputs(
        b, n, vocab, seed=b + n + vocab, target_only=target_only, ragged=ragged, zeros=zeros
    )
    want = chain_ref.verify_chain_sampling_reference(inputs)
    kwargs = dict(coins=inputs.coins, keys=inputs.keys, positions=inputs.positions,
                  verify_lens=inputs.verify_lens, backend="torch")
    if target_only:
        got = verify_chain_target_only(inputs.candidates, inputs.target_probs, **kwargs)
    else:
        got = verify_chain_sampling(inputs.candidates, inputs.target_probs, inputs.draft_probs,
                                    **kwargs)
    _same(got, want)  # the CPU draw, one chunk
    _same(chain_triton.verify_chain_sampling_triton(inputs, block_v=16), want)
    with monkeypatch.context() as patch:
        patch.setattr(chain_torch, "cpu_row_chunks", _small_chunks)
        _same(chain_torch.verify_chain_sampling_torch(inputs), want)  # many chunks
        patch.setattr(chain_torch, "_row_spans", chain_torch._one_span)
        _same(chain_torch.verify_chain_sampling_torch(inputs), want)  # the accelerators' draw
    if b > 6 and n > 1:
        assert len(set(want.accept_len.tolist())) >= 2


def test_sampling_reference_follows_the_rule_by_hand():
    """One request, worked by hand: draft 1 accepted (0.5 * 0.2 < 0.3), draft 1 of row 1
    rejected (0.9 * 0.8 >= 0.4); the residual max(p - q, 0) of row 1 is [0.3, 0, 0.1] (mass
    0.4), raced in the RESIDUAL role at absolute position 5 + 1 under key 3: token 2 (key 3
    is one whose race picks the residual's unlikely token, by the independent race; key 0
    picks token 0)."""
    residual = [0.3, 0.0, 0.1]
    assert race(residual, 3, RESIDUAL, 6) == 2 and race(residual, 0, RESIDUAL, 6) == 0
    for key, token in ((3, 2), (0, 0)):
        inputs = ChainSamplingInputs(
            candidates=torch.tensor([[0, 1, 1]]),
            target_probs=torch.tensor([[[0.2, 0.3, 0.5], [0.5, 0.4, 0.1], [1.0, 0.0, 0.0]]]),
            draft_probs=torch.tensor([[[0.4, 0.2, 0.4], [0.2, 0.8, 0.0]]]),
            coins=torch.tensor([[0.5, 0.9]]), keys=torch.tensor([key]), positions=torch.tensor([5]),
        )
        want = chain_ref.verify_chain_sampling_reference(inputs)
        assert want.accept_len.tolist() == [1] and want.output_tokens.tolist() == [[1, token, -1]]
        _same(chain_torch.verify_chain_sampling_torch(inputs), want)
        _same(chain_triton.verify_chain_sampling_triton(inputs, block_v=16), want)


# ------------------------------------------------------------------------- sampling parameters


def _params_inputs(b, n, vocab, *, probabilities, with_draft, ragged, seed=0):
    gen = _gen(seed)
    target = 3 * torch.randn(b, n, vocab, generator=gen)
    draft = target[:, : n - 1] + torch.randn(b, n - 1, vocab, generator=gen)
    drafts = torch.multinomial(
        torch.softmax(draft.reshape(-1, vocab), -1), 1, generator=gen
    ).reshape(b, n - 1)
    drafts[::3] = target[::3, : n - 1].argmax(-1)  # greedy requests (r % 6 == 0) accept some
    candidates = torch.cat([torch.zeros(b, 1, dtype=torch.int64), drafts], 1)
    if probabilities:
        target, draft = torch.softmax(target, -1), torch.softmax(draft, -1)
    params = mixed_demo_params(b)  # seeded: each request's key is its seed
    keys, positions = params.seed.clone(), torch.arange(b)
    coins = torch.tensor([[accept_uniform(int(keys[r]), int(positions[r]) + i, int(x))
                           for i, x in enumerate(drafts[r].tolist())] for r in range(b)])
    return ChainParamsInputs(
        candidates=candidates, target=target, draft=draft if with_draft else None,
        params=params, coins=coins, keys=keys, positions=positions,
        verify_lens=_ragged(b, n, seed + 1) if ragged else None, probabilities=probabilities,
    )


@pytest.mark.parametrize("probabilities", [False, True])
@pytest.mark.parametrize("with_draft", [False, True])
@pytest.mark.parametrize("ragged", [False, True])
def test_params_torch_and_triton_equal_reference(probabilities, with_draft, ragged):
    inputs = _params_inputs(
        12, 4, 64, probabilities=probabilities, with_draft=with_draft, ragged=ragged
    )
    want = params_ref.verify_chain_with_params_reference(inputs)
    got = verify_chain_with_params(
        inputs.candidates, inputs.target, inputs.draft, params=inputs.params,
        probabilities=probabilities, coins=inputs.coins, positions=inputs.positions,
        verify_lens=inputs.verify_lens, backend="torch",
    )
    _same(got, want, params=True)
    # the stream's own acceptance coins: the seeded requests' draws are the reference's
    drawn = verify_chain_with_params(
        inputs.candidates, inputs.target, inputs.draft, params=inputs.params,
        probabilities=probabilities, positions=inputs.positions,
        verify_lens=inputs.verify_lens, backend="torch",
    )
    _same(drawn, want, params=True)
    _same(params_triton.verify_chain_with_params_triton(inputs, block_v=16), want, params=True)
    assert len(set(want.accept_len.tolist())) >= 2


def test_params_invalid_requests_match_reference():
    """With value checks off, a request with a bad parameter accepts nothing and emits -1, in
    every implementation."""
    inputs = _params_inputs(6, 3, 64, probabilities=False, with_draft=True, ragged=False)
    good = inputs.params
    params = SamplingParams(
        temperature=good.temperature.clone(), top_k=good.top_k.clone(),
        top_p=good.top_p.clone(), min_p=good.min_p.clone(), seed=good.seed.clone(),
    )
    params.top_p[1] = 0.0
    params.temperature[4] = -1.0
    inputs = ChainParamsInputs(
        candidates=inputs.candidates, target=inputs.target, draft=inputs.draft, params=params,
        coins=inputs.coins, keys=inputs.keys, positions=inputs.positions,
    )
    want = params_ref.verify_chain_with_params_reference(inputs)
    assert want.param_error.tolist() == [False, True, False, False, True, False]
    assert want.output_tokens[1].tolist() == [-1, -1, -1]
    _same(params_torch.verify_chain_with_params_torch(inputs), want, params=True)
    _same(params_triton.verify_chain_with_params_triton(inputs, block_v=16), want, params=True)


# ------------------------------------------------------------------- sampling primitives


def test_inverse_cdf_equals_reference():
    gen = _gen(7)
    weights = torch.rand(40, 33, generator=gen) * (torch.rand(40, 33, generator=gen) > 0.5)
    weights[0] = 0.0  # no mass: index 0
    weights[1, :-1] = 0.0  # one positive entry, at the end
    coins = torch.rand(40, generator=gen)
    coins[2] = 0.0
    got = inverse_cdf_sample(weights, coins)
    want = [sampling_ref.inverse_cdf_reference(w, float(c))
            for w, c in zip(weights.tolist(), coins.tolist(), strict=True)]
    assert got.tolist() == want
    cdf = torch.cumsum(weights, -1)  # the non-searchsorted branch (no known sign)
    assert sampling_torch.inverse_cdf_from_cdf(weights[None], cdf[None], coins[None]).tolist() \
        == [want]


def test_residual_weights_equal_reference():
    gen = _gen(8)
    p = torch.softmax(torch.randn(6, 9, generator=gen), -1)
    q = torch.softmax(torch.randn(6, 9, generator=gen), -1)
    q[0] = p[0]  # no residual mass: falls back to p
    got = residual_weights(p, q)
    want = [sampling_ref.residual_reference(a, b) for a, b in zip(p.tolist(), q.tolist(),
                                                                   strict=True)]
    assert got.tolist() == want
    exclude = torch.tensor([0, -1, 3, 8, 20, 2])
    got = residual_weights(p, exclude=exclude)
    want = [sampling_ref.residual_reference(a, None, int(x))
            for a, x in zip(p.tolist(), exclude.tolist(), strict=True)]
    assert got.tolist() == want


def test_seeded_coins_equal_reference():
    seeds = [0, 1, 2**31 - 1, 2**40 + 5]
    offsets = torch.tensor([0, 7, 2**33 + 3])
    for seed in seeds:
        got = sampling_torch.hash_coins(seed, offsets[:, None], torch.arange(6))
        want = [[sampling_ref.coin_reference(seed, int(o), c) for c in range(6)]
                for o in offsets.tolist()]
        assert got.tolist() == want
    assert uniform_coins((3, 6), device="cpu", seed=seeds[1], offsets=offsets).tolist() == [
        [sampling_ref.coin_reference(seeds[1], int(o), c) for c in range(6)]
        for o in offsets.tolist()
    ]


def test_request_coins_equal_reference():
    params = SamplingParams.of(3, temperature=1.0, seed=[5, 2**35, 9])
    got = request_coins(params, 4, offsets=torch.tensor([3, 0, 11]), generator=None)
    want = [[sampling_ref.coin_reference(s, o, c) for c in range(4)]
            for s, o in ((5, 3), (2**35, 0), (9, 11))]
    assert got.tolist() == want


def test_exponential_race_equals_reference():
    gen = _gen(9)
    probs = torch.softmax(torch.randn(20, 17, generator=gen), -1)
    probs[3, 5:] = 0.0
    noise = torch.empty(20, 17).exponential_(generator=gen)
    noise[4, 2] = 0.0  # clamped to the smallest normal float32: it wins its row
    got = exponential_race_sample(probs, noise=noise)
    want = [sampling_ref.exponential_race_reference(p, e)
            for p, e in zip(probs.tolist(), noise.tolist(), strict=True)]
    assert got.tolist() == want and want[4] == 2


# ------------------------------------------------------------------------- argmax, filtering


def test_argmax_family_equals_reference():
    from specreg.kernels.argmax import row_argmax

    gen = _gen(10)
    rows = torch.randint(0, 4, (6, 2500), generator=gen).to(torch.float32)  # ties; folded path
    rows[1, 100] = float("nan")
    rows[2] = float("-inf")
    assert torch.equal(row_argmax(rows), row_argmax_reference(rows))


@pytest.mark.parametrize("probabilities", [False, True])
def test_filtering_torch_and_triton_equal_reference(probabilities):
    """The kept token set of every row: the torch statistics give the reference's support and
    values; the Triton thresholds equal them exactly (element keys: z = s / T, the same
    division, on logits; the probabilities themselves on probability inputs)."""
    gen = _gen(11)
    rows, vocab = 8, 40
    scores = 2 * torch.randn(rows, vocab, generator=gen)
    scores[0, :5] = scores[0, 5]  # ties at the top-k / top-p boundaries
    source = torch.softmax(scores, -1) if probabilities else scores
    temperature = torch.tensor([1.0, 0.7, 1.3, 0.5, 2.0, 1.0, 0.9, 1.1])
    top_k = torch.tensor([3, 0, 10, 0, 5, 40, 1, 0])
    top_p = torch.tensor([1.0, 0.8, 0.95, 0.5, 1.0, 0.9, 1.0, 0.3])
    min_p = torch.tensor([0.0, 0.0, 0.05, 0.1, 0.0, 0.2, 0.0, 0.0])
    z = scaled_scores(source, temperature, probabilities=probabilities)
    keys = source if probabilities else z  # what the filters rank
    stats = row_stats(z.clone(), top_k, top_p, min_p, keys=source if probabilities else None,
                      temperature=temperature)
    t_shift, t_threshold, t_norm = row_stats_triton(
        source, torch.arange(rows), temperature, top_k, top_p, min_p,
        probabilities=probabilities, block_v=16,
    )
    assert torch.equal(t_threshold, stats.threshold)
    for r in range(rows):
        want = filtered_distribution(
            source[r], temperature=float(temperature[r]), top_k=int(top_k[r]),
            top_p=float(top_p[r]), min_p=float(min_p[r]), probabilities=probabilities,
        )
        for threshold, shift, norm in ((stats.threshold, stats.shift, stats.norm),
                                       (t_threshold, t_shift, t_norm)):
            weight = torch.exp(z[r] - shift[r])
            kept = (keys[r] >= threshold[r]) & (weight >= min_p[r])
            assert torch.equal(kept, want > 0), r
            got = torch.where(kept, weight, 0.0) / norm[r]
            assert torch.allclose(got.double(), want, atol=1e-6), r


def test_keyed_stream_equals_an_independent_implementation():
    """The verifiers' draw keys and acceptance uniforms (`random_stream.reference.draw_lanes`,
    `accept_coin` and their torch twins) equal the independent re-implementation written from
    the stream's definition, for 64-bit keys of either sign, every role, large positions and
    token ids (a -1 padding id included)."""
    from specreg.kernels.random_stream import reference as stream_ref
    from specreg.kernels.random_stream import torch_impl as stream_torch
    from tests.support import independent_race

    keys = [0, 1, -1, 2**63 - 1, -(2**63), 0x1234_5678_9ABC_DEF0]
    positions = [0, 1, 7, 2**31 + 5, 2**40 - 1, 3]
    for role in (0, 1, 2):
        want = [independent_race.lanes(k, role, t) for k, t in zip(keys, positions, strict=True)]
        assert [stream_ref.draw_lanes(k, role, t)
                for k, t in zip(keys, positions, strict=True)] == want
        got = stream_torch.draw_lanes_torch(torch.tensor(keys), role, torch.tensor(positions))
        assert got.tolist() == [list(lanes) for lanes in want]
    drafts = torch.tensor([[0, 5, 2**20], [-1, 3, 7], [9, 9, 9], [1, 2, 3], [4, 0, 8],
                           [2**31 - 1, 6, 1]])
    got = stream_torch.accept_coins_torch(torch.tensor(keys), torch.tensor(positions), drafts)
    want = [[independent_race.accept_uniform(k, t + i, int(x)) for i, x in enumerate(row)]
            for k, t, row in zip(keys, positions, drafts.tolist(), strict=True)]
    assert got.tolist() == want
    assert [[stream_ref.accept_coin(k, t + i, int(x)) for i, x in enumerate(row)]
            for k, t, row in zip(keys, positions, drafts.tolist(), strict=True)] == want
