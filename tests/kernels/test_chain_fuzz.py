"""Fuzz the chain verify and sampling kernels (torch path): correct results or coded errors,
and every verdict justified by an independent validity predicate
(`tests.support.chain_validity`): a refusal only of input the predicate calls invalid, a result
only for input it calls valid (CPU, value checks on)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st

from specreg.step.chain_verifier import ChainVerifier
from specreg.kernels.chain import (
    verify_chain_greedy,
    verify_chain_invariant,
    verify_chain_sampling,
    verify_chain_target_only,
)
from specreg.kernels.sampling import exponential_race_sample, inverse_cdf_sample, uniform_coins
from tests.support.chain_validity import (
    acceptance_is_justified,
    chain_problems,
    read_split,
    refusal_is_justified,
)
from tests.support.fuzz import coded_or_result, fuzz_settings
from tests.support.kernel_inputs import all_meta, float_tensor, index_tensor

pytestmark = pytest.mark.fuzz

#: Coins at and beside the edges of [0, 1): a check off by one edge refuses or accepts wrongly.
EDGE_COINS = [0.0, -0.0, 1.0 - 2**-24, 1.0, 1.5, -1e-9, float("nan")]

dims = st.fixed_dictionaries({"b": st.integers(0, 4), "n": st.integers(0, 5), "v": st.integers(0, 7)})


def _greedy_reference(candidates, logits, verify_lens):
    """Python loop: accept while the draft equals the target's argmax at the previous position."""
    b, n = candidates.shape
    accept, bonus = [], []
    for r in range(b):
        limit = n if verify_lens is None else int(verify_lens[r])
        best = [int(torch.argmax(logits[r, i].double())) for i in range(limit)]
        a = 0
        while a + 1 < limit and int(candidates[r, a + 1]) == best[a]:
            a += 1
        accept.append(a)
        bonus.append(best[a])
    return accept, bonus


def _check_result(result, candidates, b, n, v):
    if result.accept_len.device.type == "meta":
        assert result.accept_len.shape == (b,)
        return
    assert result.accept_len.shape == (b,) and result.bonus.shape == (b,)
    assert result.output_tokens.shape == (b, n)
    acc = result.accept_len.long()
    assert bool(((acc >= 0) & (acc <= max(n - 1, 0))).all())
    assert bool(((result.bonus >= 0) & (result.bonus < v)).all())
    for r in range(b):
        a = int(acc[r])
        out = result.output_tokens[r]
        assert torch.equal(out[:a], candidates[r, 1 : a + 1].long())
        assert int(out[a]) == int(result.bonus[r])
        assert bool((out[a + 1 :] == -1).all())


def _assert_justified(error, problems):
    """A refusal needs a reason the predicate also finds; a result needs valid input."""
    if error is not None:
        assert refusal_is_justified(problems), f"refused valid input: {error}"
    else:
        assert acceptance_is_justified(problems), f"accepted invalid input: {problems}"


@fuzz_settings(400)
@given(data=st.data(), d=dims, ragged=st.booleans())
def test_verify_chain_greedy(data, d, ragged):
    b, n, v = d["b"], d["n"], d["v"]
    candidates = data.draw(index_tensor((b, n), 0, v))
    logits = data.draw(float_tensor((b, n, v), probabilities=False))
    lens = data.draw(index_tensor((b,), 1, n + 1)) if ragged else None
    result, error = coded_or_result(
        lambda: verify_chain_greedy(candidates, logits, verify_lens=lens, check_values=True)
    )
    problems = chain_problems(candidates, logits, verify_lens=lens, probabilities=False)
    _assert_justified(error, problems)
    if error is not None:
        return
    _check_result(result, candidates, b, n, v)
    accept, bonus = _greedy_reference(candidates, logits, lens)
    assert result.accept_len.tolist() == accept and result.bonus.tolist() == bonus


