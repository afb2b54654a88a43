import pytest
import torch
from specreg.kernels.tree_build import build_tree
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_greedy.torch_impl import verify_tree_greedy_torch
from specreg.kernels.tree_verify_greedy.triton_impl import verify_tree_greedy_triton
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.kernels.tree_coins import stream_tree_coins
from specreg.kernels.tree_verify_sampling.torch_impl import verify_tree_sampling_torch
from specreg.kernels.tree_verify_sampling.triton_impl import verify_tree_sampling_triton
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs
from specreg_eagle.verifier import EagleVerifier

from specreg.errors import KernelInputError
from specreg.kernels.chain import verify_chain_sampling, verify_chain_target_only
from specreg.kernels.random_stream import fresh_keys
from tests.support.eagle import random_draft

RESULT_FIELDS = ("predicts", "accept_index", "accept_token_num", "bonus", "output_tokens")


def make_tree(b, topk, steps, n, vocab, seed, mode="qlen_only"):
    gen = torch.Generator().manual_seed(seed)
    parent_list, sel, drafts = random_draft(b, topk, steps, n, vocab, gen)
    bonus = torch.randint(0, vocab, (b,), generator=gen)
    seq = torch.randint(0, 5, (b,), generator=gen)
    return build_tree(bonus, parent_list, sel, drafts, seq, topk=topk, depth=steps,
                      num_verify_tokens=n, mask_mode=mode), gen


def links(tree, n):
    return (tree.draft_tokens.view(-1, n), tree.retrieve_index, tree.retrieve_next_token,
            tree.retrieve_next_sibling)


@pytest.mark.parametrize("seed", range(4))
def test_greedy_equals_stepwise_greedy_decoding(seed):
    vocab, b, topk, steps, n = 6, 16, 3, 4, 12
    tree, gen = make_tree(b, topk, steps, n, vocab, seed)
    table = torch.randn(vocab, vocab, generator=gen)  # toy target: logits by previous token
    cand = tree.draft_tokens.view(b, n)
    out = EagleVerifier(num_steps=steps, topk=topk, num_draft_tokens=n).verify_greedy(
        tree, table[cand])
    nt, ns = tree.retrieve_next_token, tree.retrieve_next_sibling
    for r in range(b):
        prev, node, expected = int(cand[r, 0]), 0, []
        while True:
            nxt = int(table[prev].argmax())
            expected.append(nxt)
            child = int(nt[r, node])
            while child != -1 and int(cand[r, child]) != nxt:
                child = int(ns[r, child])
            if child == -1:
                break
            prev, node = nxt, child
        count = len(expected) - 1
        assert int(out.accept_len[r]) == count
        assert out.output_tokens[r, : count + 1].tolist() == expected
        assert int(out.bonus[r]) == expected[-1]
        assert out.output_tokens[r, count + 1:].eq(-1).all()


@pytest.mark.parametrize("shape", [(3, 2, 3, 6), (4, 3, 2, 8), (2, 1, 4, 5)])
def test_greedy_triton_matches_torch(shape):
    b, topk, steps, n = shape
    tree, gen = make_tree(b, topk, steps, n, 5, sum(shape))
    predict = torch.randint(0, 3, (b, n), generator=gen)
    cand = torch.randint(0, 3, (b, n), generator=gen)
    args = (cand, *links(tree, n)[1:], predict)
    ref = verify_tree_greedy_torch(*args, depth=steps)
    got = verify_tree_greedy_triton(*args, depth=steps)
    for f in RESULT_FIELDS:
        assert torch.equal(getattr(ref, f), getattr(got, f)), f


def test_greedy_logits_argmax_triton(force_backend):
    b, n, vocab = 3, 6, 50
    tree, gen = make_tree(b, 2, 3, n, vocab, 1)
    logits = torch.randn(b, n, vocab, generator=gen)
    logits[0, 0, 7] = logits[0, 0, 9] = 100.0  # a tie goes to the lowest index
    ref = verify_tree_greedy(*links(tree, n), depth=3, target_logits=logits)
    force_backend("triton")
    got = verify_tree_greedy(*links(tree, n), depth=3, target_logits=logits, block_v=16)
    for f in RESULT_FIELDS:
        assert torch.equal(getattr(ref, f), getattr(got, f)), f
    assert int(ref.output_tokens[0, 0]) == 7  # first emitted token = argmax of the root row


