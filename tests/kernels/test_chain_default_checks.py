"""The CPU default of the chain sampling rules checks what the rule reads (`check_values=None`):
a NaN, infinite, negative or zero-mass value in a row the rule reads is refused with SR904,
naming the row; one in a row it does not read is accepted, with the result of the valid
input, and refused with check_values=True (every value checked, before any work).

Scenarios (one request, n = 4 so 3 drafts x1..x3, V = 200: two race blocks), with the
acceptance fixed by the coins (0: a draft is accepted iff p(x) > 0):
- "bonus": every draft accepted; the rule reads p(x) and q(x) of rows 0..2 and the whole p row
  3 (the bonus row);
- "rejected": p(x2) = 0, so request 0 stops at row 1 after a rejection; the rule reads p(x) and
  q(x) of rows 0..2 (every verified draft) and the whole rows p[0, 1] and q[0, 1] (the
  residual).
For the drafter-invariant rule (no coins: a draft is accepted iff it is the race's token), p
rows 0 and 1 are one-hot at x1 and x2 and row 2 at another token, so the request stops at row
2 having read the whole rows 0..2.
"""

from __future__ import annotations

import pytest
import torch

from specreg.errors import KernelInputError
from specreg.kernels.chain import (
    sample_tokens,
    verify_chain_greedy,
    verify_chain_invariant,
    verify_chain_sampling,
    verify_chain_target_only,
)
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.penalties import Penalties
from specreg.kernels.relaxed import RuleParams, verify_chain_relaxed
from specreg.kernels.relaxed.types import THRESHOLDS
from specreg.contract.sampling_params import SamplingParams

N, V = 4, 200
DRAFTS = [7, 150, 42]  # x1, x2, x3: x2 in the second race block
KEYS = torch.tensor([12345])
BAD = {
    "nan": float("nan"),
    "+inf": float("inf"),
    "-inf": -float("inf"),
    "negative": -0.25,
}


def _scenario(stop: str, dtype=torch.float32):
    gen = torch.Generator().manual_seed(7)
    candidates = torch.tensor([[3, *DRAFTS]])
    p = torch.softmax(torch.randn(1, N, V, generator=gen, dtype=torch.float64), -1)
    q = torch.softmax(torch.randn(1, N - 1, V, generator=gen, dtype=torch.float64), -1)
    if stop == "rejected":
        p[0, 1, DRAFTS[1]] = 0.0
    return candidates, p.to(dtype), q.to(dtype)


def _classic(c, p, q, **kw):
    return verify_chain_sampling(c, p, q, coins=torch.zeros(1, N - 1), keys=KEYS, **kw)


def _target_only(c, p, q, **kw):
    return verify_chain_target_only(c, p, coins=torch.zeros(1, N - 1), keys=KEYS, **kw)


def _invariant_inputs(dtype=torch.float32):
    candidates = torch.tensor([[3, *DRAFTS]])
    p = torch.zeros(1, N, V, dtype=torch.float64)
    p[0, 0, DRAFTS[0]] = 1.0
    p[0, 1, DRAFTS[1]] = 1.0
    p[0, 2, 99] = 1.0  # not x3: the request stops at row 2
    p[0, 3] = 1.0 / V
    return candidates, p.to(dtype)


def _invariant(c, p, q, **kw):
    return verify_chain_invariant(c, p, keys=KEYS, **kw)


def _put(tensor, row, where, value):
    """tensor[0, row] with `value` at `where` (a column, or 'row': the whole row)."""
    out = tensor.clone()
    if where == "row":
        out[0, row] = value
    else:
        out[0, row, where] = value
    return out


# (rule, stop scenario, tensor, row, where): values the rule reads
READ = [
    ("classic", "bonus", "p", 3, 5),  # the bonus row, any column
    ("classic", "bonus", "p", 3, 170),  # ... in the second race block
    ("classic", "bonus", "p", 0, DRAFTS[0]),  # p(x1), an accepted draft
    ("classic", "bonus", "q", 2, DRAFTS[2]),  # q(x3)
    ("classic", "rejected", "p", 1, 60),  # the residual's p row
    ("classic", "rejected", "q", 1, 199),  # the residual's q row
    ("classic", "rejected", "p", 2, DRAFTS[2]),  # p(x3): verified, past the rejection
    ("classic", "rejected", "q", 2, DRAFTS[2]),  # q(x3)
    ("target_only", "bonus", "p", 3, 0),
    ("target_only", "rejected", "p", 1, 3),  # the row a correction is drawn from
    ("target_only", "rejected", "p", 0, DRAFTS[0]),
    ("invariant", "invariant", "p", 0, 11),  # every row reached is drawn from
    ("invariant", "invariant", "p", 2, 180),
]
# values the rule does not read
UNREAD = [
    ("classic", "bonus", "p", 1, 5),  # an accepted row, not its draft's column
    ("classic", "bonus", "q", 0, 120),
    ("classic", "rejected", "p", 2, 8),  # past the rejection
    ("classic", "rejected", "p", 3, 8),
    ("classic", "rejected", "q", 2, 9),
    ("classic", "rejected", "q", 0, 120),  # an accepted draft's q row
    ("target_only", "rejected", "p", 3, 5),
    ("target_only", "bonus", "p", 0, 5),
    ("invariant", "invariant", "p", 3, 5),  # past the stop
]
RULES = {"classic": _classic, "target_only": _target_only, "invariant": _invariant}


