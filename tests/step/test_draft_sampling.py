"""specreg.step.draft_sampling: the drafter's q is the verifiers' q bit for bit, its draws follow it
(chi-square at fixed seeds, with negative controls), and bad input is a coded error first."""

import pytest
import torch
from specreg.kernels.tree_verify_params import _filtered_tree_rows

from specreg.step.draft_sampling import filtered_q, row_params, sample_children, sample_rows
from specreg.errors import KernelInputError
from specreg.kernels.filtering import filtered_rows, gathered_row_stats
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.contract.filter_order import FILTER_ORDERS, filter_rule
from specreg.contract.sampling_params import SamplingParams
from specreg.testing.lossless import P_VALUE_THRESHOLD, chi_square_p_value

V = 64
#: Adversarial kinds: greedy, heavy top-k / top-p / min-p cuts, all three, a hot temperature.
KINDS = (
    dict(temperature=0.0),
    dict(temperature=1.0, top_k=3),
    dict(temperature=0.8, top_p=0.3),
    dict(temperature=1.3, min_p=0.2),
    dict(temperature=0.6, top_k=9, top_p=0.7, min_p=0.05),
    dict(temperature=2.5),
)


def _params(rows: int, device="cpu") -> SamplingParams:
    kinds = [KINDS[r % len(KINDS)] for r in range(rows)]
    return SamplingParams.of(
        rows, temperature=[k["temperature"] for k in kinds],
        top_k=[k.get("top_k", 0) for k in kinds], top_p=[k.get("top_p", 1.0) for k in kinds],
        min_p=[k.get("min_p", 0.0) for k in kinds], device=device,
    )


def _logits(rows: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, V, generator=g) * 3.0
    logits[:, :4] += 4.0  # a few heavy tokens: the filters cut hard
    logits[1::3, 10] = logits[1::3, 11]  # ties at the cut
    return logits


@pytest.mark.parametrize("order", FILTER_ORDERS)
def test_the_drafters_q_is_the_verifiers_q_bit_for_bit(order):
    logits = _logits(24)
    params = _params(24)
    sampled = (~params.greedy).nonzero().flatten()
    drawn = sample_rows(logits, params, generator=torch.Generator().manual_seed(0),
                        filter_order=order)
    # the chain verifier's q rows (draft [b, 1, V], position 0: what chain_params' torch path
    # filters, the filtering family's statistics and formula) and the tree verifier's
    chain_stats = gathered_row_stats(
        logits, sampled, params.temperature[sampled], params.top_k[sampled],
        params.top_p[sampled], params.min_p[sampled], probabilities=False,
        rule=filter_rule(order),
    )
    chain_q = filtered_rows(logits.index_select(0, sampled), params.temperature[sampled],
                            chain_stats, params.min_p[sampled], probabilities=False)
    tree_q = _filtered_tree_rows(logits, sampled, params.select(sampled), False, False, None,
                                 filter_rule(order))
    assert torch.equal(drawn.q[sampled], chain_q)
    assert torch.equal(drawn.q[sampled], tree_q)
    children = sample_children(logits, params, 4, generator=torch.Generator().manual_seed(0),
                               filter_order=order)
    assert torch.equal(children.q[sampled], tree_q)


def test_triton_q_equals_torch_under_the_interpreter():
    logits = _logits(6)
    params = _params(6)
    rows = (~params.greedy).nonzero().flatten()
    torch_q = filtered_q(logits, params, rows, backend="torch")
    triton_q = filtered_q(logits, params, rows, backend="triton")
    assert torch.allclose(torch_q, triton_q, atol=1e-6)
    assert torch.equal(torch_q > 0, triton_q > 0)  # the same kept sets
    # on the Triton path the tree verifier's q, bit for bit
    tree_q = _filtered_tree_rows(logits, rows, params.select(rows), False, True, None,
                                 filter_rule("specreg"))
    assert torch.equal(triton_q, tree_q)


def test_greedy_rows_take_the_argmax_and_the_deterministic_top_k():
    logits = _logits(12)
    params = _params(12)
    greedy = params.greedy.nonzero().flatten()
    drawn = sample_rows(logits, params, generator=torch.Generator().manual_seed(1))
    assert torch.equal(drawn.tokens[greedy], logits[greedy].argmax(-1))
    children = sample_children(logits, params, 5, generator=torch.Generator().manual_seed(1))
    probs = torch.softmax(logits.float(), -1)
    top_p, top_i = torch.topk(probs, 5, dim=-1)
    assert torch.equal(children.tokens[greedy], top_i[greedy])
    assert torch.equal(children.weights[greedy], top_p[greedy])


