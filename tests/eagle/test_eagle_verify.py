import pytest
import torch
from specreg_eagle.kernels.tree_build import build_tree
from specreg_eagle.kernels.verify_greedy import verify_tree_greedy
from specreg_eagle.kernels.verify_greedy.torch_impl import verify_tree_greedy_torch
from specreg_eagle.kernels.verify_greedy.triton_impl import verify_tree_greedy_triton
from specreg_eagle.kernels.verify_sampling import verify_tree_sampling
from specreg_eagle.kernels.verify_sampling.torch_impl import verify_tree_sampling_torch
from specreg_eagle.kernels.verify_sampling.triton_impl import verify_tree_sampling_triton
from specreg_eagle.kernels.verify_sampling.types import TreeSamplingInputs
from specreg_eagle.verifier import EagleVerifier

from specreg.errors import KernelInputError
from specreg.kernels.chain import verify_chain_sampling
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
    coins = torch.rand(b, n, generator=gen)
    final = torch.rand(b, generator=gen)
    args = (cand, *links(tree, n)[1:], p, q, coins, final)
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
    verify_tree_sampling(*links(tree, n), p, depth=3, draft_probs=q, seed=1)
    assert torch.equal(p, p0) and torch.equal(q, q0)


def test_topk1_chain_matches_chain_verifier():
    b, steps, vocab = 6, 3, 11
    n = steps + 1
    tree, gen = make_tree(b, 1, steps, n, vocab, 5)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    q = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    coins, final = torch.rand(b, n, generator=gen), torch.rand(b, generator=gen)
    verifier = EagleVerifier(num_steps=steps, topk=1, num_draft_tokens=n)
    cand = tree.draft_tokens.view(b, n)
    # make drafts likely under p so several get accepted
    cand[:, 1:] = p[:, :-1].argmax(-1)
    chain = verifier.verify_sampling(tree, p, draft_probs=q, coins=coins, final_coins=final)
    direct = verify_tree_sampling(*links(tree, n), p, depth=steps, draft_probs=q, coins=coins,
                                  final_coins=final)
    # The same coins decide the same accepted path under both rules...
    for f in ("accept_index", "accept_token_num"):
        assert torch.equal(getattr(chain, f), getattr(direct, f)), f
    accepted = torch.arange(n)[None, :] < direct.accept_token_num[:, None].long()
    assert torch.equal(chain.output_tokens[accepted], direct.output_tokens[accepted])
    assert int(accepted.sum()) > b  # several drafts were accepted: the comparison has content
    # ...and the token after it is the chain family's draw (an exponential race, issue #22),
    # where the tree kernel draws by inverse CDF: each is lossless in its own tests.
    own = verify_chain_sampling(cand, p, q[:, : n - 1], coins=coins[:, : n - 1],
                                final_coins=final)
    assert torch.equal(chain.bonus, own.bonus.to(chain.bonus.dtype))
    last = direct.accept_token_num.long()
    assert torch.equal(chain.output_tokens.gather(1, last[:, None]).squeeze(1), chain.bonus)


def test_seeded_coins_are_deterministic():
    b, n, vocab = 8, 7, 9
    tree, gen = make_tree(b, 2, 3, n, vocab, 4)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1)
    verifier = EagleVerifier(num_steps=3, topk=2, num_draft_tokens=n)
    one = verifier.verify_sampling(tree, p, seed=11)
    two = verifier.verify_sampling(tree, p, seed=11)
    assert torch.equal(one.output_tokens, two.output_tokens)
    outs = {tuple(verifier.verify_sampling(tree, p, seed=s).bonus.tolist()) for s in range(6)}
    assert len(outs) > 1


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
    out = verifier.verify_sampling(tree, torch.softmax(logits, -1), seed=3)
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
