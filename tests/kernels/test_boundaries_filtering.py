"""The filtering rule at its exact boundaries, torch and Triton (interpreter) against the plain
reference (`filtering.reference.filtered_distribution`, the default rule).

Inputs are built so that the boundary is hit exactly, not approximately: dyadic probabilities
([.5, .25, .25], ...) whose float32 weights, sums and goals are exact, so a top-p mass lands
exactly on p * total and a token's weight exactly on min_p. Each case is checked three ways:
the filtered row of the torch statistics, the row of the Triton statistics (`row_stats_triton`),
and a chain verification under those parameters whose draft is the boundary token with a coin of
0 (accepted iff the token is kept), on both backends against `verify_chain_with_params`'s
reference.
"""

import math

import pytest
import torch

from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.chain_params.reference import verify_chain_with_params_reference
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.filtering.torch_impl import (
    TOP_P_PREFIX,
    RowStats,
    filter_keys,
    filtered_rows,
    row_stats,
    scaled_scores,
)
from specreg.kernels.filtering.triton_impl import row_stats_triton
from specreg.contract.filter_order import FILTER_RULES
from specreg.contract.sampling_params import SamplingParams

#: float32 exp(-2) (torch's, correctly rounded): just below e**-2, so a weight exp(-2) sits
#: exactly at min_p = E2 in float32 (the kernels) and just above it in float64 (the reference)
E2 = float(torch.tensor(-2.0).exp())
#: the next float32 above E2: a min_p just past the weight exp(-2)
E2_UP = float(torch.nextafter(torch.tensor(E2), torch.tensor(1.0)))


def _dyadic(*probs):
    """Scores log(p) of dyadic probabilities: their float32 weights p / max p are exact."""
    return [math.log(p) for p in probs], True


# Every top_p and min_p is a float32 value (the kernels read the parameters as float32).
# name: ((scores, also as probabilities), parameters, tokens the default rule keeps, the
# boundary token drafted in the chain test)
CASES = {
    # the mass above token 1 is .5 = top_p * total exactly: not < p, so token 1 (and its tie,
    # token 2) is cut; only the argmax stays
    "top_p_mass_exactly_at_the_goal": (_dyadic(0.5, 0.25, 0.25), dict(top_p=0.5), {0}, 1),
    "top_p_mass_exactly_at_a_deeper_goal": (
        _dyadic(0.5, 0.25, 0.125, 0.125), dict(top_p=0.75), {0, 1}, 2,
    ),
    # just past the goal: the mass above token 1 (.5) is now < p, token 1 and its tie stay
    "top_p_just_past_the_goal": (_dyadic(0.5, 0.25, 0.25), dict(top_p=0.5000001), {0, 1, 2}, 1),
    # top-p on the top-k survivors renormalised: weights 1, .5, .25, .25 (the .125 is cut by
    # top_k = 4), total 2, goal .75 * 2 = 1.5 = the mass above the .25 pair exactly
    "top_p_at_the_goal_after_top_k": (
        _dyadic(0.25, 0.5, 0.125, 0.125, 0.0625), dict(top_k=4, top_p=0.75), {0, 1}, 2,
    ),
    # min_p = 1 keeps exactly the tokens at the largest probability
    "min_p_one": (_dyadic(0.25, 0.5, 0.25), dict(min_p=1.0), {1}, 0),
    "min_p_one_with_ties_at_the_max": (
        _dyadic(0.25, 0.125, 0.25, 0.25, 0.125), dict(min_p=1.0), {0, 2, 3}, 3,
    ),
    # token 0's weight is exactly min_p: kept (>=); tokens 2 and 3 lie below it
    "a_token_exactly_at_the_min_p_cut_off": (
        ([-2.0, 0.0, -3.0, -2.5], False), dict(min_p=E2), {0, 1}, 0,
    ),
    "every_other_token_exactly_at_the_min_p_cut_off": (
        ([0.0, -2.0, -2.0], False), dict(min_p=E2), {0, 1, 2}, 2,
    ),
    "a_token_just_below_the_min_p_cut_off": (
        ([-2.0, 0.0, -3.0, -2.5], False), dict(min_p=E2_UP), {1}, 0,
    ),
    "top_k_1_keeps_the_argmax": (_dyadic(0.25, 0.125, 0.5, 0.125), dict(top_k=1), {2}, 0),
    # top_p = 1 keeps everything, even tokens whose weight (e**-20) vanishes in the float32 sum:
    # a top-p search at goal = 1 * total would find the goal reached at the argmax
    "top_p_one_keeps_tokens_below_float32_resolution": (
        ([0.0, -20.0, -20.0], False), dict(top_p=1.0), {0, 1, 2}, 1,
    ),
}
FORMS = [(name, probabilities) for name, ((_, dyadic), *_) in sorted(CASES.items())
         for probabilities in ([False, True] if dyadic else [False])]  # fmt: skip


