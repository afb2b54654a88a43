import pytest
import torch
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_greedy.torch_impl import verify_tree_greedy_torch
from specreg.kernels.tree_verify_greedy.triton_impl import verify_tree_greedy_triton
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.kernels.tree_coins import stream_tree_coins
from specreg.kernels.tree_verify_sampling.torch_impl import verify_tree_sampling_torch
from specreg.kernels.tree_verify_sampling.triton_impl import verify_tree_sampling_triton
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

from specreg.errors import KernelInputError
from specreg.kernels.chain import verify_chain_target_only
from specreg.kernels.random_stream import fresh_keys
from tests.support.eagle import RESULT_FIELDS, links, make_tree


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
    from specreg.kernels.argmax import FOLD_WIDTH

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