@fuzz_settings(300)
@given(data=st.data(), d=dims, ragged=st.booleans(), valid_shapes=st.booleans())
def test_verify_chain_greedy_default_checks_what_it_reads(data, d, ragged, valid_shapes):
    """The CPU default of greedy verification checks the rows each request reaches (NaN):
    refusals only of NaN in a reached row (or of the inputs checked in full), results only
    when every reached row is NaN-free, equal to the reference's (which never reads the other
    rows)."""
    b, n, v = d["b"], d["n"], d["v"]
    if valid_shapes:  # well-formed calls with NaN in random rows
        b, n, v = max(b, 1), max(n, 1), max(v, 1)
        gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
        logits = torch.randn(b, n, v, generator=gen, dtype=torch.float64)
        candidates = torch.randint(0, v, (b, n), generator=gen)
        candidates[:, 1:] = torch.where(torch.rand(b, n - 1, generator=gen) < 0.6,
                                        logits[:, :-1].argmax(-1), candidates[:, 1:])
        for _ in range(data.draw(st.integers(0, 3))):
            i, j = data.draw(st.integers(0, b - 1)), data.draw(st.integers(0, n - 1))
            logits[i, j, data.draw(st.integers(0, v - 1))] = float("nan")
        logits = logits.to(data.draw(st.sampled_from([torch.float32, torch.bfloat16,
                                                       torch.float64])))
        lens = torch.randint(1, n + 1, (b,), generator=gen) if ragged else None
    else:
        candidates = data.draw(index_tensor((b, n), 0, v))
        logits = data.draw(float_tensor((b, n, v), probabilities=False))
        lens = data.draw(index_tensor((b,), 1, n + 1)) if ragged else None
    result, error = coded_or_result(
        lambda: verify_chain_greedy(candidates, logits, verify_lens=lens)
    )
    rows = []
    problems = chain_problems(candidates, logits, verify_lens=lens, probabilities=False,
                              rows=rows)
    checked_in_full = [x for x in problems if x not in {r.text for r in rows}]
    if checked_in_full or not rows:
        _assert_justified(error, problems)
        if error is None:
            _check_result(result, candidates, b, n, v)
        return
    unchecked = verify_chain_greedy(candidates, logits, verify_lens=lens, check_values=False)
    read, _ = read_split(rows, candidates, None, unchecked.accept_len, verify_lens=lens,
                         rule="greedy")
    if error is not None:
        event("refused: NaN in a reached row")
        assert read and error.code == "SR904", error
        return
    event("accepted: NaN only in rows no request reaches")
    assert not read, f"accepted NaN in reached rows: {read}"
    accept, bonus = _greedy_reference(candidates, logits, lens)
    assert result.accept_len.tolist() == accept and result.bonus.tolist() == bonus


@fuzz_settings(400)
@given(
    data=st.data(), d=dims, ragged=st.booleans(), with_q=st.booleans(),
    coin_mode=st.sampled_from(["given", "keys", "generator"]),
)  # fmt: skip
def test_verify_chain_sampling(data, d, ragged, with_q, coin_mode):
    b, n, v = d["b"], d["n"], d["v"]
    candidates = data.draw(index_tensor((b, n), 0, v))
    p = data.draw(float_tensor((b, n, v), probabilities=True))
    q = data.draw(float_tensor((b, max(n - 1, 0), v), probabilities=True)) if with_q else None
    lens = data.draw(index_tensor((b,), 1, n + 1)) if ragged else None
    kwargs = {}
    if coin_mode == "given":
        coins = data.draw(float_tensor((b, max(n - 1, 0)), probabilities=False)).abs() % 1
        edge = coins.numel() and coins.is_floating_point() and coins.is_contiguous()
        if edge and data.draw(st.booleans()):
            coins.view(-1)[0] = data.draw(st.sampled_from(EDGE_COINS))  # either side of [0, 1)
        kwargs["coins"] = coins
        kwargs["keys"] = data.draw(index_tensor((b,), -(2**62), 2**62))
    elif coin_mode == "keys":
        kwargs["keys"] = data.draw(index_tensor((b,), -(2**62), 2**62))
        if data.draw(st.booleans()):
            high = data.draw(st.sampled_from([4, 2**40]))  # small ones meet the bound at 0
            kwargs["positions"] = data.draw(index_tensor((b,), -2 if high == 4 else 0, high))
    else:
        kwargs["generator"] = torch.Generator().manual_seed(data.draw(st.integers(0, 99)))
    kwargs["check_values"] = True  # every value checked: refused exactly when invalid
    fn = verify_chain_sampling if with_q or data.draw(st.booleans()) else None
    if fn is None:
        call = lambda: verify_chain_target_only(candidates, p, verify_lens=lens, **kwargs)  # noqa: E731
    else:
        call = lambda: fn(candidates, p, q, verify_lens=lens, **kwargs)  # noqa: E731
    result, error = coded_or_result(call)
    problems = chain_problems(
        candidates, p, q if fn is not None else None, verify_lens=lens, probabilities=True,
        coins=kwargs.get("coins"), keys=kwargs.get("keys"), positions=kwargs.get("positions"),
    )
    _assert_justified(error, problems)
    if error is None:
        _check_result(result, candidates, b, n, v)
        if n == 1 or (lens is not None and b and bool((lens == 1).all())):
            assert bool((result.accept_len == 0).all())