def _params(count, **rule):
    return dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0) | rule, count


def _scores(name, probabilities):
    values = torch.tensor(CASES[name][0][0], dtype=torch.float32)
    return values.exp() if probabilities else values


def _torch_row(scores, rule, probabilities):
    one = torch.full((1,), float(rule["temperature"]))
    top_k, top_p = torch.tensor([rule["top_k"]]), torch.tensor([rule["top_p"]])
    min_p = torch.tensor([rule["min_p"]])
    z = scaled_scores(scores[None], one, probabilities=probabilities)
    keys = filter_keys(scores[None], probabilities=probabilities)  # probabilities rank as p
    stats = row_stats(z, top_k, top_p, min_p, keys=keys, temperature=one)
    return filtered_rows(scores[None], one, stats, min_p, probabilities=probabilities)[0], stats


def _triton_row(scores, rule, probabilities, block_v):
    one = torch.full((1,), float(rule["temperature"]))
    top_k, top_p = torch.tensor([rule["top_k"]]), torch.tensor([rule["top_p"]])
    min_p = torch.tensor([rule["min_p"]])
    shift, threshold, norm = row_stats_triton(
        scores[None], torch.zeros(1, dtype=torch.int64), one, top_k, top_p, min_p,
        probabilities=probabilities, block_v=block_v,
    )
    stats = RowStats(shift=shift, threshold=threshold, norm=norm)
    return filtered_rows(scores[None], one, stats, min_p, probabilities=probabilities)[0], stats


def test_the_dyadic_weights_are_exact():
    """The precondition of the dyadic cases: the float32 weights exp(z - max z), from logits or
    from probabilities, equal p / max p exactly, so sums and goals are exact and each boundary
    is hit, not approached."""
    for name, probabilities in FORMS:
        if CASES[name][0][1]:
            z = torch.log(_scores(name, True)) if probabilities else _scores(name, False)
            probs = _scores(name, True).double()
            assert torch.equal((z - z.max()).exp().double(), probs / probs.max()), name