@pytest.mark.parametrize("with_q", [False, True])
@pytest.mark.parametrize("shape", [(4, 2, 3, 7), (3, 3, 2, 9), (3, 1, 3, 4)])
def test_sampling_triton_matches_torch(shape, with_q):
    b, topk, steps, n = shape
    vocab = 13
    tree, gen = make_tree(b, topk, steps, n, vocab, sum(shape))
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen) * 2, -1)
    q = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1) if with_q else None
    if with_q:
        q[0, 0] = 0.0  # one node uses the target-only rule
    cand = torch.randint(0, 4, (b, n), generator=gen)  # low ids: many acceptances
    keys = fresh_keys(b, "cpu", generator=gen)
    positions = torch.randint(0, 500, (b,), generator=gen)
    _, _, nt, ns = links(tree, n)
    coins = stream_tree_coins(cand, nt, ns, keys, positions)
    args = (cand, *links(tree, n)[1:], p, q, *coins, keys, positions)
    inputs = TreeSamplingInputs(*args, depth=steps)
    ref = verify_tree_sampling_torch(inputs)
    got = verify_tree_sampling_triton(inputs, block_v=16)
    for f in RESULT_FIELDS:
        assert torch.equal(getattr(ref, f), getattr(got, f)), f


def test_sampling_does_not_mutate_inputs():
    b, n, vocab = 4, 7, 9
    tree, gen = make_tree(b, 2, 3, n, vocab, 3)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    q = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    p0, q0 = p.clone(), q.clone()
    verify_tree_sampling(*links(tree, n), p, depth=3, draft_probs=q,
                         keys=torch.ones(b, dtype=torch.int64))
    assert torch.equal(p, p0) and torch.equal(q, q0)


def test_topk1_chain_matches_chain_verifier():
    """A topk-1 tree with a q goes to the chain verifier; the tree kernel on the same chain
    reads the same stream: node c's acceptance uniform is the chain's uniform of the same
    (position, token), and a correction after a rejection races with the same key, role
    (RESIDUAL) and position. So both accept the same path and draw the same corrections (the
    residual weights differ only in rounding, max(p - q, 0) against max(p - (P/Q) q, 0) with
    masses P, Q = 1 up to rounding: no race at these inputs is that close). After a fully
    accepted chain they differ by design: the chain's bonus races in the SAMPLE role (no chain
    drafter draws at that position), the tree's final draw always in the RESIDUAL role (a tree
    drafter's SAMPLE-role draws at that position may have shaped the tree); the tree's is
    checked against the race written out by hand."""
    from specreg.kernels.random_stream.reference import draw_lanes
    from specreg.kernels.random_stream.types import RESIDUAL_ROLE
    from specreg.kernels.sampling.reference import block_race_reference

    b, steps, vocab = 12, 3, 11
    n = steps + 1
    tree, gen = make_tree(b, 1, steps, n, vocab, 5)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    q = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    keys = fresh_keys(b, "cpu", generator=gen)
    positions = torch.randint(0, 100, (b,), generator=gen)
    verifier = EagleVerifier(num_steps=steps, topk=1, num_draft_tokens=n)
    cand = tree.draft_tokens.view(b, n)
    # make most drafts likely under p so several get accepted
    likely = torch.rand(b, n - 1, generator=gen) < 0.7
    cand[:, 1:] = torch.where(likely, p[:, :-1].argmax(-1), cand[:, 1:])
    stream = dict(keys=keys, positions=positions)
    chain = verifier.verify_sampling(tree, p, draft_probs=q, **stream)
    direct = verify_tree_sampling(*links(tree, n), p, depth=steps, draft_probs=q, **stream)
    for f in ("accept_index", "accept_token_num"):
        assert torch.equal(getattr(chain, f), getattr(direct, f)), f
    stopped = direct.accept_token_num < steps
    assert torch.equal(chain.output_tokens[stopped], direct.output_tokens[stopped])
    accepted = torch.arange(n)[None, :] < direct.accept_token_num[:, None].long()
    assert int(accepted.sum()) > b  # several drafts were accepted: the comparison has content
    assert int(stopped.sum()) > 0  # and some corrections were drawn
    full = (~stopped).nonzero().flatten().tolist()
    assert full  # and some chains were accepted whole
    for r in full:
        lanes = draw_lanes(int(keys[r]), RESIDUAL_ROLE, int(positions[r]) + steps)
        assert int(direct.bonus[r]) == block_race_reference(p[r, steps].tolist(), lanes)
    own = verify_chain_sampling(cand, p, q[:, : n - 1], **stream)
    assert torch.equal(chain.bonus, own.bonus.to(chain.bonus.dtype))
    # The verifier's default positions are the tree's: root position + 1.
    default = verifier.verify_sampling(tree, p, draft_probs=q, keys=keys)
    root = tree.positions.view(b, n)[:, 0] + 1
    again = verify_chain_sampling(cand, p, q[:, : n - 1], keys=keys, positions=root)
    assert torch.equal(default.bonus, again.bonus.to(default.bonus.dtype))