RULES = ("classic", "target_only", "invariant")


def _call_rule(rule, candidates, p, q, lens, kwargs, check_values):
    """The rule's verifier on the inputs; a `seed` in kwargs becomes a fresh generator, so two
    calls draw the same keys."""
    kwargs = dict(kwargs, check_values=check_values)
    if "seed" in kwargs:
        kwargs["generator"] = torch.Generator().manual_seed(kwargs.pop("seed"))
    if rule == "invariant":
        kwargs.pop("coins", None)
        return verify_chain_invariant(candidates, p, verify_lens=lens, **kwargs)
    if rule == "target_only":
        return verify_chain_target_only(candidates, p, verify_lens=lens, **kwargs)
    return verify_chain_sampling(candidates, p, q, verify_lens=lens, **kwargs)


def _with_unread_rows_replaced(tensor, unread, candidates, lens):
    """`tensor` with each row of `unread` replaced by the uniform distribution, keeping the
    drafted token's value where the rule reads it (a verified draft's p(x) or q(x))."""
    out = tensor.clone()
    n = candidates.shape[1]
    for problem in unread:
        i, j = problem.i, problem.j
        row = torch.full((tensor.shape[-1],), 1.0 / tensor.shape[-1], dtype=tensor.dtype)
        limit = n if lens is None else int(lens[i])
        if j <= limit - 2:
            x = int(candidates[i, j + 1])
            row[x] = tensor[i, j, x]
        out[i, j] = row
    return out


@fuzz_settings(300)
@given(
    data=st.data(), d=dims, ragged=st.booleans(), rule=st.sampled_from(RULES),
    coin_mode=st.sampled_from(["given", "keys", "generator"]),
)  # fmt: skip
def test_default_checks_what_the_rule_reads(data, d, ragged, rule, coin_mode):
    """Hostile inputs of every kind (`_assert_default_verdict`)."""
    b, n, v = d["b"], d["n"], d["v"]
    candidates = data.draw(index_tensor((b, n), 0, v))
    p = data.draw(float_tensor((b, n, v), probabilities=True))
    q = None
    if rule == "classic":
        q = data.draw(float_tensor((b, max(n - 1, 0), v), probabilities=True))
    lens = data.draw(index_tensor((b,), 1, n + 1)) if ragged else None
    kwargs = {}
    if coin_mode == "given" and rule != "invariant":
        kwargs["coins"] = data.draw(float_tensor((b, max(n - 1, 0)), probabilities=False)).abs() % 1
        kwargs["keys"] = data.draw(index_tensor((b,), -(2**62), 2**62))
    elif coin_mode in ("given", "keys"):
        kwargs["keys"] = data.draw(index_tensor((b,), -(2**62), 2**62))
        if data.draw(st.booleans()):
            kwargs["positions"] = data.draw(index_tensor((b,), -2, 4))
    else:
        kwargs["seed"] = data.draw(st.integers(0, 99))
    _assert_default_verdict(rule, candidates, p, q, lens, kwargs)


