"""One set of numbers: the filters, the acceptance test, the rows the race draws from and the
logprobs read the same processed values, and filters on probability inputs decide on the
probabilities themselves.

Two defects this pins (both failed before the fix):

- a top-k over probability inputs kept a third token when two different float32 probabilities
  share a float32 log (`PAIR`: top_k 2 on [1 - a - b, a, b] kept all three, where FlashInfer
  and vLLM keep two), on every path: torch (short rows and the pivot search at V >= 4096),
  Triton and the reference;
- the acceptance test compared log u + log q(x) < log p(x) from exp / log of the scaled score,
  while the race drew from rows computed through exp2: a coin between the two numbers decided
  differently from the row the race read, and the logprobs were not the logs of those rows.
"""

from __future__ import annotations

import math

import pytest
import torch

from specreg.kernels.chain.types import ChainVerifyResult
from specreg.kernels.chain_params import prepare_chain_params, verify_chain_with_params
from specreg.kernels.chain_params.reference import verify_chain_with_params_reference
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.filtering.torch_impl import PIVOT_MIN_VOCAB, filtered_rows, gathered_row_stats
from specreg.kernels.logprobs import emitted_logprobs
from specreg.contract.sampling_params import SamplingParams

#: Two different float32 probabilities whose float32 logs are equal (issue: exact sampling).
PAIR = (6.238944479264319e-05, 6.238943024072796e-05)
#: Vocabulary sizes: a short row (torch.topk prefix) and one on the pivot search.
VOCABS = (3, 2 * PIVOT_MIN_VOCAB)