def _inputs(rule, stop, dtype=torch.float32):
    if rule == "invariant":
        c, p = _invariant_inputs(dtype)
        return c, p, None
    return _scenario(stop, dtype)


def _stops_where_documented(rule, stop, c, p, q):
    accept = RULES[rule](c, p, q, check_values=True).accept_len.tolist()
    assert accept == [{"bonus": 3, "rejected": 1, "invariant": 2}[stop]]


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("rule,stop,tensor,row,where", READ)
def test_default_refuses_a_bad_value_the_rule_reads(rule, stop, tensor, row, where, bad):
    c, p, q = _inputs(rule, stop)
    _stops_where_documented(rule, stop, c, p, q)
    if tensor == "p":
        p = _put(p, row, where, BAD[bad])
    else:
        q = _put(q, row, where, BAD[bad])
    name = "target_probs" if tensor == "p" else "draft_probs"
    for check_values in (None, True):
        with pytest.raises(KernelInputError) as err:
            RULES[rule](c, p, q, check_values=check_values)
        assert err.value.code == "SR904" and err.value.problems[0].field == name
        if check_values is None:  # the message names the row the rule reads
            assert f"{name}[0, {row}" in str(err.value)


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("rule,stop,tensor,row,where", UNREAD)
def test_default_accepts_a_bad_value_the_rule_does_not_read(rule, stop, tensor, row, where, bad):
    c, p, q = _inputs(rule, stop)
    _stops_where_documented(rule, stop, c, p, q)
    clean = RULES[rule](c, p, q, check_values=True)
    if tensor == "p":
        p = _put(p, row, where, BAD[bad])
    else:
        q = _put(q, row, where, BAD[bad])
    result = RULES[rule](c, p, q)
    assert torch.equal(result.output_tokens, clean.output_tokens)
    with pytest.raises(KernelInputError) as err:
        RULES[rule](c, p, q, check_values=True)
    assert err.value.code == "SR904"


@pytest.mark.parametrize("rule,stop,tensor,row", [
    ("classic", "bonus", "p", 3), ("classic", "rejected", "p", 1),
    ("target_only", "bonus", "p", 3), ("invariant", "invariant", "p", 2),
])  # fmt: skip
def test_default_refuses_a_zero_mass_row_the_rule_draws_from(rule, stop, tensor, row):
    c, p, q = _inputs(rule, stop)
    p = _put(p, row, "row", 0.0)
    for check_values in (None, True):
        with pytest.raises(KernelInputError) as err:
            RULES[rule](c, p, q, check_values=check_values)
        assert err.value.code == "SR904"
    assert "sum to zero" in str(err.value)


def test_zero_mass_rows_the_rule_does_not_read():
    """An all-zero p row past the stop is accepted by default and refused by the full checks;
    an all-zero q row of a verified draft is refused by both (q(x) = 0 makes the rule read its
    mass: an all-zero q row is not a target-only signal)."""
    c, p, q = _scenario("rejected")
    clean = _classic(c, p, q)
    zero_p = _put(p, 2, "row", 0.0)
    assert torch.equal(_classic(c, zero_p, q).output_tokens, clean.output_tokens)
    with pytest.raises(KernelInputError):
        _classic(c, zero_p, q, check_values=True)
    for row in (0, 2):  # an accepted draft's q row, and one past the rejection
        zero_q = _put(q, row, "row", 0.0)
        for check_values in (None, True):
            with pytest.raises(KernelInputError) as err:
                _classic(c, p, zero_q, check_values=check_values)
            assert err.value.code == "SR904" and "verify_chain_target_only" in str(err.value)
    # rows past a request's verify length are never read: zero mass there is valid for both
    lens = torch.tensor([2])
    zero_tail = _put(p, 3, "row", 0.0)
    for check_values in (None, True):
        _classic(c, zero_tail, q, verify_lens=lens, check_values=check_values)