#: Invalid probabilities a fuzz example puts in a row, at a random column or at the drafted
#: token's (the value the acceptance test reads), or over the whole row.
BAD_VALUES = [float("nan"), float("inf"), -float("inf"), -0.25, -1e-30, 3e38]


@fuzz_settings(400)
@given(
    data=st.data(),
    d=st.fixed_dictionaries({"b": st.integers(1, 4), "n": st.integers(1, 5),
                             "v": st.integers(1, 7)}),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]),
    ragged=st.booleans(), rule=st.sampled_from(RULES), keyed=st.booleans(),
)  # fmt: skip
def test_default_checks_what_the_rule_reads_on_valid_shapes(data, d, dtype, ragged, rule, keyed):
    """Well-formed calls whose probability rows get invalid values (NaN, +-inf, negatives,
    values whose row sum overflows float32, all-zero rows) at random places, at the drafted
    tokens and at the rows where requests stop: the default refuses exactly the ones the rule
    reads (`_assert_default_verdict`)."""
    b, n, v = d["b"], d["n"], d["v"]
    seed = data.draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(b, n, v, generator=gen) * 2, -1)
    q = torch.softmax(torch.randn(b, n - 1, v, generator=gen) * 2, -1)
    candidates = torch.randint(0, v, (b, n), generator=gen)
    lens = torch.randint(1, n + 1, (b,), generator=gen) if ragged else None
    kwargs = {"keys": torch.randint(-(2**62), 2**62, (b,), generator=gen)} if keyed else {
        "seed": data.draw(st.integers(0, 99))}
    valid_q = q if rule == "classic" else None
    stops = _call_rule(rule, candidates, p, valid_q, lens, kwargs, False).accept_len.tolist()
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, b - 1))
        where = data.draw(st.sampled_from(["column", "token", "row", "stop row"]))
        limit = n if lens is None else int(lens[i])
        if where == "stop row":  # where request i stops with the valid inputs
            j = data.draw(st.integers(0, stops[i])) if rule == "invariant" else stops[i]
            rejected = rule == "classic" and stops[i] < limit - 1
            target = q if rejected and data.draw(st.booleans()) else p
        else:
            target = p if rule != "classic" or n == 1 or data.draw(st.booleans()) else q
            j = data.draw(st.integers(0, target.shape[1] - 1))
        value = data.draw(st.sampled_from([0.0, *BAD_VALUES]))
        if where == "row":
            target[i, j] = value
        else:
            x = int(candidates[i, j + 1]) if where == "token" and j + 1 < n else None
            target[i, j, x if x is not None else data.draw(st.integers(0, v - 1))] = value
    _assert_default_verdict(rule, candidates, p.to(dtype), q.to(dtype) if rule == "classic"
                            else None, lens, kwargs)