def test_topk1_target_only_tree_is_the_chain_target_only_rule():
    """Without q, a chain-shaped tree under the target-only rule reads exactly the chain's
    draws: the one coin of a parent is its (only) child's uniform, the draft's chain coin, and
    the correction is p without that draft, raced with the chain's key: the same tokens."""
    b, steps, vocab = 16, 3, 300  # three race blocks
    n = steps + 1
    tree, gen = make_tree(b, 1, steps, n, vocab, 9)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen) * 3, -1)
    cand = tree.draft_tokens.view(b, n)
    cand[:, 1:] = torch.where(torch.rand(b, n - 1, generator=gen) < 0.7, p[:, :-1].argmax(-1),
                              cand[:, 1:])
    keys = fresh_keys(b, "cpu", generator=gen)
    positions = torch.randint(0, 100, (b,), generator=gen)
    want = verify_chain_target_only(cand, p, keys=keys, positions=positions)
    assert 0 < int(want.accept_len.sum()) < b * steps
    for backend in ("torch", "triton"):
        got = verify_tree_sampling(*links(tree, n), p, depth=steps, keys=keys,
                                   positions=positions, backend=backend)
        assert torch.equal(got.accept_token_num, want.accept_len), backend
        assert torch.equal(got.output_tokens, want.output_tokens), backend


def test_keyed_draws_are_deterministic():
    b, n, vocab = 8, 7, 9
    tree, gen = make_tree(b, 2, 3, n, vocab, 4)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    verifier = EagleVerifier(num_steps=3, topk=2, num_draft_tokens=n)

    def keyed(key):
        return verifier.verify_sampling(tree, p, keys=torch.full((b,), key))

    assert torch.equal(keyed(11).output_tokens, keyed(11).output_tokens)
    assert len({tuple(keyed(s).bonus.tolist()) for s in range(6)}) > 1
    with_gen = [verifier.verify_sampling(tree, p, generator=torch.Generator().manual_seed(3))
                for _ in range(2)]
    assert torch.equal(with_gen[0].output_tokens, with_gen[1].output_tokens)


def test_a_request_gets_the_same_tree_tokens_alone_in_a_batch_and_on_both_backends():
    """One request (its key, positions, tree and rows) verified alone, then at row 5 of a
    batch of 8 others, with and without q, on torch and on Triton: the same path and tokens."""
    b, topk, steps, n, vocab = 8, 2, 3, 7, 300
    tree, gen = make_tree(b, topk, steps, n, vocab, 12)
    cand, ridx, nt, ns = links(tree, n)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen) * 3, -1)
    q = torch.softmax(torch.randn(b, n, vocab, generator=gen) * 3, -1)
    cand = torch.where(torch.rand(b, n, generator=gen) < 0.6, p.argmax(-1), cand)
    keys = fresh_keys(b, "cpu", generator=gen)
    positions = torch.randint(0, 1 << 20, (b,), generator=gen)
    # request `r` of the batch is the lone request, moved to row 5
    r, row = 2, 5
    order = torch.tensor([0, 1, 3, 4, 6, 2, 5, 7])
    assert int(order[row]) == r
    flat = (order[:, None] * n + torch.arange(n)).flatten()
    moved = (cand[order], torch.arange(b * n).view(b, n), nt[order], ns[order])
    for draft in (None, q):
        alone_args = (cand[r:r + 1], torch.arange(n)[None], nt[r:r + 1], ns[r:r + 1])
        kwargs = dict(depth=steps, keys=keys[r:r + 1], positions=positions[r:r + 1])
        alone = verify_tree_sampling(*alone_args, p[r:r + 1], backend="torch",
                                     draft_probs=None if draft is None else draft[r:r + 1],
                                     **kwargs)
        for backend in ("torch", "triton"):
            batch = verify_tree_sampling(
                *moved, p.view(b * n, vocab)[flat].view(b, n, vocab), depth=steps,
                draft_probs=None if draft is None else draft[order], keys=keys[order],
                positions=positions[order], backend=backend,
            )
            assert batch.output_tokens[row].tolist() == alone.output_tokens[0].tolist()
            assert int(batch.accept_token_num[row]) == int(alone.accept_token_num[0])
            assert (batch.accept_index[row] - row * n).clamp_min(-1).tolist() == \
                alone.accept_index[0].tolist()
            single = verify_tree_sampling(*alone_args, p[r:r + 1], backend=backend,
                                          draft_probs=None if draft is None else draft[r:r + 1],
                                          **kwargs)
            assert torch.equal(single.output_tokens, alone.output_tokens), backend


