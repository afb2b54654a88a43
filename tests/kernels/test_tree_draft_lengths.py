"""Per-request draft lengths on draft trees (the core tree kernels): request r verifies only
its nodes at depth <= draft_lengths[r], 0 = one plain sample from the root's row.

Oracles: the plain per-request walks of `tree_verify_greedy.reference` /
`tree_verify_sampling.reference` run at each request's own depth (the rule "accept at most L
drafts"), never the cut links the code under test builds; node depths against `build_tree`'s
positions. Lossless: chi-square at a fixed seed over adversarial (p, q) pairs with lengths 0, 1
and 2 mixed in one batch, each group on its own, with a negative control (opting out by
rejecting every child) that fails.
"""

import pytest
import torch
from specreg.kernels.tree_lengths import cut_below, node_depths
from specreg.kernels.tree_lengths.reference import (
    cut_below_reference,
    node_depths_reference,
)
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_greedy.reference import greedy_walk
from specreg.kernels.tree_verify_params import verify_tree_with_params
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.kernels.tree_coins.reference import stream_coins_reference
from specreg.kernels.tree_verify_params.reference import verify_tree_with_params_reference
from specreg.kernels.tree_verify_sampling.reference import sampling_walk
from tests.kernels.test_tree_lossless import pair_pvalue, pairs, pvalue, run
from tests.support.eagle import links, make_tree

from specreg.kernels.random_stream import fresh_keys
from specreg.kernels.sampling import request_keys
from specreg.contract.sampling_params import SamplingParams

B, TOPK, STEPS, N, VOCAB = 12, 3, 4, 12, 6
MIXED_SAMPLES = 9000  # 3000 per draft length


