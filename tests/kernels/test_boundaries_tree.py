"""Tree verification (the core tree kernels) at its boundaries, torch and Triton (interpreter)
against the plain references: a tree deeper than `depth` on the `target_predict` path (every
output compared), a coin of exactly 0 against a child of probability 0 (both rules: strict
inequalities), a child whose probability equals `threshold_single` exactly, and final draws
whose residual has no mass (the fallback to p). Acceptance coins are given (SGLang's layout);
the final token is the race on the stream keyed by each request's key and position (`KEYS`,
`POSITIONS`), its known answers derived from hand-computed weights with `block_race_reference`
and `draw_lanes`."""

import pytest
import torch
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_greedy.reference import verify_tree_greedy_reference
from specreg.kernels.tree_verify_sampling import torch_impl as tree_torch
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.kernels.tree_verify_sampling.reference import verify_tree_sampling_reference
from specreg.kernels.tree_coins import caller_tree_coins
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

from specreg.kernels.random_stream.reference import draw_lanes
from specreg.kernels.random_stream.types import RESIDUAL_ROLE
from specreg.kernels.sampling.reference import block_race_reference

BACKENDS = ["torch", "triton"]
FIELDS = ("predicts", "accept_index", "accept_token_num", "bonus", "output_tokens")
ALMOST_ONE = 1.0 - 2.0**-24
#: The two requests' keys and positions (of their depth-1 nodes) on the random stream.
KEYS = torch.tensor([11, -(2**62) + 5])
POSITIONS = torch.tensor([0, 123456789])


def _same(got, want):
    for field in FIELDS:
        assert torch.equal(getattr(got, field).long(), getattr(want, field).long()), field


def _links(first, sibling, b):
    n = len(first)
    next_token = torch.tensor([first] * b)
    next_sibling = torch.tensor([sibling] * b)
    retrieve_index = torch.arange(b * n).view(b, n)
    return retrieve_index, next_token, next_sibling


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_greedy_walk_on_predictions_stops_at_depth_in_a_deeper_tree(backend, depth):
    """A chain of 6 nodes (5 levels) whose every draft matches: the walk stops after `depth`
    drafts with the bonus of the node at the depth. A second request branches (the match is the
    second sibling) and a third stops early on a mismatch."""
    first = [1, 2, 3, 4, 5, -1]
    sibling = [-1, -1, -1, -1, -1, -1]
    retrieve_index, next_token, next_sibling = _links(first, sibling, 3)
    candidates = torch.tensor([[9, 11, 12, 13, 14, 15]] * 3)
    predict = torch.tensor([[11, 12, 13, 14, 15, 16]] * 3)
    next_token[1] = torch.tensor([1, -1, 3, 4, 5, -1])  # root -> {1, 2}; 2 -> 3 -> 4 -> 5
    next_sibling[1] = torch.tensor([-1, 2, -1, -1, -1, -1])
    candidates[1] = torch.tensor([9, 7, 11, 12, 13, 14])
    predict[1] = torch.tensor([11, 0, 12, 13, 14, 15])
    predict[2, 1] = 99  # request 2: node 2 (token 12) does not match
    want = verify_tree_greedy_reference(candidates, retrieve_index, next_token, next_sibling,
                                        predict, depth=depth)  # fmt: skip
    assert want.accept_token_num.tolist() == [depth, depth, 1]
    got = verify_tree_greedy(candidates, retrieve_index, next_token, next_sibling, depth=depth,
                             target_predict=predict, backend=backend)  # fmt: skip
    _same(got, want)
    logits = torch.nn.functional.one_hot(predict, 100).float()
    from_logits = verify_tree_greedy(candidates, retrieve_index, next_token, next_sibling,
                                     depth=depth, target_logits=logits, backend=backend)
    _same(from_logits, want)


# Sampling trees: root 0 -> children 1, 2 (siblings); 1 -> 3.
FIRST, SIBLING = [1, 3, -1, -1], [-1, 2, -1, -1]
VOCAB = 8