def _pair_row(vocab: int) -> tuple[torch.Tensor, list[int]]:
    """A probability row holding [1 - a - b, a, b] at three spread positions (their ids, in
    that order), every other entry a tiny probability below b."""
    a, b = PAIR
    if vocab == 3:
        ids = [0, 1, 2]
        row = torch.zeros(3, dtype=torch.float64)
    else:
        ids = [vocab // 3 + 5, 17, vocab - 2]  # different pivot columns, the largest mid-row
        row = torch.full((vocab,), 1e-12, dtype=torch.float64)
    row[ids[0]] = 1.0 - a - b - float(row.sum()) + float(row[ids[0]])
    row[ids[1]], row[ids[2]] = a, b
    out = row.to(torch.float32)
    assert float(out[ids[1]]) == a and float(out[ids[2]]) == b
    return out, ids


def test_pair_shares_its_float32_log():
    """The premise: a != b, yet log(a) == log(b) in float32 (so a filter deciding on log p sees
    a tie at the top-k cut)."""
    a, b = (torch.tensor(v, dtype=torch.float32) for v in PAIR)
    assert bool(a != b) and bool(torch.log(a) == torch.log(b))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_reference_top_k_on_probabilities_keeps_two(temperature):
    row, ids = _pair_row(3)
    dist = filtered_distribution(row, temperature=temperature, top_k=2, probabilities=True)
    assert (dist > 0).nonzero().flatten().tolist() == ids[:2]


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_torch_filtered_row_top_k_on_probabilities_keeps_two(vocab, temperature):
    row, ids = _pair_row(vocab)
    flat = row[None]
    one = torch.tensor([temperature])
    stats = gathered_row_stats(flat, torch.tensor([0]), one, torch.tensor([2]), torch.ones(1),
                               torch.zeros(1), probabilities=True)
    got = filtered_rows(flat, one, stats, torch.zeros(1), probabilities=True)[0]
    assert sorted((got > 0).nonzero().flatten().tolist()) == sorted(ids[:2])


def _fake_result(tokens: list[int]) -> ChainVerifyResult:
    """A chain result that emitted `tokens` (all accepted but the last), for the logprobs."""
    n = len(tokens)
    out = torch.tensor([tokens])
    return ChainVerifyResult(accept_len=torch.tensor([n - 1]), bonus=out[:, -1],
                             output_tokens=out)


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("vocab", VOCABS)
def test_logprobs_top_k_on_probabilities_drop_the_third(backend, vocab):
    """Processed logprobs of the three tokens under top_k 2: the third is dropped (-inf), on the
    short path, the pivot path and Triton; the top-3 alternatives end with it at -inf."""
    row, ids = _pair_row(vocab)
    target = row.expand(1, 3, vocab).contiguous()
    params = SamplingParams.of(1, temperature=0.7, top_k=2)
    out = emitted_logprobs(_fake_result(ids), target, params=params, top_n=3,
                           probabilities=True, backend=backend)
    assert torch.isfinite(out.token[0, :2]).all(), out.token
    assert out.token[0, 2] == float("-inf"), out.token
    assert out.top_tokens[0, 0, :2].tolist() == ids[:2]
    assert torch.isfinite(out.top_logprobs[0, 0, :2]).all()
    assert out.top_logprobs[0, 0, 2] == float("-inf")


@pytest.mark.parametrize("backend", ["torch", "triton", "reference"])
@pytest.mark.parametrize("vocab", VOCABS)
def test_verify_top_k_on_probabilities_never_accepts_the_third(backend, vocab):
    """Target-only chain, coin 0: a draft is accepted iff its filtered probability is > 0. The
    third token (dropped by top_k 2) is rejected, the second accepted, on every backend."""
    row, ids = _pair_row(vocab)
    target = row.expand(2, 2, vocab).contiguous()
    candidates = torch.tensor([[ids[0], ids[2]], [ids[0], ids[1]]])
    params = SamplingParams.of(2, temperature=1.0, top_k=2)
    kwargs = dict(params=params, probabilities=True, coins=torch.zeros(2, 1),
                  keys=torch.tensor([5, 6]))
    if backend == "reference":
        result = verify_chain_with_params_reference(
            prepare_chain_params(candidates, target, None, **kwargs)
        )
    else:
        result = verify_chain_with_params(candidates, target, None, backend=backend, **kwargs)
    assert result.accept_len.tolist() == [0, 1]
    assert int(result.output_tokens[0, 1]) != ids[2]


# ---------------------------------------------------------------------------------------------
# The acceptance test and the logprobs read the rows the race reads (CPU torch)


def _processed_batch(probabilities: bool, vocab: int = 300):
    gen = torch.Generator().manual_seed(11)
    b = 8
    target = 3 * torch.randn(b, 2, vocab, generator=gen)
    draft = target[:, :1] + torch.randn(b, 1, vocab, generator=gen)
    target[:, :, : vocab // 10] -= 200.0  # far below the max: weights flushed / subnormal
    if probabilities:
        target, draft = torch.softmax(target, -1), torch.softmax(draft, -1)
    params = SamplingParams.of(
        b, temperature=[1.0, 0.7, 1.3, 0.4, 1.0, 2.0, 0.9, 1.0], top_k=[0, 40, 0, 0, 7, 0, 0, 90],
        top_p=[1.0, 1.0, 0.9, 1.0, 1.0, 0.8, 1.0, 0.95],
        min_p=[0.0, 0.0, 0.0, 0.05, 0.0, 0.0, 0.2, 0.01],
    )
    return target, draft, params


def _rows_the_race_reads(scores: torch.Tensor, params: SamplingParams, probabilities: bool):
    """The filtered rows [b, V] of position 0 as the torch race reads them."""
    flat = scores[:, 0]
    index = torch.arange(flat.shape[0])
    stats = gathered_row_stats(flat, index, params.temperature, params.top_k, params.top_p,
                               params.min_p, probabilities=probabilities)
    return filtered_rows(flat, params.temperature, stats, params.min_p,
                         probabilities=probabilities)


@pytest.mark.parametrize("probabilities", [False, True])
@pytest.mark.parametrize("with_draft", [False, True])
def test_acceptance_compares_what_the_rows_hold(probabilities, with_draft):
    """With coins at and next to each draft's boundary p(x) / q(x), computed from the very rows
    the race reads, the torch verifier accepts exactly when u * q(x) < p(x) (exact in float64)."""
    target, draft, params = _processed_batch(probabilities)
    b, _, vocab = target.shape
    p = _rows_the_race_reads(target, params, probabilities)
    q = _rows_the_race_reads(draft, params, probabilities) if with_draft else torch.ones_like(p)
    gen = torch.Generator().manual_seed(3)
    checked = 0
    for trial in range(6):
        # drafts drawn from q (or p, target-only), so most have q(x) > 0 and p(x) > 0
        x = torch.multinomial(q if with_draft else p, 1, generator=gen).flatten()
        px, qx = p[torch.arange(b), x].double(), q[torch.arange(b), x].double()
        boundary = (px / qx).clamp(0, 1 - 2**-24).to(torch.float32)
        step = [0.0, 1.0, -1.0][trial % 3]
        coins = boundary if step == 0 else torch.nextafter(
            boundary, torch.tensor(step if step > 0 else 0.0)
        )
        coins = coins.clamp(0, 1 - 2**-24)
        candidates = torch.stack([torch.zeros_like(x), x], 1)
        result = verify_chain_with_params(
            candidates, target, draft if with_draft else None, params=params,
            probabilities=probabilities, coins=coins[:, None], keys=torch.arange(b),
            backend="torch",
        )
        want = (coins.double() * qx < px).to(torch.int64)
        assert result.accept_len.tolist() == want.tolist(), (trial, px, qx, coins)
        checked += int((px > 0).sum())
    assert checked >= 20


@pytest.mark.parametrize("probabilities", [False, True])
def test_logprobs_are_the_logs_of_the_rows(probabilities):
    """Processed logprobs (torch) are log of the float32 values the race reads, bit for bit, for
    the emitted token and for the top-n alternatives (-inf where the row holds 0)."""
    target, _, params = _processed_batch(probabilities)
    b, _, vocab = target.shape
    p = _rows_the_race_reads(target, params, probabilities)
    tokens = torch.argsort(p, -1, descending=True)[:, 3]  # a kept token, not the top one
    tokens[2] = 1  # one far below the max (flushed: -inf)
    out = torch.stack([tokens, tokens], 1)
    result = ChainVerifyResult(accept_len=torch.zeros(b, dtype=torch.int64), bonus=tokens,
                               output_tokens=out)
    lp = emitted_logprobs(result, target, params=params, top_n=5, probabilities=probabilities,
                          backend="torch")
    want = torch.log(p[torch.arange(b), tokens])
    assert torch.equal(lp.token[:, 0], want), (lp.token[:, 0] - want)
    top = p.gather(1, lp.top_tokens[:, 0])
    assert torch.equal(lp.top_logprobs[:, 0], torch.log(top))
    assert math.isinf(float(lp.token[2, 0]))


# ---------------------------------------------------------------------------------------------
# Zero probabilities (a grammar mask on probability rows): keys -inf, as their log


@pytest.mark.parametrize("vocab", [40, 2 * PIVOT_MIN_VOCAB])
def test_zero_probabilities_are_masked_keys_on_every_backend(vocab):
    """Probability rows with most tokens at 0 and a top-k past the nonzero ones, top-p and
    min-p: torch (short or pivot rows) and Triton give the same thresholds (element keys;
    -inf where the cut falls among the zeros) and keep the reference's tokens."""
    from specreg.kernels.filtering.triton_impl import row_stats_triton

    gen = torch.Generator().manual_seed(4)
    rows = torch.softmax(2 * torch.randn(4, vocab, generator=gen), -1)
    rows[:, 7:] = torch.where(torch.rand(4, vocab - 7, generator=gen) < 0.9, 0.0, rows[:, 7:])
    rows /= rows.sum(-1, keepdim=True)
    positive = (rows > 0).sum(-1)
    temperature = torch.tensor([1.0, 0.7, 1.5, 1.0])
    top_k = torch.stack([positive[0] + 3, positive[1] * 0, positive[2] * 0 + 5, positive[3] + 1])
    top_p = torch.tensor([1.0, 0.9, 0.95, 0.999999])
    min_p = torch.tensor([0.0, 0.0, 0.01, 0.0])
    index = torch.arange(4)
    stats = gathered_row_stats(rows, index, temperature, top_k, top_p, min_p,
                               probabilities=True)
    shift, threshold, norm = row_stats_triton(rows, index, temperature, top_k, top_p, min_p,
                                              probabilities=True, block_v=32 if vocab < 1024 else 1024)
    assert torch.equal(threshold, stats.threshold)
    assert float(stats.threshold[0]) == float("-inf")  # top-k past the positives keeps all
    got = filtered_rows(rows, temperature, stats, min_p, probabilities=True)
    for r in range(4):
        want = filtered_distribution(rows[r], temperature=float(temperature[r]),
                                     top_k=int(top_k[r]), top_p=float(top_p[r]),
                                     min_p=float(min_p[r]), probabilities=True)
        assert torch.equal(got[r] > 0, want > 0), r
        assert torch.allclose(got[r].double(), want, atol=1e-6), r


def test_the_one_log_is_torch_log_with_zeros_at_minus_inf():
    """`log_` / `log_keys_`: torch.log's bits on positive values wherever they sit, -inf on
    zeros (and the -inf padding), and the keys' zeros set to -inf."""
    from specreg.kernels.exp_log import log_, log_keys_

    gen = torch.Generator().manual_seed(1)
    p = torch.rand(5000, generator=gen)
    p[::3] = 0.0
    p[1] = float("-inf")
    positive = p > 0
    for out in (log_(p, fresh=True), log_(p.clone())):
        assert torch.equal(out[positive], torch.log(p[positive]))
        assert bool((out[~positive] == float("-inf")).all())
    keys = p.clone()
    z = log_keys_(keys)
    assert torch.equal(z, log_(p, fresh=True))
    assert torch.equal(keys[positive], p[positive]) and bool((keys[~positive] == float("-inf")).all())
    alone = torch.stack([log_(p[i : i + 1].clone())[0] for i in range(0, 300)])
    assert torch.equal(alone, log_(p, fresh=True)[:300])