def _case(seed, b=B):
    tree, gen = make_tree(b, TOPK, STEPS, N, VOCAB, seed)
    cand, ridx, nt, ns = links(tree, N)
    logits = torch.randn(b, N, VOCAB, generator=gen)
    # most nodes favour their first child's token: deep paths get accepted
    child = cand.gather(1, nt.clamp(min=0))
    favour = (nt >= 0) & (torch.rand(b, N, generator=gen) < 0.8)
    logits += 6.0 * favour[:, :, None] * torch.nn.functional.one_hot(child, VOCAB)
    lengths = torch.tensor([0, 1, STEPS, 2] * (b // 4))
    return tree, (cand, ridx, nt, ns), logits, lengths, gen


def _padded(path, emitted, width):
    return path + [-1] * (width - len(path)), emitted + [-1] * (width - len(emitted))


def _check_walks(out, tree_links, walks, lengths):
    """`out` against per-request (path, bonus) walks: counts, bonus, tokens and rows."""
    cand, ridx = tree_links[0], tree_links[1]
    for r, (path, bonus) in enumerate(walks):
        assert len(path) - 1 <= int(lengths[r])
        emitted = [int(cand[r, node]) for node in path[1:]] + [bonus]
        rows, tokens = _padded([int(ridx[r, node]) for node in path], emitted, STEPS + 1)
        assert int(out.accept_token_num[r]) == len(path) - 1, r
        assert int(out.bonus[r]) == bonus, r
        assert out.output_tokens[r].tolist() == tokens, r
        assert out.accept_index[r].tolist() == rows, r


@pytest.mark.parametrize("seed", range(3))
def test_node_depths_are_the_built_trees_depths(seed):
    tree, (_, _, nt, ns), *_ = _case(seed)
    positions = tree.positions.view(B, N)
    assert torch.equal(node_depths(nt, ns), positions - positions[:, :1])
    assert torch.equal(node_depths(nt, ns), node_depths_reference(nt, ns))
    lengths = torch.tensor([0, 1, STEPS, 2] * (B // 4))
    assert torch.equal(cut_below(nt, ns, lengths, depth=STEPS),
                       cut_below_reference(nt, ns, lengths.tolist()))


def test_node_depths_of_deep_chains_and_unreachable_slots():
    """A chain of 9 nodes (8 hops: three pointer-jumping rounds) and a tree with slots no link
    reaches (depth 0, never cut into reach)."""
    n = 9
    chain = torch.tensor([list(range(1, n)) + [-1]])
    none = torch.full((1, n), -1)
    assert node_depths(chain, none).tolist() == [list(range(n))]
    first = torch.tensor([[1, 3, -1, -1, -1, -1]])
    sibling = torch.tensor([[-1, 2, -1, -1, -1, -1]])  # slots 4, 5 unused
    assert node_depths(first, sibling).tolist() == node_depths_reference(first, sibling).tolist()
    assert node_depths(first, sibling).tolist() == [[0, 1, 1, 2, 0, 0]]


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_greedy_walks_each_request_to_its_own_depth(force_backend, backend):
    force_backend(backend)
    for seed in range(2 if backend == "torch" else 1):
        _, tree_links, logits, lengths, _ = _case(seed)
        cand, _, nt, ns = tree_links
        out = verify_tree_greedy(*tree_links, depth=STEPS, target_logits=logits,
                                 draft_lengths=lengths)
        predict = logits.argmax(-1)
        walks = [greedy_walk(cand[r].tolist(), nt[r].tolist(), ns[r].tolist(),
                             predict[r].tolist(), int(lengths[r])) for r in range(B)]
        _check_walks(out, tree_links, walks, lengths)
        assert (out.accept_token_num[lengths == 0] == 0).all()  # opt-out: the root's argmax
        assert torch.equal(out.bonus[lengths == 0], predict[lengths == 0, 0])
        assert int(out.accept_token_num[lengths == STEPS].max()) > 1  # not vacuous


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("use_q", [False, True])
def test_sampling_walks_each_request_to_its_own_depth(force_backend, backend, use_q):
    force_backend(backend)
    _, tree_links, logits, lengths, gen = _case(5)
    cand, _, nt, ns = tree_links
    p = torch.softmax(logits, -1)
    q = torch.softmax(logits + torch.randn(logits.shape, generator=gen), -1) if use_q else None
    keys = fresh_keys(B, "cpu", generator=gen)
    positions = torch.randint(0, 1000, (B,), generator=gen)
    out = verify_tree_sampling(*tree_links, p, depth=STEPS, draft_probs=q, keys=keys,
                               positions=positions, draft_lengths=lengths)
    walks = []
    for r in range(B):  # the full tree's links and stream coins, walked to the request's depth
        tree = (cand[r].tolist(), nt[r].tolist(), ns[r].tolist())
        key, position = int(keys[r]), int(positions[r])
        walks.append(sampling_walk(
            *tree, p[r].double().tolist(), None if q is None else q[r].double().tolist(),
            *stream_coins_reference(*tree, key, position), key, position,
            depth=int(lengths[r]),
        ))
    _check_walks(out, tree_links, walks, lengths)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_with_params_walks_each_request_to_its_own_depth(force_backend, backend):
    force_backend(backend)
    b = B if backend == "torch" else 4  # the interpreter runs a program per row and tile
    _, tree_links, logits, lengths, gen = _case(7, b)
    draft = logits + torch.randn(logits.shape, generator=gen)
    params = SamplingParams.of(b, temperature=[1.0, 0.8, 0.0, 1.3] * (b // 4),
                               top_k=[0, 4, 0, 0] * (b // 4), top_p=[1.0, 1.0, 1.0, 0.9] * (b // 4),
                               seed=list(range(b)))
    positions = torch.arange(b) + 3
    out = verify_tree_with_params(*tree_links, logits.clone(), depth=STEPS, params=params,
                                  draft=draft.clone(), positions=positions, draft_lengths=lengths,
                                  )
    cand, ridx, nt, ns = tree_links
    for r in range(b):
        one = torch.tensor([r])
        ref = verify_tree_with_params_reference(
            cand[one], ridx[one] - r * N, nt[one], ns[one], logits[one],
            depth=int(lengths[r]), params=params.select(one),
            keys=request_keys(params.select(one)), positions=positions[one], draft=draft[one],
        )
        count = int(ref.accept_token_num[0])
        assert int(out.accept_token_num[r]) == count, r
        assert int(out.bonus[r]) == int(ref.bonus[0]), r
        emitted = ref.output_tokens[0, : count + 1].tolist()
        assert out.output_tokens[r, : count + 1].tolist() == emitted
        assert (out.output_tokens[r, count + 1:] == -1).all()


# ------------------------------------------------------------------------------- lossless
def _mixed_run(P, Q, *, use_q, control=False, seed=0):
    """`run` of test_tree_lossless (depth-2 trees of topk 2, SAMPLES requests) with lengths
    0, 1, 2 in turn; the control opts out by forcing every root child to be rejected."""
    import tests.kernels.test_tree_lossless as lossless

    original, samples = lossless.verify_tree_sampling, lossless.SAMPLES
    b = lossless.SAMPLES = MIXED_SAMPLES
    lengths = torch.arange(b) % 3
    seen = {}

    def with_lengths(*args, **kwargs):
        if control:
            coins = torch.rand(b, args[0].shape[1], generator=torch.Generator().manual_seed(seed))
            coins[lengths == 0] = 0.999999  # "opt out" = reject every child of the root
            kwargs["coins"] = coins  # SGLang's layout: the root's target-only coin is column 0
            out = original(*args, **kwargs, draft_lengths=lengths.clamp(min=1))
        else:
            out = original(*args, **kwargs, draft_lengths=lengths)
        seen["accepted"] = out.accept_token_num
        return out

    lossless.verify_tree_sampling = with_lengths
    try:
        tokens = run(P, Q, 2, use_q=use_q, seed=seed)
    finally:
        lossless.verify_tree_sampling, lossless.SAMPLES = original, samples
    return tokens, lengths, seen["accepted"]


@pytest.mark.parametrize("name, use_q", [("random", True), ("disjoint", True),
                                          ("q_zero_where_p_positive", True), ("random", False)])
def test_mixed_lengths_are_lossless_per_group(name, use_q):
    P, Q = pairs()[name]
    tokens, lengths, accepted = _mixed_run(P, Q, use_q=use_q)
    assert (accepted <= lengths).all() and (accepted[lengths == 0] == 0).all()
    if name != "disjoint":  # disjoint supports: nothing is ever accepted
        assert int(accepted[lengths == 2].max()) == 2  # the long rows do speculate
    for length in (0, 1, 2):
        rows = tokens[lengths == length]
        assert pvalue(rows[:, 0], P[0]) > 1e-3, length
        if length:
            assert pair_pvalue(rows, P) > 1e-3, length
        else:
            assert (rows[:, 1:] == -1).all()  # one token: a plain sample


def test_negative_control_opting_out_by_rejecting_every_child_is_detected():
    P, Q = pairs()["random"]
    tokens, lengths, _ = _mixed_run(P, Q, use_q=False, control=True)
    assert pvalue(tokens[lengths == 0][:, 0], P[0]) < 1e-6