@pytest.mark.parametrize(("name", "probabilities"), FORMS)
def test_filter_at_an_exact_boundary_equals_the_reference(name, probabilities):
    _, rule, kept, _ = CASES[name]
    rule = _params(1, **rule)[0]
    scores = _scores(name, probabilities)
    want = filtered_distribution(scores, probabilities=probabilities, **rule)
    assert set((want > 0).nonzero().flatten().tolist()) == kept  # the rule, as documented
    for got, stats in (_torch_row(scores, rule, probabilities),
                       _triton_row(scores, rule, probabilities, block_v=4)):  # fmt: skip
        assert set((got > 0).nonzero().flatten().tolist()) == kept
        assert torch.allclose(got.double(), want, rtol=0, atol=1e-7)
        z = torch.log(scores) if probabilities else scores
        weight = (z - z.max()).exp()
        assert float(stats.norm[0]) == pytest.approx(float(weight[sorted(kept)].sum()), rel=1e-6)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_a_boundary_token_is_accepted_iff_the_rule_keeps_it(backend):
    """Chain verification with every case in one batch (vocab padded with -inf), drafting each
    case's boundary token with a coin of 0: accepted iff its filtered p > 0. On torch two
    requests per case (a flat draft, a draft favouring the token), with and without a draft
    distribution; on Triton (the interpreter is slow) the favouring draft, with q."""
    names = sorted(CASES)
    vocab = max(len(CASES[name][0][0]) for name in names)
    target, draft, tokens, rules = [], [], [], []
    for name in names:
        _, rule, kept, token = CASES[name]
        row = torch.full((vocab,), float("-inf"))
        row[: len(CASES[name][0][0])] = _scores(name, probabilities=False)
        for favour in (0.0, 5.0) if backend == "torch" else (5.0,):
            target.append(torch.stack([row, row.roll(1)]))
            q = torch.where(row > float("-inf"), 0.0, float("-inf"))
            q[token] = favour
            draft.append(q[None])
            tokens.append(token)
            rules.append(_params(1, **rule)[0])
    b = len(tokens)
    target, draft = torch.stack(target), torch.stack(draft)
    candidates = torch.tensor([[0, token] for token in tokens])
    params = SamplingParams.of(b, **{key: [rule[key] for rule in rules] for key in rules[0]})
    coins = torch.zeros(b, 1)
    keys, positions = torch.arange(b) * 977 + 3, torch.arange(b) % 4
    per_case = b // len(names)
    expected = [int(CASES[name][3] in CASES[name][2]) for name in names for _ in range(per_case)]
    for q in (None, draft) if backend == "torch" else (draft,):
        inputs = ChainParamsInputs(candidates=candidates, target=target, draft=q, params=params,
                                   coins=coins, keys=keys, positions=positions)  # fmt: skip
        want = verify_chain_with_params_reference(inputs)
        got = verify_chain_with_params(candidates, target, q, params=params, coins=coins,
                                       keys=keys, positions=positions, backend=backend,
                                       block_v=16)
        assert want.accept_len.tolist() == expected
        assert torch.equal(got.accept_len, want.accept_len)
        assert torch.equal(got.output_tokens, want.output_tokens)


def _binned_row():
    """V = 5121: one token of weight 1, 1024 tied at 2**-10 (mass 1), 4096 tied at 2**-11
    (mass 2), one at e**-40. top_p = .5 puts the goal (2) exactly at the end of the second group, past the
    sorted prefix, so the binned search (`pivot.binned_top_p_threshold`) meets the exact boundary."""
    weights = [1.0] + [2.0**-10] * 1024 + [2.0**-11] * 4096
    scores = torch.tensor([math.log(w) for w in weights], dtype=torch.float32)
    assert torch.equal((scores - scores.max()).exp(), torch.tensor(weights))
    # and one token 40 logits below the max: past the last bin's edge (32 logits), it must fall
    # into the open-ended last bin of its own row
    return torch.cat([scores, torch.tensor([-40.0])])


def test_binned_top_p_search_at_an_exact_goal_equals_the_reference():
    scores = _binned_row()
    rule = dict(temperature=1.0, top_k=0, top_p=0.5, min_p=0.0)
    want = filtered_distribution(scores, **rule)
    kept = int((want > 0).sum())
    assert kept == 1025 and kept > TOP_P_PREFIX
    got, _ = _torch_row(scores, rule, probabilities=False)
    assert torch.equal(got > 0, want > 0)
    assert torch.allclose(got.double(), want, atol=1e-7)
    triton, _ = _triton_row(scores, rule, probabilities=False, block_v=1024)
    assert torch.equal(triton > 0, want > 0)


def test_binned_top_p_search_just_past_an_exact_goal_keeps_the_next_group():
    scores = _binned_row()
    rule = dict(temperature=1.0, top_k=0, top_p=0.5000001, min_p=0.0)
    want = filtered_distribution(scores, **rule)
    assert int((want > 0).sum()) == scores.numel() - 1  # all but the far token
    got, _ = _torch_row(scores, rule, probabilities=False)
    assert torch.equal(got > 0, want > 0)
    triton, _ = _triton_row(scores, rule, probabilities=False, block_v=1024)
    assert torch.equal(triton > 0, want > 0)


def test_binned_top_p_search_when_rounding_puts_the_goal_past_the_total():
    """top_p = the largest float32 below 1 on a row whose float32 sum (the goal's base) rounds
    above its binned total: no bin reaches the goal, the search ends in the last bin, never indexing
    past its tokens, and keeps what the rule keeps (all but the e**-40 token)."""
    gen = torch.Generator().manual_seed(480)
    scores = torch.rand(3000, generator=gen) * -3.0
    scores[0], scores[-1] = 0.0, -40.0
    top_p = 1.0 - 2.0**-24
    weight = (scores - scores.max()).exp()
    binned_total = weight.double().sum().float()
    assert float(torch.tensor(top_p) * weight.sum()) > float(binned_total)  # the premise
    rule = dict(temperature=1.0, top_k=0, top_p=top_p, min_p=0.0)
    want = filtered_distribution(scores, **rule)
    got, _ = _torch_row(scores, rule, probabilities=False)
    assert torch.equal(got > 0, want > 0) and int((want > 0).sum()) == scores.numel() - 1
    assert torch.allclose(got.double(), want, atol=1e-7)


