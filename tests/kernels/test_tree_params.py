"""Tree verification with per-request sampling parameters: lossless against the filtered target
(chi-square at fixed seeds, with a negative control), greedy rows equal plain greedy, seeds
independent of the batch, Triton equal to torch, bad parameters flagged."""

import pytest
import torch
from scipy.stats import chisquare
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_params import verify_tree_with_params
from tests.kernels.test_tree_lossless import draw_without_replacement
from tests.support.eagle import RESULT_FIELDS, links, make_tree

from specreg.testing.demo_params import mixed_demo_params
from specreg.errors import KernelInputError
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.contract.sampling_params import SamplingParams
from tests.support.eagle import full_tree_links

V = 6
SAMPLES = 12_000


def _logits(base):
    row = torch.tensor(base, dtype=torch.float32)
    return torch.stack([row.roll(prev) for prev in range(V)])


def _table(logits, **params):
    return torch.stack([filtered_distribution(r, **params) for r in logits]).to(torch.float32)


CASES = {
    "top_p_cuts_inside_draft_support": (
        _logits([2.0, 1.6, 0.0, -0.5, -1.0, -3.0]), _logits([0.0, 0.2, 1.0, 0.9, 0.8, 0.5]),
        dict(temperature=1.0, top_p=0.6),
    ),
    "min_p_removes_draft_favourite": (
        _logits([1.5, 1.2, 1.0, -0.5, 0.6, -2.0]), _logits([0.0, -0.2, -0.5, 2.5, 1.8, -0.1]),
        dict(temperature=1.0, min_p=0.2),
    ),
    "high_temperature_with_top_k": (
        _logits([4.0, 1.0, 0.0, -2.0, 3.0, -4.0]), _logits([0.0, 4.0, 2.0, -1.0, -3.0, 1.0]),
        dict(temperature=3.0, top_k=4),
    ),
}