def test_float64_values_checked_in_their_own_dtype():
    """A negative float64 value that rounds to -0.0 in float32 is still negative, and a
    finite float64 value past float32's range overflows the row's float32 sum."""
    for value in (-1e-60, 1e39):
        c, p, q = _scenario("bonus", torch.float64)
        p = _put(p, 3, 17, value)
        with pytest.raises(KernelInputError) as err:
            _classic(c, p, q)
        assert err.value.code == "SR904"
    c, p, q = _scenario("bonus", torch.float64)
    _classic(c, _put(p, 3, 17, -0.0), q)  # -0.0 is >= 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_default_matches_the_full_checks_on_valid_input(dtype):
    for rule, stop in (("classic", "bonus"), ("classic", "rejected"), ("target_only", "rejected"),
                       ("invariant", "invariant")):
        c, p, q = _inputs(rule, stop, dtype)
        full = RULES[rule](c, p, q, check_values=True)
        assert torch.equal(RULES[rule](c, p, q).output_tokens, full.output_tokens)


def test_bad_row_in_a_later_chunk():
    """Rows are read in cache-sized chunks (4 rows of V = 65536): a bad value in a later
    chunk's row is found, and named."""
    b, n, vocab = 9, 2, 65536
    gen = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    c = torch.zeros(b, n, dtype=torch.int64)
    p[:, 0, 0] = 0.0  # every request rejects its draft at row 0
    r = verify_chain_target_only(c, p, coins=torch.zeros(b, 1), keys=torch.arange(b))
    assert r.accept_len.tolist() == [0] * b
    p[7, 0, 60000] = float("nan")
    with pytest.raises(KernelInputError) as err:
        verify_chain_target_only(c, p, coins=torch.zeros(b, 1), keys=torch.arange(b))
    assert "target_probs[7, 0]" in str(err.value)
    p[7, 0, 60000] = 0.0
    p[8, 1, 5] = float("nan")  # row 1 is never reached
    verify_chain_target_only(c, p, coins=torch.zeros(b, 1), keys=torch.arange(b))


def test_sample_tokens_reads_every_row():
    probs = torch.softmax(torch.randn(5, V, generator=torch.Generator().manual_seed(1)), -1)
    tokens = sample_tokens(probs, keys=torch.arange(5))
    assert torch.equal(tokens, sample_tokens(probs, keys=torch.arange(5), check_values=True))
    for bad in BAD.values():
        broken = probs.clone()
        broken[3, 150] = bad
        with pytest.raises(KernelInputError) as err:
            sample_tokens(broken, keys=torch.arange(5))
        assert err.value.code == "SR904" and "target_probs[3, 0]" in str(err.value)
    with pytest.raises(KernelInputError):
        sample_tokens(torch.zeros(2, V), keys=torch.arange(2))


def test_lossy_rules_keep_the_full_checks():
    """Only the paths that check what they read defer: the lossy rules check every value."""
    c, p, q = _scenario("rejected")
    bad = _put(p, 3, 8, float("nan"))  # a row the lossless rule does not read
    _classic(c, bad, q)
    with pytest.raises(KernelInputError) as err:
        verify_chain_relaxed(c, bad, q, rule=RuleParams(mode=THRESHOLDS), keys=KEYS)
    assert err.value.code == "SR904"


def test_greedy_default_checks_the_rows_requests_reach():
    """Greedy reads the rows 0..accept_len of each request (their argmax): a NaN there is
    SR904 naming the row; a NaN in a row no request reaches is accepted by default and
    refused with check_values=True. Both row paths: every row of a position read (most
    requests still matching), and the matching requests' rows gathered (few)."""
    gen = torch.Generator().manual_seed(5)
    b, n = 6, 4
    logits = torch.randn(b, n, V, generator=gen)
    c = torch.zeros(b, n, dtype=torch.int64)
    c[:, 1:] = logits[:, :-1].argmax(-1)
    c[1:, 2] = (c[1:, 2] + 1) % V  # requests 1..5 stop at row 1, request 0 goes to row 3
    clean = verify_chain_greedy(c, logits)
    assert clean.accept_len.tolist() == [3, 1, 1, 1, 1, 1]
    for i, j in ((0, 3), (2, 1), (4, 0)):  # reached: row 3 is read for request 0 alone
        bad = logits.clone()
        bad[i, j, 33] = float("nan")
        for check_values in (None, True):
            with pytest.raises(KernelInputError) as err:
                verify_chain_greedy(c, bad, check_values=check_values)
            assert err.value.code == "SR904"
        with pytest.raises(KernelInputError) as err:
            verify_chain_greedy(c, bad)
        assert f"target_logits[{i}, {j}]" in str(err.value)
    for i, j in ((2, 2), (5, 3)):  # past the stop
        bad = logits.clone()
        bad[i, j, 33] = float("nan")
        assert torch.equal(verify_chain_greedy(c, bad).output_tokens, clean.output_tokens)
        with pytest.raises(KernelInputError):
            verify_chain_greedy(c, bad, check_values=True)