def test_binned_top_p_search_of_several_rows_at_once_keeps_each_rows_bins_apart():
    """Two rows through the binned search in one call, at and just past the exact goal: each
    row's mass bins are its own (flat bin index = row * TOP_P_BINS + bin)."""
    scores = torch.stack([_binned_row(), _binned_row()])
    one, zero = torch.ones(2), torch.zeros(2)
    top_p = torch.tensor([0.5, 0.5000001])
    stats = row_stats(scaled_scores(scores, one, probabilities=False), torch.zeros(2).long(),
                      top_p, zero)  # fmt: skip
    got = filtered_rows(scores, one, stats, zero, probabilities=False)
    for r in range(2):
        want = filtered_distribution(scores[r], temperature=1.0, top_p=float(top_p[r]))
        assert torch.equal(got[r] > 0, want > 0), r
    assert [int((got[r] > 0).sum()) for r in range(2)] == [1025, scores.shape[1] - 1]


def test_binned_top_p_search_crossing_in_the_first_bin():
    """A nucleus of more than TOP_P_PREFIX tokens within 1/8 logit of the max: the goal is
    reached inside bin 0, with no mass before it."""
    gen = torch.Generator().manual_seed(7)
    near, far = torch.rand(700, generator=gen), torch.rand(300, generator=gen)
    scores = torch.cat([-0.1 * near, -5.0 - far])
    rule = dict(temperature=1.0, top_k=0, top_p=0.5, min_p=0.0)
    want = filtered_distribution(scores, **rule)
    got, _ = _torch_row(scores, rule, probabilities=False)
    assert int((want > 0).sum()) > TOP_P_PREFIX
    assert torch.equal(got > 0, want > 0)


def _order_rows(scores, order, **rule):
    """(torch's, Triton's filtered row, the reference's) in `order`."""
    rule = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0) | rule
    want = filtered_distribution(scores, order=order, **rule)
    one = torch.ones(1)
    top_k, top_p = torch.tensor([rule["top_k"]]), torch.tensor([rule["top_p"]])
    min_p = torch.tensor([rule["min_p"]])
    stats = row_stats(scaled_scores(scores[None], one, probabilities=False), top_k, top_p, min_p,
                      FILTER_RULES[order])  # fmt: skip
    shift, threshold, norm = row_stats_triton(
        scores[None], torch.zeros(1, dtype=torch.int64), one, top_k, top_p, min_p,
        probabilities=False, block_v=1024, rule=FILTER_RULES[order],
    )
    triton = RowStats(shift=shift, threshold=threshold, norm=norm)
    rows = [filtered_rows(scores[None], one, got, min_p, probabilities=False)[0]
            for got in (stats, triton)]  # fmt: skip
    return rows[0], rows[1], want


def _check_order(scores, order, **rule):
    """torch's and Triton's filtered rows in `order` against the reference: the same kept set
    and the same probabilities; returns the kept set."""
    *rows, want = _order_rows(scores, order, **rule)
    for row in rows:
        assert torch.equal(row > 0, want > 0), order
        assert torch.allclose(row.double(), want, rtol=0, atol=1e-7), order
    return set((want > 0).nonzero().flatten().tolist())


def test_vllm_order_counts_a_token_exactly_at_min_p_in_the_top_p_mass():
    """vLLM's order measures top-p over the min-p survivors, a token exactly at min_p included:
    weights 1, e**-1, e**-2 (= min_p in float32), total 1.503; top_p = .7 needs token 1 (mass
    above it .665 < .7). Without the min-p token in the base (total 1.368) token 0 alone would
    reach the goal. Also the min-p-only base (no top-k on the row)."""
    scores = torch.tensor([0.0, -1.0, -2.0, -6.0])
    assert _check_order(scores, "vllm", top_p=0.7, min_p=E2) == {0, 1}
    assert _check_order(scores, "vllm", top_k=3, top_p=0.7, min_p=E2) == {0, 1}