def _dense(inputs):
    """The torch implementation with the accelerators' branches (`cpu_branches` off)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tree_torch, "cpu_branches", lambda device: False)
        return tree_torch.verify_tree_sampling_torch(inputs)


def _sample(backend, candidates, target, draft, coins, *, keys=KEYS, links=(FIRST, SIBLING),
            reference_links=None, **kwargs):
    """Both backends (and the accelerators' torch branches) against the reference, on the tree
    `links`; the reference walks `reference_links` instead where given (the same nodes)."""
    b = candidates.shape[0]
    retrieve_index, next_token, next_sibling = _links(*links, b)
    stream = (*caller_tree_coins(coins), keys, POSITIONS)
    inputs = TreeSamplingInputs(
        candidates, retrieve_index, next_token, next_sibling, target, draft, *stream,
        depth=2, threshold_single=kwargs.get("threshold_single", 1.0),
        threshold_acc=kwargs.get("threshold_acc", 1.0),
    )
    walked = inputs
    if reference_links is not None:
        _, ref_next, ref_sibling = _links(*reference_links, b)
        walked = TreeSamplingInputs(
            candidates, retrieve_index, ref_next, ref_sibling, target, draft, *stream,
            depth=2, threshold_single=inputs.threshold_single, threshold_acc=inputs.threshold_acc,
        )
    want = verify_tree_sampling_reference(walked)
    got = verify_tree_sampling(candidates, retrieve_index, next_token, next_sibling, target,
                               depth=2, draft_probs=draft, coins=coins, keys=keys,
                               positions=POSITIONS, backend=backend, block_v=16,
                               **kwargs)  # fmt: skip
    _same(got, want)
    if backend == "torch":  # and the accelerators' branches, run on these CPU tensors
        _same(_dense(inputs), want)
    return want


def _rows(b, root):
    """target / draft [b, 4, VOCAB]: row 0 (the root's) given, the others uniform."""
    rows = torch.full((b, 4, VOCAB), 1.0 / VOCAB)
    rows[:, 0] = torch.tensor(root)
    return rows


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_coin_of_zero_never_accepts_a_child_of_probability_zero(backend):
    """Node 1 drafts token 5 with p(5) = 0 and every coin is 0: `0 < 0` is false under both
    rules, so node 1 is rejected and node 2 (token 6, p = .5) accepted. Request 0: target-only;
    with recursive rejection sampling (q(5) = .5, q(6) = .25) node 1 is rejected the same way
    and node 2 accepted (its residual .5 - .25 > 0)."""
    p_root = [0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.25]
    target = _rows(2, p_root)
    draft = _rows(2, [0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.25, 0.25])
    candidates = torch.tensor([[0, 5, 6, 1]] * 2)
    coins = torch.zeros(2, 4)
    for q in (None, draft):
        want = _sample(backend, candidates, target, q, coins)
        assert want.accept_index[:, 1].tolist() == [2, 6]  # node 2 of each request


@pytest.mark.parametrize("backend", BACKENDS)
def test_threshold_single_accepts_a_child_whose_probability_equals_it(backend):
    """Target-only rule with a parent coin (0.9) the cumulative test fails: a child with p(c)
    exactly threshold_single (0.25) is accepted, one with p(c) = 0.125 below it is not."""
    target = _rows(2, [0.25, 0.25, 0.125, 0.375, 0.0, 0.0, 0.0, 0.0])
    candidates = torch.tensor([[0, 1, 2, 3], [0, 2, 4, 3]])
    coins = torch.tensor([[0.9, 0.0, 0.0, 0.0]] * 2)
    want = _sample(backend, candidates, target, None, coins,
                   threshold_single=0.25, threshold_acc=1.0)  # fmt: skip
    assert want.accept_token_num.tolist()[0] >= 1 and want.accept_index[0, 1] == 1
    assert want.accept_index[1, 1] == -1  # neither 0.125 nor 0 reaches 0.25


@pytest.mark.parametrize("backend", BACKENDS)
def test_final_draws_without_residual_mass_fall_back_to_p(backend):
    """Request 0 (target-only): p(4) = ALMOST_ONE, the root's coin equals it, both children
    draft token 4 (the second a duplicate, counting 0): both rejected, p without 4 has no mass,
    so the final token is 4. Request 1 (recursive rejection): q = p, children draft tokens of
    probability 0 under both: rejected, max(p - q, 0) is all zero, the final token comes from p
    (token 4 again), never index 0."""
    root = [0.0] * VOCAB
    root[4] = ALMOST_ONE
    target = _rows(2, root)
    draft = target.clone()
    draft[0, 0] = 0.0  # request 0: no q at the root -> the target-only rule
    candidates = torch.tensor([[0, 4, 4, 1], [0, 3, 5, 1]])
    coins = torch.tensor([[ALMOST_ONE, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]])
    for q in (None, draft):
        want = _sample(backend, candidates, target, q, coins)
        assert want.output_tokens[:, 0].tolist() == [4, 4]
        assert want.accept_token_num.tolist() == [0, 0]


@pytest.mark.parametrize("with_q", [False, True])
def test_the_accelerator_branches_on_cpu_tensors_equal_the_reference(with_q):
    """`cpu_branches` off: the residual masses, the accepted nodes' masses and the final draw
    over every request's rows (the branches accelerators take, no host synchronisation), run on
    CPU tensors against the reference: random trees, a request without q, both thresholds."""
    from tests.kernels.test_tree_references import SAMPLING_SHAPES, sampling_inputs

    cases = [sampling_inputs(shape, 13, sum(shape), with_q=with_q, zero_q_rows=1)
             for shape in SAMPLING_SHAPES]  # fmt: skip
    cases += [sampling_inputs((6, 3, 3, 10), 11, 3, with_q=with_q, threshold_acc=0.5),
              sampling_inputs((6, 3, 3, 10), 11, 3, with_q=with_q, threshold_single=0.3)]
    for inputs in cases:
        _same(_dense(inputs), verify_tree_sampling_reference(inputs))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_token_tried_at_an_earlier_parent_is_not_a_duplicate_at_the_next(backend):
    """Root 0 -> children 1 (token 1), 2 (token 2); node 2 -> child 3 (token 1 again). Node 1 is
    rejected at the root and node 2 accepted: the root's tried tokens are forgotten, so token 1
    at node 2 is a fresh child (no stale slot of the root counts as tried) and is accepted.
    Target-only: root coin .6 (> p(1) = .25, < p(1) + p(2) = .75), node 2's coin .1 < p(1) =
    .125. Recursive rejection: q(1) = .5 at the root, coin .6 rejects node 1 (.6 * .5 >= .25),
    node 2 is accepted (its residual .25 of .5 against q .25 of .5), and node 3 (p = q = 1/8,
    coin .1) is accepted, which a stale coefficient 1 for token 1 (residual 0) would refuse."""
    links = ([1, -1, 3, -1], [-1, 2, -1, -1])
    target = _rows(2, [0.25, 0.25, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0])
    draft = _rows(2, [0.0, 0.5, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0])
    candidates = torch.tensor([[0, 1, 2, 1]] * 2)
    coins = torch.tensor([[0.6, 0.5, 0.1, 0.0]] * 2)
    for q in (None, draft):
        want = _sample(backend, candidates, target, q, coins, links=links)
        assert want.accept_token_num.tolist() == [2, 2]
        assert want.accept_index[:, 1:].tolist() == [[2, 3], [6, 7]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_unchecked_out_of_range_candidates_are_never_accepted(backend):
    """With `check_values=False` (the GPU default) candidate ids -1 and `vocab` reach the
    kernel: never accepted, even with coins of 0 and p > 0 at the ids they would clamp to (0
    and vocab - 1), never read out of bounds, never recorded as tried; the walk goes on to the
    next sibling (token 0, p = .25) exactly as the reference walks the tree without them."""
    links = ([1, -1, -1, -1], [-1, 2, 3, -1])  # root -> 1 (-1), 2 (vocab), 3 (token 0)
    without = ([3, -1, -1, -1], [-1, -1, -1, -1])  # root -> 3
    target = _rows(2, [0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.25])
    candidates = torch.tensor([[0, -1, VOCAB, 0]] * 2)
    coins = torch.zeros(2, 4)
    want = _sample(backend, candidates, target, None, coins, links=links,
                   reference_links=without, check_values=False)  # fmt: skip
    assert want.accept_index[:, 1].tolist() == [3, 7]


def _first_key(weights, role, position, token):
    """The first key 0, 1, ... whose race over `weights` (hand-computed) at (role, position)
    draws `token` (`block_race_reference` on `draw_lanes`, not the code under test)."""
    return next(k for k in range(1000)
                if block_race_reference(weights, draw_lanes(k, role, position)) == token)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_child_outside_a_spent_draft_keeps_its_residual_in_the_final_draw(backend):
    """Recursive rejection with q one-hot at token 1: node 1 (token 1, p = .25, coin .5) is
    rejected, which spends all of q (the residual is p without token 1). Node 2 drafts token 3,
    outside q: with no q mass left it is rejected and the residual stays as it was, so token 3
    keeps its .25 in the final draw: the residual is [.25, 0, .25, .25, 0, ...], and request 0's
    key is one whose race over those weights (RESIDUAL role, its depth-1 position) draws token
    3, request 1's one that draws token 2. Its frozen coefficient (the current one, 1) must
    leave p(3) in place: a struck token 3 could not be drawn."""
    target = _rows(2, [0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0])
    draft = _rows(2, [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    candidates = torch.tensor([[0, 1, 3, 2]] * 2)
    coins = torch.tensor([[0.5, 0.5, 0.0, 0.0]] * 2)
    residual = [0.25, 0.0, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0]
    keys = torch.tensor([_first_key(residual, RESIDUAL_ROLE, int(POSITIONS[r]), token)
                         for r, token in enumerate((3, 2))])
    want = _sample(backend, candidates, target, draft, coins, keys=keys)
    assert want.accept_token_num.tolist() == [0, 0]
    assert want.output_tokens[:, 0].tolist() == [3, 2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_residual_mass_after_two_rejections_decides_the_third_child(backend):
    """Recursive rejection at the root, three children (tokens 0, 2, 4): 0 and 2 are rejected
    (coins .9), and the third's acceptance compares its coin with r(4) / sum(r) over
    q(4) / sum(q) after both, here .8276: coin .75 accepts it (request 0), .9 does not
    (request 1). The mass of the residual after the second rejection must count the untried
    tokens only (the tried ones are at 0), neither less nor more, or one of them flips."""
    links = ([1, -1, -1, -1], [-1, 2, 3, -1])
    target = _rows(2, [0.1, 0.2, 0.1, 0.2, 0.4, 0.0, 0.0, 0.0])
    draft = _rows(2, [0.3, 0.05, 0.3, 0.15, 0.2, 0.0, 0.0, 0.0])
    candidates = torch.tensor([[0, 0, 2, 4]] * 2)
    coins = torch.tensor([[0.9, 0.9, 0.75, 0.0], [0.9, 0.9, 0.9, 0.0]])
    want = _sample(backend, candidates, target, draft, coins, links=links)
    assert want.accept_index[:, 1].tolist() == [3, -1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_sampling_walk_stops_at_depth_in_a_deeper_tree(backend):
    """A chain of three drafts (root -> 1 -> 2 -> 3) under depth 2, each child one the rule
    would accept (coins 0, q = p: uniform rows, then node 2's one-hot at token 5, node 3's
    token): the walk stops after two drafts, and the bonus is drawn from node 2's row (token 5),
    not node 3's (one-hot at 6)."""
    links = ([1, 2, 3, -1], [-1, -1, -1, -1])
    target = torch.full((2, 4, VOCAB), 1.0 / VOCAB)
    target[:, 2] = torch.nn.functional.one_hot(torch.tensor(5), VOCAB).float()
    target[:, 3] = torch.nn.functional.one_hot(torch.tensor(6), VOCAB).float()
    candidates = torch.tensor([[0, 1, 2, 5]] * 2)
    coins = torch.zeros(2, 4)
    for q in (None, target.clone()):
        want = _sample(backend, candidates, target, q, coins, links=links)
        assert want.accept_token_num.tolist() == [2, 2]
        assert want.output_tokens.tolist() == [[1, 2, 5]] * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_draft_row_of_tiny_mass_is_scaled_by_its_own_mass(backend):
    """Recursive rejection on a q row whose whole mass is 1.5e-30 (q(1) = 5e-31, q(2) = 1e-30,
    normal float32 numbers): node 1 (token 1, coin .9) is rejected, and the residual's
    coefficient is 1 / 1.5e-30, which leaves token 2 (p = .6) at max(.6 - 2/3, 0) = 0, so
    node 2 is rejected even with coin .1, and the final token comes from token 0 alone. A
    coefficient from a mass floored any higher (2e-30) would leave token 2 a residual."""
    target = _rows(2, [0.2, 0.2, 0.6, 0.0, 0.0, 0.0, 0.0, 0.0])
    draft = _rows(2, [0.0, 5e-31, 1e-30, 0.0, 0.0, 0.0, 0.0, 0.0])
    candidates = torch.tensor([[0, 1, 2, 3]] * 2)
    coins = torch.tensor([[0.9, 0.1, 0.0, 0.0]] * 2)
    want = _sample(backend, candidates, target, draft, coins)
    assert want.accept_token_num.tolist() == [0, 0]
    assert want.output_tokens[:, 0].tolist() == [0, 0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_duplicate_child_spends_no_draft_mass(backend):
    """Recursive rejection at the root, children tokens 0, 0 (a duplicate), 4. The duplicate
    is rejected and updates the residual, but token 0 left q once already: q's mass stays
    20/26, and the third child's threshold is .787 (coin .65 accepts it); taking token 0's q
    out a second time would lower it to .551 and reject it."""
    links = ([1, -1, -1, -1], [-1, 2, 3, -1])
    target = _rows(2, [x / 17 for x in (3, 1, 7, 0, 6, 0, 0, 0)])
    draft = _rows(2, [x / 26 for x in (6, 9, 0, 7, 4, 0, 0, 0)])
    candidates = torch.tensor([[0, 0, 0, 4]] * 2)
    coins = torch.tensor([[0.99, 0.9, 0.65, 0.0], [0.99, 0.9, 0.85, 0.0]])
    want = _sample(backend, candidates, target, draft, coins, links=links)
    assert want.accept_index[:, 1].tolist() == [3, -1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_accepted_node_without_draft_mass_tries_its_children_by_the_target_only_rule(backend):
    """Root 0 (q = p: recursive rejection) accepts node 1 (coin 0); node 1's q row is all
    zero, so its child, node 3 (token 2, p = 1/8), is tried by the target-only rule with
    node 1's coin .05 and accepted; recursive rejection with no q mass would refuse it."""
    target = _rows(2, [0.125] * VOCAB)
    draft = target.clone()
    draft[:, 1] = 0.0
    candidates = torch.tensor([[0, 1, 5, 2]] * 2)
    coins = torch.tensor([[0.0, 0.05, 0.0, 0.0]] * 2)
    want = _sample(backend, candidates, target, draft, coins)
    assert want.accept_token_num.tolist() == [2, 2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_that_cannot_be_viewed_flat_equal_the_reference(backend):
    """target and draft [b, N, V] as transposes of [N, b, V] tensors (no flat [b * N, V] view):
    the masses and draws read them through a copy, with the same results, on the torch
    paths (both branches) and Triton, on random trees of the reference tests."""
    from tests.kernels.test_tree_references import sampling_inputs

    base = sampling_inputs((4, 3, 3, 10), 11, 3, with_q=True)
    target = base.target_probs.transpose(0, 1).contiguous().transpose(0, 1)
    draft = base.draft_probs.transpose(0, 1).contiguous().transpose(0, 1)
    with pytest.raises(RuntimeError):
        target.view(-1, target.shape[-1])
    inputs = TreeSamplingInputs(
        base.candidates, base.retrieve_index, base.next_token, base.next_sibling, target, draft,
        base.coins, base.child_coins, base.keys, base.positions, depth=base.depth,
    )
    want = verify_tree_sampling_reference(inputs)
    assert torch.equal(want.output_tokens, verify_tree_sampling_reference(base).output_tokens)
    _same(tree_torch.verify_tree_sampling_torch(inputs), want)
    _same(_dense(inputs), want)
    got = verify_tree_sampling(inputs.candidates, inputs.retrieve_index, inputs.next_token,
                               inputs.next_sibling, target, depth=inputs.depth, draft_probs=draft,
                               keys=inputs.keys, positions=inputs.positions,
                               backend=backend, block_v=16)  # fmt: skip
    _same(got, want)