def _assert_default_verdict(rule, candidates, p, q, lens, kwargs):
    """The CPU default (check_values=None) checks what the rule reads: every refusal is of input
    the predicate calls invalid, with an invalid value among the inputs checked in full (token
    ids, lengths, coins, positions, shapes) or in what the rule reads (`read_split`, given where
    each request stops); every accepted input has its invalid values only outside what the
    rule reads, and its result is the result of the input with those rows replaced by valid
    ones (verified with every value checked)."""
    b, n = (candidates.shape if candidates.dim() == 2 else (0, 0))
    v = p.shape[-1] if p.dim() else 0
    result, error = coded_or_result(lambda: _call_rule(rule, candidates, p, q, lens, kwargs, None))
    rows = []
    problems = chain_problems(
        candidates, p, q, verify_lens=lens, probabilities=True, coins=kwargs.get("coins"),
        keys=kwargs.get("keys"), positions=kwargs.get("positions"), rows=rows,
    )
    row_texts = {r.text for r in rows}
    checked_in_full = [x for x in problems if x not in row_texts]
    if checked_in_full:
        assert error is not None, f"accepted invalid input: {checked_in_full}"
        return
    if not rows:
        assert error is None, f"refused valid input: {error}"
        _check_result(result, candidates, b, n, v)
        return
    # only probability rows are invalid: where each request stops, from the unchecked rule
    unchecked = _call_rule(rule, candidates, p, q, lens, kwargs, False)
    read, unread = read_split(rows, candidates, q, unchecked.accept_len, verify_lens=lens,
                              rule=rule)
    if error is not None:
        event("refused: an invalid value the rule reads")
        assert read, f"refused input whose invalid values the rule does not read: {error}"
        assert error.code == "SR904"
        return
    event("accepted: invalid values only where the rule does not read")
    assert acceptance_is_justified([r.text for r in read]), f"accepted invalid reads: {read}"
    _check_result(result, candidates, b, n, v)
    assert torch.equal(result.output_tokens, unchecked.output_tokens)
    fixed_p = _with_unread_rows_replaced(p, [r for r in unread if r.tensor == "target"],
                                         candidates, lens)
    fixed_q = q
    if q is not None:
        fixed_q = _with_unread_rows_replaced(q, [r for r in unread if r.tensor == "draft"],
                                             candidates, lens)
    fixed_problems = chain_problems(candidates, fixed_p, fixed_q, verify_lens=lens,
                                    probabilities=True, coins=kwargs.get("coins"))
    fixed = _call_rule(rule, candidates, fixed_p, fixed_q, lens, kwargs,
                       True if acceptance_is_justified(fixed_problems) else False)
    assert torch.equal(result.output_tokens, fixed.output_tokens)


@fuzz_settings(150)
@given(data=st.data(), d=dims, width=st.one_of(st.integers(-1, 6), st.sampled_from([True, 2.0, "3"])))
def test_chain_verifier(data, d, width):
    verifier, error = coded_or_result(lambda: ChainVerifier(width))
    if error is not None:
        return
    b, n, v = d["b"], d["n"], d["v"]
    candidates = data.draw(index_tensor((b, n), 0, v))
    logits = data.draw(float_tensor((b, n, v), probabilities=True))
    for call in (
        lambda: verifier.verify_greedy(candidates, logits),
        lambda: verifier.verify_target_only(candidates, logits,
                                            generator=torch.Generator().manual_seed(1)),
        lambda: verifier.verify_greedy_from_predict(candidates, candidates),
    ):
        result, error = coded_or_result(call)
        if error is None and not all_meta(candidates, logits):
            # strategies may draw shapes other than d's; a result covers the candidates' rows
            assert result.accept_len.shape == (candidates.shape[0],)


# ------------------------------------------------------------------------------- sampling
@fuzz_settings(300)
@given(data=st.data(), rows=st.integers(0, 4), v=st.integers(0, 7), with_noise=st.booleans())
def test_exponential_race_sample(data, rows, v, with_noise):
    probs = data.draw(float_tensor((rows, v), probabilities=True))
    noise = data.draw(float_tensor((rows, v), probabilities=False)) if with_noise else None
    out, error = coded_or_result(lambda: exponential_race_sample(probs, noise=noise))
    if error is None and not all_meta(probs, noise):
        # strategies may draw shapes other than (rows, v): check against what was drawn
        n_rows, vocab = probs.shape
        assert out.shape == (n_rows,) and out.dtype == torch.int64
        assert bool(((out >= 0) & (out < vocab)).all())
        # a zero-probability entry never wins
        chosen = probs.double().gather(1, out.view(-1, 1)) if n_rows else probs
        assert bool((chosen > 0).all())


