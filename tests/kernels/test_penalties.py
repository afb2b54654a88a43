"""Penalties and logit bias at every verified position: torch and Triton (interpreter) against
the per-position reference; greedy speculative decoding equals plain penalised greedy decoding
token for token; the first two sampled tokens follow plain penalised sampling (chi-square at a
fixed seed) and a control that forgets the drafts before a position fails."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from specreg.errors import KernelInputError
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.penalties import Penalties, apply_penalties_, chain_context
from specreg.kernels.penalties.reference import penalised_row
from specreg.contract.sampling_params import SamplingParams

V = 23


def _penalties(b, gen, vocab=V):
    prompt = [torch.randint(0, vocab, (int(torch.randint(0, 6, (1,), generator=gen)),),
                            generator=gen).tolist() for _ in range(b)]
    output = [torch.randint(0, 6, (int(torch.randint(0, 9, (1,), generator=gen)),),
                            generator=gen).tolist() for _ in range(b)]  # low ids: repeats
    bias = [{int(t): float(v) for t, v in zip(torch.randperm(vocab, generator=gen)[:3].tolist(),
                                               (torch.randn(3, generator=gen) * 2).tolist(),
                                               strict=True)} if r % 2 else {} for r in range(b)]
    return Penalties.of(b, repetition=(torch.rand(b, generator=gen) + 0.6).tolist(),
                        frequency=(torch.rand(b, generator=gen) * 2 - 0.5).tolist(),
                        presence=(torch.rand(b, generator=gen) - 0.3).tolist(),
                        prompt=prompt, output=output, logit_bias=bias)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_torch_and_triton_equal_the_reference(backend):
    gen = torch.Generator().manual_seed(4)
    b, n = 7, 5
    logits = 3 * torch.randn(b, n, V, generator=gen)
    cand = torch.randint(0, 6, (b, n), generator=gen)
    pen = _penalties(b, gen)
    context = chain_context(cand)
    want = torch.stack([torch.stack([
        penalised_row(logits[r, j], pen, r, cand[r, 1:j + 1].tolist()) for j in range(n)])
        for r in range(b)])
    got = apply_penalties_(logits.clone(), pen, context, backend=backend)
    assert torch.allclose(got, want, rtol=1e-6, atol=1e-5)
    assert not torch.allclose(got, logits)  # the penalties did something


def _tables(seed):
    gen = torch.Generator().manual_seed(seed)
    target = 1.5 * torch.randn(V, V, generator=gen)
    target[:, :4] += 2.0  # a few likely tokens: repeats, so the penalties matter
    return target, target + 0.8 * torch.randn(V, V, generator=gen)


def _plain_greedy(target, pen, r, history, steps):
    out = []
    for _ in range(steps):
        row = penalised_row(target[history[-1] if not out else out[-1]], pen, r, out)
        out.append(int(row.argmax()))
    return out


def test_greedy_equals_plain_penalised_greedy():
    target_t, draft_t = _tables(2)
    gen = torch.Generator().manual_seed(0)
    b, gamma, steps = 6, 3, 16
    pen = _penalties(b, gen)
    base_out = [[int(t) for t in pen.output_tokens[r] if t >= 0] for r in range(b)]
    last = [row[-1] if row else 0 for row in base_out]
    plain = [_plain_greedy(target_t, pen, r, [last[r]], steps) for r in range(b)]
    emitted = [[] for _ in range(b)]
    params = SamplingParams.of(b, temperature=0.0)
    while min(len(e) for e in emitted) < steps:
        cand = torch.zeros(b, gamma + 1, dtype=torch.long)
        cand[:, 0] = torch.tensor([e[-1] if e else last[r] for r, e in enumerate(emitted)])
        for j in range(gamma):
            cand[:, j + 1] = draft_t[cand[:, j]].argmax(-1)
        step_pen = Penalties.of(b, repetition=pen.repetition.tolist(),
                                frequency=pen.frequency.tolist(), presence=pen.presence.tolist(),
                                prompt=[[int(t) for t in pen.prompt_tokens[r] if t >= 0] for r in range(b)],
                                output=[base_out[r] + emitted[r] for r in range(b)],
                                logit_bias=[{int(t): float(v) for t, v in zip(
                                    pen.bias_ids[r].tolist(), pen.bias_values[r].tolist(),
                                    strict=True) if t >= 0} for r in range(b)])
        out = verify_chain_with_params(cand, target_t[cand].clone(), None, params=params,
                                       penalties=step_pen)
        for r in range(b):
            emitted[r] += out.output_tokens[r, : int(out.accept_len[r]) + 1].tolist()
    # plain decoding's history: the output so far is base output + emitted (penalised_row's
    # context), so compare against the same rule with the base output in `pen`
    assert [e[:steps] for e in emitted] == plain


def _first_two(target_t, draft_t, pen, b, seed, control=False):
    gen = torch.Generator().manual_seed(seed)
    gamma = 2
    cand = torch.zeros(b, gamma + 1, dtype=torch.long)
    cand[:, 0] = 1
    for j in range(gamma):
        cand[:, j + 1] = torch.multinomial(torch.softmax(draft_t[cand[:, j]], -1), 1,
                                           generator=gen).squeeze(1)
    target = target_t[cand].clone()
    params = SamplingParams.of(b, temperature=1.0)
    if control:  # penalties counted over the output only, not the drafts before a position
        apply_penalties_(target, pen, torch.full((b, gamma + 1, 0), -1, dtype=torch.long))
        out = verify_chain_with_params(cand, target, draft_t[cand[:, :-1]], params=params,
                                       generator=gen)
    else:
        out = verify_chain_with_params(cand, target, draft_t[cand[:, :-1]], params=params,
                                       generator=gen, penalties=pen)
    first = out.output_tokens[:, 0]
    second = torch.where(out.accept_len >= 1, out.output_tokens[:, 1], -1)
    return first, second


def test_sampling_follows_plain_penalised_sampling_and_control_fails():
    target_t, draft_t = _tables(3)
    b = 20_000
    one = Penalties.of(1, repetition=1.8, frequency=1.0, presence=0.5, prompt=[[2]],
                       output=[[0, 1, 1]], logit_bias=[{3: 1.5, 5: -2.0}])
    pen = Penalties.of(b, repetition=1.8, frequency=1.0, presence=0.5, prompt=[[2]] * b,
                       output=[[0, 1, 1]] * b, logit_bias=[{3: 1.5, 5: -2.0}] * b)
    p1 = torch.softmax(penalised_row(target_t[1], one, 0, []).double(), -1)
    p2 = torch.stack([torch.softmax(penalised_row(target_t[t], one, 0, [t]).double(), -1)
                      for t in range(V)])
    pvalues = {}
    for control in (False, True):
        first, second = _first_two(target_t, draft_t, pen, b, seed=7, control=control)
        first_p = float(chisquare(torch.bincount(first, minlength=V).double(), p1 * b).pvalue)
        both = second >= 0  # the pairs where the first draft was accepted
        pairs = first[both] * V + second[both]
        observed = torch.bincount(pairs, minlength=V * V).double()
        # P(second | first, first draft accepted) is plain decoding's p2(first): the pair law
        # is sum over accepted first tokens of count(first) * p2
        firsts = torch.bincount(first[both], minlength=V).double()
        expected = (firsts[:, None] * p2).reshape(-1)
        keep = expected > 5
        rest = observed[~keep].sum(), expected[~keep].sum()
        obs = torch.cat([observed[keep], rest[0][None]])
        exp = torch.cat([expected[keep], rest[1][None]])
        pvalues[control] = (first_p, float(chisquare(obs, exp * obs.sum() / exp.sum()).pvalue))
    print("p-values (first, second) without and with the control:", pvalues)
    assert pvalues[False][0] > 1e-3 and pvalues[False][1] > 1e-3, pvalues
    # the control penalises position 0 as plain decoding does (no draft before it), and the
    # second token's position without the first draft: only the second token is wrong
    assert pvalues[True][0] > 1e-3 and pvalues[True][1] < 1e-6, pvalues


def test_bad_penalties_are_coded_all_at_once():
    logits = torch.randn(2, 3, V)
    context = chain_context(torch.zeros(2, 3, dtype=torch.long))
    bad = Penalties.of(2, repetition=[0.0, 1.0], frequency=[3.0, 0.0], presence=0.0,
                       output=[[V], []], logit_bias=[{1: float("inf")}, {}])
    with pytest.raises(KernelInputError) as info:
        apply_penalties_(logits, bad, context)
    assert sorted(info.value.codes) == ["SR919", "SR919", "SR919", "SR920"]
    with pytest.raises(KernelInputError) as info:
        apply_penalties_(logits, Penalties.of(3), context)
    assert set(info.value.codes) == {"SR920"}