def test_sglang_order_keeps_the_token_exactly_at_the_top_p_boundary():
    """SGLang's order keeps a token whose mass above is exactly p (<=): dyadic [.5, .25, .25] at
    top_p .5 keeps all three on both backends (the default order keeps only the argmax). The
    kernels' float32 weights are exact here (`test_the_dyadic_weights_are_exact`), the float64
    reference's (exp of float32 log differences) are not, so at the exact goal the rule decides;
    just below and just above the goal the reference agrees."""
    scores = torch.tensor([math.log(p) for p in (0.5, 0.25, 0.25)])
    for row in _order_rows(scores, "sglang", top_p=0.5)[:2]:
        assert (row > 0).tolist() == [True, True, True]
    assert _check_order(scores, "specreg", top_p=0.5) == {0}
    assert _check_order(scores, "sglang", top_p=0.4999999) == {0}
    assert _check_order(scores, "sglang", top_p=0.5000001) == {0, 1, 2}


@pytest.mark.parametrize("order", ["sglang", "vllm"])
def test_nucleus_longer_than_the_sorted_prefix_in_each_order(order):
    """A flat row of 2,000 tokens, top_p .9, no top-k: the nucleus (~1,800 tokens) is longer than
    the sorted prefix (TOP_P_PREFIX), so the prefix cannot say where the goal is reached."""
    scores = -0.01 * torch.rand(2000, generator=torch.Generator().manual_seed(5))
    assert len(_check_order(scores, order, top_p=0.9)) > TOP_P_PREFIX


def test_binned_top_p_search_counts_the_ties_at_the_top_k_floor():
    """top_k = 600 on 500 tokens at 0, 1,000 tied at -1 and 700 at -3: top-k keeps the 1,000
    tied at its floor (-1), so top-p (.8) measures 1,500 tokens, past the sorted prefix of 600:
    the binned search must count the tokens exactly at the floor (the goal lies among them)."""
    scores = torch.cat([torch.zeros(500), torch.full((1000,), -1.0), torch.full((700,), -3.0)])
    assert len(_check_order(scores, "specreg", top_k=600, top_p=0.8)) == 1500


def test_binned_top_p_search_in_the_vllm_order_measures_the_min_p_survivors():
    """vLLM's order through the binned search (nuclei past the sorted prefix): (a) min-p (.2)
    cuts 3,000 tokens at -3 below a spread nucleus, whose mass must stay out of the goal and of
    the bins; (b) 2,000 tokens exactly at min_p = e**-2 (float32) belong to the measured set."""
    gen = torch.Generator().manual_seed(11)
    spread = torch.cat([torch.zeros(300), -0.5 - torch.rand(2000, generator=gen),
                        torch.full((3000,), -3.0)])  # fmt: skip
    kept = _check_order(spread, "vllm", top_p=0.5, min_p=0.2)
    assert 300 + TOP_P_PREFIX < len(kept) < 2300
    exact = torch.cat([torch.zeros(300), torch.full((2000,), -2.0), torch.full((2000,), -2.5)])
    assert len(_check_order(exact, "vllm", top_p=0.8, min_p=E2)) == 2300


def test_binned_top_p_search_in_the_sglang_order_keeps_the_exact_boundary():
    """SGLang's order (<=) on the dyadic binned row at top_p .5: the goal (2) is exactly the mass
    above the 4,096 tokens at 2**-11, which are kept (the default order cuts them). As in the
    prefix case, the kernels' weights are exact and the reference's are not; the reference
    agrees on either side of the goal."""
    scores = _binned_row()
    for row in _order_rows(scores, "sglang", top_p=0.5)[:2]:
        assert int((row > 0).sum()) == scores.numel() - 1
    assert len(_check_order(scores, "sglang", top_p=0.4999999)) == 1025