def _params_inputs():
    """Two requests on logits: request 0 sampled (temperature 1), its first draft with a -inf
    target logit (p(x) = 0: rejected at row 0, so it reads target row 0 and draft row 0 only);
    request 1 greedy, its drafts the target's argmax (it reads target rows 0..3)."""
    gen = torch.Generator().manual_seed(11)
    target = torch.randn(2, N, V, generator=gen)
    draft = torch.randn(2, N - 1, V, generator=gen)
    c = torch.zeros(2, N, dtype=torch.int64)
    c[0, 1:] = torch.tensor(DRAFTS)
    target[0, 0, DRAFTS[0]] = float("-inf")
    c[1, 1:] = target[1, :-1].argmax(-1)
    params = SamplingParams.of(2, temperature=[1.0, 0.0], seed=[1, 2])
    return c, target, draft, params


def test_params_default_checks_the_logit_rows_the_rule_reads():
    """verify_chain_with_params on logits (CPU default): a row the rule reads with NaN, +inf or
    only -inf scores is SR904 naming it; such a row it does not read is accepted by default
    (same tokens) and refused with check_values=True."""
    c, target, draft, params = _params_inputs()
    clean = verify_chain_with_params(c, target, draft, params=params)
    assert clean.accept_len.tolist() == [0, 3]
    for value in (float("nan"), float("inf"), "all -inf"):
        for name, row in (("target", (0, 0)), ("target", (1, 3)), ("target", (1, 1)),
                          ("draft", (0, 0))):
            t, d = target.clone(), draft.clone()
            tensor = t if name == "target" else d
            if value == "all -inf":
                tensor[row] = float("-inf")
            else:
                tensor[row][17] = value
            for check_values in (None, True):
                with pytest.raises(KernelInputError) as err:
                    verify_chain_with_params(c, t, d, params=params, check_values=check_values)
                assert err.value.code == "SR904"
            with pytest.raises(KernelInputError) as err:
                verify_chain_with_params(c, t, d, params=params)
            assert f"{name}[{row[0]}, {row[1]}]" in str(err.value)
        for name, row in (("target", (0, 1)), ("target", (0, 3)), ("draft", (0, 1)),
                          ("draft", (1, 0))):  # past request 0's stop; greedy reads no draft
            t, d = target.clone(), draft.clone()
            tensor = t if name == "target" else d
            if value == "all -inf":
                tensor[row] = float("-inf")
            else:
                tensor[row][17] = value
            got = verify_chain_with_params(c, t, d, params=params)
            assert torch.equal(got.output_tokens, clean.output_tokens)
            with pytest.raises(KernelInputError):
                verify_chain_with_params(c, t, d, params=params, check_values=True)


def test_params_default_checks_every_row_before_in_place_changes():
    """With penalties (or a grammar mask), which change the scores in place before the rule,
    the default checks every row first: a refusal leaves the caller's scores untouched."""
    c, target, draft, params = _params_inputs()
    target[0, 3, 17] = float("nan")  # a row the rule does not read
    before = target.clone()
    with pytest.raises(KernelInputError):
        verify_chain_with_params(c, target, draft, params=params,
                                 penalties=Penalties.of(2, repetition=1.5))
    assert torch.equal(target.isnan(), before.isnan())
    assert torch.equal(target.nan_to_num(), before.nan_to_num())


@pytest.mark.parametrize("filters", [{"top_p": 0.9}, {"top_k": 5}, {"min_p": 0.1},
                                     {"top_k": 500, "top_p": 0.8, "min_p": 0.001}])
def test_params_default_refuses_a_bad_row_under_every_filter(filters):
    """Under top-k, top-p and min-p too, a read row with NaN, +inf or only -inf scores is SR904
    naming the row, never an error of the filter's search: at V 4,096 a top-p cut lies past the
    ranked prefix, where the binned search once raised bincount's RuntimeError on a NaN row."""
    gen = torch.Generator().manual_seed(5)
    b, n, vocab = 2, 4, 4096
    target = torch.randn(b, n, vocab, generator=gen)
    draft = torch.randn(b, n - 1, vocab, generator=gen)
    c = torch.randint(0, vocab, (b, n), generator=gen)
    params = SamplingParams.of(b, temperature=[1.0, 0.7], seed=[1, 2],
                               **{name: [value, value] for name, value in filters.items()})
    verify_chain_with_params(c, target, draft, params=params)  # the clean inputs pass
    for value in (float("nan"), float("inf"), "all -inf"):
        for name, row in (("target", (0, 0)), ("draft", (0, 0))):
            t, d = target.clone(), draft.clone()
            tensor = t if name == "target" else d
            if value == "all -inf":
                tensor[row] = float("-inf")
            else:
                tensor[row][17] = value
            with pytest.raises(KernelInputError) as err:
                verify_chain_with_params(c, t, d, params=params)
            assert err.value.code == "SR904" and f"{name}[0, 0]" in str(err.value), value
