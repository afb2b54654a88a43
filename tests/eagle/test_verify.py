import pytest
import torch
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg_eagle.verifier import EagleVerifier

from specreg.kernels.chain import verify_chain_sampling
from specreg.kernels.random_stream import fresh_keys
from tests.support.eagle import links, make_tree


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