def test_binned_top_p_search_when_no_bin_reaches_the_goal_and_the_last_bin_is_empty():
    """top_p just below 1 on a row whose bins, summed in float32, stay below the goal: the search
    ends in the (clamped) last bin, which holds no token here; every token is kept."""
    gen = torch.Generator().manual_seed(8)  # the first seed whose bins fall short in float32
    scores = torch.rand(3000, generator=gen) * -3.0
    scores[0] = 0.0
    top_p = 1.0 - 2.0**-24
    weight = (scores - scores.max()).exp()
    bins = (-scores * 8).to(torch.int64)
    cum = torch.bincount(bins, weights=weight, minlength=256).float().cumsum(-1)
    assert float(cum[-1]) < float(torch.tensor(top_p) * weight.sum())  # the premise
    assert len(_check_order(scores, "specreg", top_p=top_p)) == 3000


def test_binned_top_p_search_of_rows_with_different_crossing_bin_widths():
    """Two rows through the binned search in one call whose crossing bins hold 3,000 and 1,000
    tokens: each row's crossing bin is searched whole."""
    gen = torch.Generator().manual_seed(12)
    wide = -0.1 * torch.rand(3000, generator=gen)
    narrow = torch.cat([-0.1 * torch.rand(1000, generator=gen), torch.full((2000,), -5.0)])
    scores = torch.stack([wide, narrow])
    one, zero, top_p = torch.ones(2), torch.zeros(2), torch.full((2,), 0.5)
    stats = row_stats(scaled_scores(scores, one, probabilities=False), torch.zeros(2).long(),
                      top_p, zero)  # fmt: skip
    got = filtered_rows(scores, one, stats, zero, probabilities=False)
    for r in range(2):
        want = filtered_distribution(scores[r], temperature=1.0, top_p=0.5)
        assert int((want > 0).sum()) > TOP_P_PREFIX
        assert torch.equal(got[r] > 0, want > 0), r


def test_sglang_order_goal_exactly_at_the_end_of_the_sorted_prefix():
    """Weights 1, 255 x 2**-8 (the sorted prefix of 256: mass 511/256), 1,022 x 2**-9 (mass
    511/256): at top_p .5 the goal is exactly the prefix's mass, so under SGLang's order (<=)
    the tokens after the prefix are kept, which the prefix alone cannot show."""
    weights = [1.0] + [2.0**-8] * 255 + [2.0**-9] * 1022
    scores = torch.tensor([math.log(w) for w in weights], dtype=torch.float32)
    assert torch.equal((scores - scores.max()).exp(), torch.tensor(weights))
    for row in _order_rows(scores, "sglang", top_p=0.5)[:2]:
        assert int((row > 0).sum()) == len(weights)
    assert len(_check_order(scores, "sglang", top_p=0.4999999)) == TOP_P_PREFIX


def test_binned_top_p_search_in_the_sglang_order_keeps_a_boundary_inside_the_crossing_bin():
    """The goal exactly reached inside the crossing bin, between two distinct scores of that bin:
    weights 1, 124 x 2**-8 and 256 x 2**-9 (exact: the goal S = 1.984375), then 1,024 tokens
    0.005 below the 2**-9 group (the same bin). top_p is the float32 whose product with the
    float32 total is S exactly (`premise`), so the 1,024 tokens have a mass above them of exactly
    p: SGLang's order keeps them, the default order cuts them. Torch only: the premise is about
    torch's float32 total; Triton sums the row in blocks, so its goal lands an ulp away and it
    meets a different (non-exact) boundary."""
    z = torch.tensor([0.0] + [math.log(2.0**-8)] * 124 + [math.log(2.0**-9)] * 256)
    z = torch.cat([z, torch.full((1024,), float(z[-1]) - 0.005)])
    weight = (z - z.max()).exp()
    goal = torch.tensor(1 + 124 / 256 + 0.5)
    assert float(weight[1]) == 2.0**-8 and float(weight[200]) == 2.0**-9
    top_p = torch.tensor(0.49928924441337585)
    assert float(top_p * weight.sum()) == float(goal)  # the premise
    bins = ((z.max() - z) * 8).to(torch.int64)
    assert int(bins[200]) == int(bins[-1])  # one crossing bin, two scores
    assert int((_order_rows(z, "sglang", top_p=float(top_p))[0] > 0).sum()) == z.numel()
    assert int((_order_rows(z, "specreg", top_p=float(top_p))[0] > 0).sum()) == 381