@pytest.mark.parametrize("order", FILTER_ORDERS)
def test_a_rows_draw_does_not_depend_on_the_rest_of_the_batch(order):
    """All-sampled batches take q as the filtered rows themselves (no zeroed copy, no argmax of
    every row); a row's token and q are the same there as inside a batch with greedy rows."""
    logits = _logits(12)
    params = _params(12)
    keys, positions = torch.arange(100, 112), torch.arange(12) * 3
    mixed = sample_rows(logits, params, keys=keys, positions=positions, filter_order=order)
    sampled = (~params.greedy).nonzero().flatten()
    alone = sample_rows(logits[sampled], params.select(sampled), keys=keys[sampled],
                        positions=positions[sampled], filter_order=order)
    assert torch.equal(alone.tokens, mixed.tokens[sampled])
    assert torch.equal(alone.q, mixed.q[sampled])
    assert alone.tokens.dtype == mixed.tokens.dtype == torch.int64
    greedy = params.greedy.nonzero().flatten()
    assert torch.equal(mixed.q[greedy], torch.nn.functional.one_hot(
        logits[greedy].argmax(-1), V).float())


def _repeated(kind: int, copies: int) -> tuple[torch.Tensor, SamplingParams]:
    row = _logits(len(KINDS))[kind]
    params = _params(len(KINDS)).select(torch.full((copies,), kind, dtype=torch.int64))
    return row.expand(copies, V).contiguous(), params


def _expected(row: torch.Tensor, kind: int, **overrides) -> torch.Tensor:
    filters = {**KINDS[kind], **overrides}
    return filtered_distribution(row, **filters)


@pytest.mark.parametrize("kind", range(1, len(KINDS)))
def test_row_draws_follow_the_filtered_q_and_not_the_unfiltered_one(kind):
    logits, params = _repeated(kind, 6000)
    drawn = sample_rows(logits, params, generator=torch.Generator().manual_seed(kind))
    counts = torch.bincount(drawn.tokens, minlength=V)
    assert chi_square_p_value(counts, _expected(logits[0], kind)) > P_VALUE_THRESHOLD
    unfiltered = filtered_distribution(logits[0], temperature=KINDS[kind]["temperature"] * 1.5)
    assert chi_square_p_value(counts, unfiltered) < P_VALUE_THRESHOLD  # negative control


@pytest.mark.parametrize("kind", [2, 4, 5])
def test_children_are_draws_without_replacement_in_order(kind):
    logits, params = _repeated(kind, 6000)
    drawn = sample_children(logits, params, 3, generator=torch.Generator().manual_seed(kind))
    assert (drawn.tokens[:, 0] != drawn.tokens[:, 1]).all()
    assert (drawn.weights[:, :-1] > drawn.weights[:, 1:]).all()  # strictly in draw order
    assert ((drawn.weights > 0) & (drawn.weights < 1)).all()
    q = _expected(logits[0], kind)
    first = torch.bincount(drawn.tokens[:, 0], minlength=V)
    assert chi_square_p_value(first, q) > P_VALUE_THRESHOLD
    # the second child follows sum_x q(x) q(y) / (1 - q(x)) (y != x): without replacement
    rest = q[:, None] * q[None, :] / (1 - q[:, None]).clamp_min(1e-12)
    rest.fill_diagonal_(0.0)
    second_expected = rest.sum(0)
    second = torch.bincount(drawn.tokens[:, 1], minlength=V)
    if float((q > 0).sum()) >= 2:
        assert chi_square_p_value(second, second_expected) > P_VALUE_THRESHOLD
        # negative control: with replacement the second child would follow q itself
        assert chi_square_p_value(second, q) < P_VALUE_THRESHOLD


def test_child_weights_do_not_depend_on_the_token_drawn():
    """The ranking weight of the first child is exp(-E/q(c)) for the Gumbel race: uniform on
    (0, 1) whichever token won, so a tree pruned by it is not biased towards any token."""
    logits, params = _repeated(5, 20000)
    drawn = sample_children(logits, params, 2, generator=torch.Generator().manual_seed(9))
    heavy = drawn.tokens[:, 0] == int(_expected(logits[0], 5).argmax())
    bins = torch.linspace(0, 1, 11)
    for chosen in (heavy, ~heavy):
        counts = torch.histc(drawn.weights[chosen, 0], bins=10, min=0, max=1)
        assert chi_square_p_value(counts, torch.full((10,), 0.1)) > P_VALUE_THRESHOLD
    assert bins.numel() == 11