def test_verifier_end_to_end_api():
    from specreg_eagle.kernels.select_topk import select_top_k_tokens

    b, topk, steps, n, vocab = 2, 2, 3, 6, 10
    verifier = EagleVerifier(num_steps=steps, topk=topk, num_draft_tokens=n)
    assert "EagleVerifier" in verifier.describe()
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(b, vocab, generator=gen), -1)
    tp, ti = probs.topk(topk, -1)
    hidden, scores, lists = torch.randn(b, 4), None, ([], [], [])
    for i in range(steps):
        _, hidden, scores, info = select_top_k_tokens(i, tp, ti, hidden, scores, topk)
        for lst, item in zip(lists, info, strict=False):
            lst.append(item)
        tp, ti = torch.softmax(torch.randn(b * topk, vocab, generator=gen), -1).topk(topk, -1)
    tree = verifier.build_tree(torch.tensor([1, 2]), torch.tensor([4, 5]), score_list=lists[0],
                               token_list=lists[1], parents_list=lists[2])
    logits = torch.randn(b, n, vocab, generator=gen)
    out = verifier.verify_greedy(tree, logits)
    assert out.output_tokens.shape == (b, steps + 1)
    out = verifier.verify_sampling(tree, torch.softmax(logits, -1),
                                   keys=torch.tensor([3, 4]))
    assert bool((out.accept_len >= 0).all()) and out.bonus.shape == (b,)


def _sampling_args():
    b, n, vocab = 2, 7, 9
    tree, gen = make_tree(b, 2, 3, n, vocab, 4)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    return tree, p, n


@pytest.mark.parametrize(
    "mutate, code",
    [
        (lambda a: a.update(target_probs=a["target_probs"][:, :-1]), "SR900"),
        (lambda a: a.update(coins=torch.zeros(2, 7, dtype=torch.int64)), "SR901"),
        (lambda a: a.update(draft_probs=torch.zeros(2, 7, 9, device="meta")), "SR902"),
        (lambda a: a.update(candidates=a["candidates"] + 100), "SR903"),
        (lambda a: a.update(target_probs=a["target_probs"] * float("nan")), "SR904"),
        (lambda a: a.update(threshold_acc=0.0), "SR904"),
        (lambda a: a.update(coins=torch.full((2, 7), 1.5)), "SR904"),
        (lambda a: a.update(keys=torch.zeros(3, dtype=torch.int64)), "SR900"),
        (lambda a: a.update(keys=torch.zeros(2)), "SR901"),
        (lambda a: a.update(positions=torch.tensor([4, -1])), "SR904"),
    ],
)
def test_sampling_input_errors(mutate, code):
    tree, p, n = _sampling_args()
    cand, ridx, nt, ns = links(tree, n)
    args = dict(candidates=cand, target_probs=p)
    mutate(args)
    extra = {k: v for k, v in args.items() if k not in ("candidates", "target_probs")}
    with pytest.raises(KernelInputError) as info:
        verify_tree_sampling(args["candidates"], ridx, nt, ns, args["target_probs"], depth=3, **extra)
    assert info.value.code == code


def test_greedy_input_errors():
    tree, p, n = _sampling_args()
    cand, ridx, nt, ns = links(tree, n)
    with pytest.raises(KernelInputError) as info:
        verify_tree_greedy(cand, ridx, nt, ns, depth=3)
    assert info.value.code == "SR900"
    with pytest.raises(KernelInputError) as info:
        verify_tree_greedy(cand, ridx, nt + 50, ns, depth=3, target_logits=p)
    assert info.value.code == "SR903"


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_from_logits_equals_greedy_of_the_argmax(seed, dtype):
    """The CPU path that argmaxes only the rows the walk reaches against the walk over
    torch.argmax of every node: bf16 logits over a vocab wide enough for the folded argmax
    (ties), drafts steered to the argmax so paths run to the depth cap."""
    from specreg.kernels.argmax.torch_impl import FOLD_WIDTH

    vocab, b, topk, steps, n = 3 * FOLD_WIDTH + 5, 12, 3, 3, 10
    tree, gen = make_tree(b, topk, steps, n, vocab, seed)
    logits = torch.randint(-4, 4, (b, n, vocab), generator=gen).to(dtype)
    cand, ridx, nt, ns = links(tree, n)
    predict = torch.argmax(logits, dim=-1)
    parent = torch.full((b, n), 0)
    for r in range(b):  # steer a random half of the children to their parent's argmax
        for node in range(n):
            child = int(nt[r, node])
            while child != -1:
                parent[r, child] = node
                child = int(ns[r, child])
    steer = torch.rand(b, n, generator=gen) < 0.5
    cand = torch.where(steer, predict.gather(1, parent), cand.long()).to(cand.dtype)
    got = verify_tree_greedy(cand, ridx, nt, ns, depth=steps, target_logits=logits)
    ref = verify_tree_greedy_torch(cand, ridx, nt, ns, predict, depth=steps)
    assert int(ref.accept_token_num.sum()) > 0
    for field in RESULT_FIELDS:
        assert torch.equal(getattr(got, field), getattr(ref, field)), field