@fuzz_settings(300)
@given(
    shape=st.lists(st.integers(0, 4), max_size=3),
    seed=st.one_of(st.none(), st.integers(-(2**64), 2**64)),
    data=st.data(),
)
def test_uniform_coins(shape, seed, data):
    offsets = None
    if seed is not None and shape and data.draw(st.booleans()):
        offsets = data.draw(index_tensor(shape[:-1], -(2**40), 2**40))
    out, error = coded_or_result(
        lambda: uniform_coins(shape, device="cpu", seed=seed, offsets=offsets)
    )
    if error is None:
        assert tuple(out.shape) == tuple(shape) and out.dtype == torch.float32
        assert bool(((out >= 0) & (out < 1)).all())


@fuzz_settings(300)
@given(data=st.data(), rows=st.integers(0, 4), v=st.integers(0, 7))
def test_inverse_cdf_sample(data, rows, v):
    weights = data.draw(float_tensor((rows, v), probabilities=True))
    coins = data.draw(float_tensor((rows,), probabilities=False)).abs() % 1
    out, error = coded_or_result(lambda: inverse_cdf_sample(weights, coins))
    if error is None and not all_meta(weights, coins):
        assert out.shape == (rows,)
        assert bool(((out >= 0) & (out < v)).all())


def _edge_cases():
    """Valid inputs, then each changed at one edge of the contract (either side)."""
    g = torch.Generator().manual_seed(0)
    b, n, v = 2, 3, 5
    cand = torch.randint(0, v, (b, n), generator=g)
    p = torch.softmax(torch.randn(b, n, v, generator=g), -1)
    q = torch.softmax(torch.randn(b, n - 1, v, generator=g), -1)
    base = dict(candidates=cand, target=p, draft=q, keys=torch.tensor([3, -4]),
                positions=torch.tensor([0, 7]), coins=torch.full((b, n - 1), 0.5))
    edits = {
        "valid": {},
        "position 0 (valid)": {"positions": torch.tensor([0, 0])},
        "position -1": {"positions": torch.tensor([0, -1])},
        "coin 0 (valid)": {"coins": torch.zeros(b, n - 1)},
        "coin 1 - 2^-24 (valid)": {"coins": torch.full((b, n - 1), 1.0 - 2**-24)},
        "coin 1": {"coins": torch.tensor([[0.5, 1.0], [0.5, 0.5]])},
        "coin -1e-9": {"coins": torch.tensor([[0.5, -1e-9], [0.5, 0.5]], dtype=torch.float64)},
        "coin NaN": {"coins": torch.tensor([[0.5, float("nan")], [0.5, 0.5]])},
        "token V - 1 (valid)": {"candidates": torch.full((b, n), v - 1)},
        "token V": {"candidates": torch.tensor([[0, 1, v], [0, 1, 2]])},
        "token -1": {"candidates": torch.tensor([[0, -1, 2], [0, 1, 2]])},
        "empty target row": {"target": torch.cat([torch.zeros(1, n, v), p[1:]])},
        "negative probability": {"target": p - 1e-3},
        "empty draft row": {"draft": torch.cat([torch.zeros(1, n - 1, v), q[1:]])},
        "meta target": {"target": p.to("meta")},
        "int32 keys (valid)": {"keys": torch.tensor([3, -4], dtype=torch.int32)},
        "float keys": {"keys": torch.tensor([3.0, 4.0])},
        "keys of 3": {"keys": torch.tensor([1, 2, 3])},
    }
    for name, change in edits.items():
        yield name, {**base, **change}


@pytest.mark.parametrize("name,inputs", list(_edge_cases()), ids=[n for n, _ in _edge_cases()])
def test_edge_inputs_get_the_predicates_verdict(name, inputs):
    """Deterministic edges (the fuzz slice of CI rarely draws them): the kernel refuses exactly
    the inputs the independent predicate calls invalid."""
    args = dict(inputs)
    cand, target, draft = args.pop("candidates"), args.pop("target"), args.pop("draft")
    _, error = coded_or_result(
        lambda: verify_chain_sampling(cand, target, draft, check_values=True, **args)
    )
    problems = chain_problems(cand, target, draft, probabilities=True, **args)
    assert (error is not None) == bool(problems), (name, error, problems)