def test_row_params_repeat_each_request():
    params = _params(3)
    rows = row_params(params, 4)
    assert rows.batch_size == 12
    assert torch.equal(rows.temperature, params.temperature.repeat_interleave(4))


def test_bad_input_is_a_coded_error_before_any_draw():
    logits = _logits(6)
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    with pytest.raises(KernelInputError) as wrong_size:
        sample_rows(logits, _params(5), generator=generator)
    assert wrong_size.value.problems[0].code == "SR910"
    bad = _params(6)
    bad = SamplingParams(temperature=bad.temperature - 5.0, top_k=bad.top_k, top_p=bad.top_p,
                         min_p=bad.min_p, seed=bad.seed)
    with pytest.raises(KernelInputError) as negative:
        sample_rows(logits, bad, generator=generator)
    assert negative.value.problems[0].code == "SR911"
    with pytest.raises(KernelInputError) as too_many:
        sample_children(logits, _params(6), V + 1, generator=generator)
    assert too_many.value.problems[0].code == "SR926"
    with pytest.raises(KernelInputError) as not_rows:
        sample_rows(logits[0], _params(1), generator=generator)
    assert not_rows.value.problems[0].code.startswith("SR9")
    with pytest.raises(KernelInputError) as integer_logits:
        sample_rows(logits.long(), _params(6), generator=generator)
    assert integer_logits.value.problems[0].code.startswith("SR9")
    assert torch.equal(generator.get_state(), state)  # nothing was drawn


@pytest.mark.parametrize("vocab", [200, 300])  # both sides of the 256-token boundary
def test_a_nan_row_is_refused_or_drafts_nothing_and_other_rows_are_unaffected(vocab):
    """The drafters' sampler at top_p < 1: a NaN row is SR904 with value checks (the default
    on CPU), never a raw RuntimeError and never a silent token 0; without value checks that row
    alone drafts -1 with an all-zero q (`invalid`), and every other row draws exactly what it
    draws in a batch without the bad row."""
    g = torch.Generator().manual_seed(vocab)
    logits = torch.randn(5, vocab, generator=g)
    params = SamplingParams.of(5, temperature=1.0, top_p=0.8)
    keys, positions = torch.arange(5) + 40, torch.arange(5) * 3
    clean = sample_rows(logits, params, keys=keys, positions=positions)
    bad = logits.clone()
    bad[2, 7] = float("nan")
    with pytest.raises(KernelInputError) as refused:
        sample_rows(bad, params, keys=keys, positions=positions)
    assert refused.value.problems[0].code == "SR904" and "[2]" in str(refused.value)
    drawn = sample_rows(bad, params, keys=keys, positions=positions, check_values=False)
    assert drawn.tokens[2] == -1 and not bool(drawn.q[2].any())
    assert drawn.invalid.tolist() == [False, False, True, False, False]
    others = [0, 1, 3, 4]
    assert torch.equal(drawn.tokens[others], clean.tokens[others])
    assert torch.equal(drawn.q[others], clean.q[others])
    for row in (torch.full((vocab,), float("inf")), torch.full((vocab,), float("-inf"))):
        bad[2] = row
        with pytest.raises(KernelInputError, match="SR904"):
            sample_rows(bad, params, keys=keys, positions=positions)


def test_a_keyed_draft_is_the_targets_own_draw_when_q_equals_p():
    """The drafter draws by the verifiers' race on the same stream (SAMPLE role at the draft's
    position): where q equals the target's p the draft is exactly the token the invariant rule
    and plain sampling take there, so it is accepted; at another key it is a different draw."""
    from specreg.kernels.chain import sample_tokens

    g = torch.Generator().manual_seed(3)
    logits = torch.randn(64, 500, generator=g) * 2
    params = SamplingParams.of(64, temperature=0.9, top_k=40)
    keys, positions = torch.arange(64) * 11 + 5, torch.arange(64) + 100
    drawn = sample_rows(logits, params, keys=keys, positions=positions)
    assert torch.equal(drawn.tokens, sample_tokens(drawn.q, keys=keys, positions=positions))
    other = sample_tokens(drawn.q, keys=keys + 1, positions=positions)
    assert int((other != drawn.tokens).sum()) > 20