def _run(target_logits, draft_logits, params_kw, *, control=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    topk = 2
    n, _, ridx, nt, ns = full_tree_links(SAMPLES, topk)
    q_filtered = _table(draft_logits, **params_kw)
    cand = torch.zeros(SAMPLES, n, dtype=torch.int64)
    level1 = draw_without_replacement(q_filtered[cand[:, 0]], topk, gen)
    cand[:, 1:1 + topk] = level1
    for i in range(topk):
        kids = draw_without_replacement(q_filtered[level1[:, i]], topk, gen)
        cand[:, 1 + topk + i * topk:1 + topk + (i + 1) * topk] = kids
    if not control:
        out = verify_tree_with_params(
            cand, ridx, nt, ns, target_logits[cand], depth=2, draft=draft_logits[cand],
            params=SamplingParams.of(SAMPLES, **params_kw), generator=gen,
        )
    else:  # the filter and temperature reach the target only
        p_table = _table(target_logits, **params_kw)
        q_table = torch.softmax(draft_logits, -1)
        out = verify_tree_with_params(
            cand, ridx, nt, ns, p_table[cand], depth=2, draft=q_table[cand],
            probabilities=True, params=SamplingParams.of(SAMPLES, temperature=1.0),
            generator=gen,
        )
    return out.output_tokens[:, 0]


def _pvalue(tokens, probs):
    counts = torch.bincount(tokens, minlength=V).double()
    zero = probs <= 0
    if counts[zero].sum() > 0:
        return 0.0
    expected = probs[~zero].double()
    return float(chisquare(counts[~zero], expected / expected.sum() * counts[~zero].sum()).pvalue)


@pytest.mark.parametrize("name", sorted(CASES))
def test_tree_is_lossless_under_parameters_and_control_fails(name):
    target_logits, draft_logits, params_kw = CASES[name]
    expected = _table(target_logits, **params_kw)[0]
    seed = 40 + sorted(CASES).index(name)
    assert _pvalue(_run(target_logits, draft_logits, params_kw, seed=seed), expected) > 1e-3
    control = _run(target_logits, draft_logits, params_kw, control=True, seed=seed)
    assert _pvalue(control, expected) < 1e-6


def _case(seed, b=12, topk=2, steps=3, n=7, vocab=64):
    tree, gen = make_tree(b, topk, steps, n, vocab, seed)
    target = 2 * torch.randn(b, n, vocab, generator=gen)
    draft = target + torch.randn(b, n, vocab, generator=gen)
    cand = tree.draft_tokens.view(b, n).clone()
    cand[:, 1:] = torch.randint(0, 4, (b, n - 1), generator=gen)  # low ids: some acceptance
    target[:, :, :4] += 2.0
    return (cand, *links(tree, n)[1:]), target, draft, steps


def test_tree_greedy_rows_equal_plain_greedy_and_seeds_are_batch_independent():
    tree_links, target, draft, depth = _case(1)
    b = target.shape[0]
    params = mixed_demo_params(b)
    out = verify_tree_with_params(*tree_links, target, depth=depth, draft=draft, params=params)
    plain = verify_tree_greedy(*tree_links, depth=depth, target_logits=target)
    greedy = params.greedy
    for field in ("output_tokens", "accept_token_num", "bonus", "accept_index"):
        assert torch.equal(getattr(out, field)[greedy], getattr(plain, field)[greedy]), field
    perm = torch.randperm(b, generator=torch.Generator().manual_seed(2))
    cand, ridx, nt, ns = tree_links
    n = cand.shape[1]
    local = torch.arange(b * n).view(b, n)
    permuted = verify_tree_with_params(
        cand[perm], local, nt[perm], ns[perm], target[perm], depth=depth, draft=draft[perm],
        params=params.select(perm),
    )
    assert torch.equal(permuted.output_tokens, out.output_tokens[perm])
    assert set(out.accept_token_num.tolist()) != {0}


@pytest.mark.parametrize("probabilities", [False, True])
def test_tree_with_params_triton_equals_torch(force_backend, probabilities):
    tree_links, target, draft, depth = _case(3, b=3, vocab=32)
    if probabilities:
        target, draft = torch.softmax(target, -1), torch.softmax(draft, -1)
    params = SamplingParams.of(3, temperature=[0.0, 0.8, 1.2], top_k=[0, 5, 0],
                               top_p=[1.0, 0.9, 0.8], min_p=[0.0, 0.0, 0.05], seed=[1, 2, 3])
    kwargs = dict(depth=depth, draft=draft, params=params, probabilities=probabilities,
                  block_v=16)
    force_backend("torch")
    ref = verify_tree_with_params(*tree_links, target, **kwargs)
    force_backend("triton")
    got = verify_tree_with_params(*tree_links, target, **kwargs)
    for field in (*RESULT_FIELDS, "param_error"):
        assert torch.equal(getattr(ref, field), getattr(got, field)), field


def test_tree_bad_parameters():
    tree_links, target, draft, depth = _case(4, b=3)
    params = SamplingParams.of(3, temperature=[0.0, -1.0, 1.0], top_p=[1.0, 1.0, 0.0])
    with pytest.raises(KernelInputError) as err:
        verify_tree_with_params(*tree_links, target, depth=depth, params=params)
    assert set(err.value.codes) == {"SR911", "SR913"}
    out = verify_tree_with_params(*tree_links, target, depth=depth, params=params,
                                  check_values=False)
    assert out.param_error.tolist() == [False, True, True]
    assert out.output_tokens[1:].eq(-1).all() and out.accept_token_num[1:].eq(0).all()
    with pytest.raises(KernelInputError) as err:
        verify_tree_with_params(*tree_links, target, depth=depth,
                                params=SamplingParams.of(2, temperature=1.0))
    assert err.value.code == "SR910"


def _log(probs):
    return torch.log(torch.tensor(probs)).tolist()


# Per filter order, a case whose kept set differs from specreg's default order (the chain
# tests' ORDER_CASES): vllm keeps {0, 1} where specreg keeps {0, 1, 2}; sglang the reverse.
ORDER_CASES = {
    "vllm": (
        _logits(_log([0.3, 0.25, 0.2, 0.15, 0.09, 0.01])),
        _logits([0.0, 0.4, 1.5, 1.2, 0.3, -1.0]),
        dict(temperature=1.0, top_k=4, top_p=0.7, min_p=0.55),
    ),
    "sglang": (
        _logits(_log([0.3, 0.25, 0.2, 0.15, 0.09, 0.01])),
        _logits([1.5, -0.5, 0.2, 1.0, 0.9, 0.0]),
        dict(temperature=1.0, top_k=3, top_p=0.58),
    ),
}


def _run_in_order(order, verify_order, seed):
    """Children drawn from q filtered in `order`; verification told `verify_order`."""
    target_logits, draft_logits, params_kw = ORDER_CASES[order]
    gen = torch.Generator().manual_seed(seed)
    topk = 2
    n, _, ridx, nt, ns = full_tree_links(SAMPLES, topk)
    q_filtered = _table(draft_logits, order=order, **params_kw)
    cand = torch.zeros(SAMPLES, n, dtype=torch.int64)
    level1 = draw_without_replacement(q_filtered[cand[:, 0]], topk, gen)
    cand[:, 1:1 + topk] = level1
    for i in range(topk):
        kids = draw_without_replacement(q_filtered[level1[:, i]], topk, gen)
        cand[:, 1 + topk + i * topk:1 + topk + (i + 1) * topk] = kids
    out = verify_tree_with_params(
        cand, ridx, nt, ns, target_logits[cand], depth=2, draft=draft_logits[cand],
        params=SamplingParams.of(SAMPLES, **params_kw), generator=gen,
        filter_order=verify_order,
    )
    return out.output_tokens[:, 0]


@pytest.mark.parametrize("order", sorted(ORDER_CASES))
def test_tree_is_lossless_in_each_filter_order_and_the_wrong_order_is_detected(order):
    target_logits, _, params_kw = ORDER_CASES[order]
    expected = _table(target_logits, order=order, **params_kw)[0]
    assert not torch.equal(expected > 0, _table(target_logits, **params_kw)[0] > 0)
    seed = 80 + sorted(ORDER_CASES).index(order)
    assert _pvalue(_run_in_order(order, order, seed), expected) > 1e-3
    assert _pvalue(_run_in_order(order, "specreg", seed), expected) < 1e-6


@pytest.mark.parametrize("order", ["vllm", "sglang"])
def test_tree_rows_are_filtered_in_the_order_on_both_paths(order):
    """The tree path hands its order to the row filter on both backends (the tree kernels
    after it see filtered rows only, whatever the order)."""
    from specreg.kernels.tree_verify_params import _filtered_tree_rows

    from specreg.contract.filter_order import FILTER_RULES

    _, target, _, _ = _case(3, b=1, vocab=32)
    n = target.shape[1]
    params = SamplingParams.of(n, temperature=1.0, top_k=5, top_p=0.6, min_p=0.3)
    rows = torch.arange(n)
    rule = FILTER_RULES[order]
    on_torch = _filtered_tree_rows(target, rows, params, False, False, 16, rule)
    on_triton = _filtered_tree_rows(target, rows, params, False, True, 16, rule)
    want = torch.stack([
        filtered_distribution(row, temperature=1.0, top_k=5, top_p=0.6, min_p=0.3, order=order)
        for row in target.reshape(-1, 32)
    ])
    assert torch.equal(on_torch > 0, want > 0) and torch.equal(on_triton > 0, want > 0)
    default = _filtered_tree_rows(target, rows, params, False, False, 16, FILTER_RULES["specreg"])
    assert not torch.equal(default > 0, want > 0)
