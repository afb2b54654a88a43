"""Property tests at production shapes for every kernel family, torch path against the plain
references: vocab 128k (chain greedy and sampling, chain with sampling parameters and the
filter, EAGLE trees of 64 nodes, DSpark's Markov head); HiSparse's hot buffers of 2,048+ slots
are tests/hisparse/test_production_shapes.py.

One or two seeded hypothesis examples each (the references walk 128k-entry Python lists), so the
whole file stays within seconds; the shapes, not the example count, are the point: int64
offsets, the binned top-p search of long rows, row chunking, trees wider than a sibling loop.
"""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from specreg_dspark.kernels.markov_head import make_markov_head
from specreg_dspark.kernels.markov_head.reference import markov_block_reference
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_greedy.reference import verify_tree_greedy_reference
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.kernels.tree_verify_sampling.reference import verify_tree_sampling_reference
from specreg.kernels.tree_coins import caller_tree_coins, stream_tree_coins
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

from specreg.kernels.chain import verify_chain_greedy, verify_chain_sampling
from specreg.kernels.chain.reference import (
    verify_chain_greedy_reference,
    verify_chain_sampling_reference,
)
from specreg.kernels.chain.types import ChainSamplingInputs
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.chain_params.reference import verify_chain_with_params_reference
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.contract.sampling_params import SamplingParams
from tests.support import independent_race
from tests.support.independent_race import accept_uniform

VOCAB = 128 * 1024
ONE = settings(max_examples=1, derandomize=True, deadline=None)
FEW = settings(max_examples=2, derandomize=True, deadline=None)
FIELDS = ("predicts", "accept_index", "accept_token_num", "bonus", "output_tokens")


def _peaked_logits(gen, shape, peak=8.0):
    """Logits [.., VOCAB]: a flat tail and a few peaked tokens, so drafts get accepted."""
    logits = torch.randn(*shape, VOCAB, generator=gen)
    hot = torch.randint(0, VOCAB, (*shape, 4), generator=gen)
    return logits.scatter_add_(-1, hot, torch.full(hot.shape, peak))


def _same(got, want, fields=("accept_len", "output_tokens")):
    for field in fields:
        assert torch.equal(getattr(got, field).long(), getattr(want, field).long()), field


def _stream_coins(candidates, keys, positions):
    """The acceptance uniforms the chain wrappers draw from the stream, rebuilt one by one by
    the independent stream (`tests.support.independent_race`)."""
    return torch.tensor([[accept_uniform(int(keys[r]), int(positions[r]) + i, int(x))
                          for i, x in enumerate(candidates[r, 1:].tolist())]
                         for r in range(candidates.shape[0])], dtype=torch.float32)


@FEW
@given(seed=st.integers(0, 2**31 - 1))
def test_chain_at_vocab_128k_equals_the_reference(seed):
    gen = torch.Generator().manual_seed(seed)
    b, n = 3, 4
    logits = _peaked_logits(gen, (b, n))
    greedy = logits.argmax(-1)
    candidates = torch.cat([torch.zeros(b, 1, dtype=torch.long), greedy[:, :-1]], 1)
    candidates[1, 2] = (candidates[1, 2] + 1) % VOCAB  # request 1 stops at position 1
    _same(verify_chain_greedy(candidates, logits),
          verify_chain_greedy_reference(candidates, logits, verify_lens=None))  # fmt: skip
    target = torch.softmax(logits, -1)
    draft = torch.softmax(_peaked_logits(gen, (b, n - 1)), -1)
    coins = torch.rand(b, n - 1, generator=gen)
    stream = {"keys": torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
              "positions": torch.randint(0, 2**31, (b,), generator=gen)}
    for q in (draft, None):
        for caller in (coins, None):  # the caller's coins, and the stream's
            inputs = ChainSamplingInputs(
                candidates=candidates, target_probs=target, draft_probs=q, **stream,
                coins=caller if caller is not None else _stream_coins(candidates, **stream),
            )  # fmt: skip
            want = verify_chain_sampling_reference(inputs)
            got = verify_chain_sampling(candidates, target, q, coins=caller, **stream)
            _same(got, want)
        for r in range(b):  # 1,024 race blocks: the independent race agrees
            assert (int(got.accept_len[r]), int(got.bonus[r])) == independent_race.chain(
                candidates[r].tolist(), target[r].numpy(), None if q is None else q[r].numpy(),
                int(stream["keys"][r]), int(stream["positions"][r]),
            )


@ONE
@given(seed=st.integers(0, 2**31 - 1), top_p=st.sampled_from([0.9, 0.5]),
       top_k=st.sampled_from([0, 1, 50, 4096]), min_p=st.sampled_from([0.0, 0.05]))
def test_chain_with_params_at_vocab_128k_equals_the_reference(seed, top_p, top_k, min_p):
    """A flat sampled row (a nucleus far past the sorted prefix: the binned top-p search) and a
    peaked greedy one in one batch (the reference sorts 128k Python floats per row: two rows)."""
    gen = torch.Generator().manual_seed(seed)
    b, n = 2, 2
    target = _peaked_logits(gen, (b, n), peak=3.0) * torch.tensor([0.05, 1.0])[:, None, None]
    draft = target[:, :-1] + 0.5 * torch.randn(b, n - 1, VOCAB, generator=gen)
    candidates = torch.cat([torch.zeros(b, 1, dtype=torch.long), target.argmax(-1)[:, :-1]], 1)
    params = SamplingParams.of(b, temperature=[0.9, 0.0], top_k=top_k, top_p=top_p,
                               min_p=min_p)  # fmt: skip
    coins = torch.rand(b, n - 1, generator=gen)
    stream = {"keys": torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
              "positions": torch.randint(0, 2**31, (b,), generator=gen)}
    want = verify_chain_with_params_reference(ChainParamsInputs(
        candidates=candidates, target=target, draft=draft, params=params, coins=coins,
        **stream,
    ))  # fmt: skip
    got = verify_chain_with_params(candidates, target, draft, params=params, coins=coins,
                                   **stream)  # fmt: skip
    _same(got, want)


@st.composite
def trees(draw, nodes=64):
    """A random draft tree of `nodes` nodes (parents before children, children in ascending
    index) as EAGLE's first-child / next-sibling links, with its depth."""
    parents = [-1] + [draw(st.integers(max(0, i - 12), i - 1)) for i in range(1, nodes)]
    first, sibling = [-1] * nodes, [-1] * nodes
    level = [0] * nodes
    for child in range(1, nodes):
        level[child] = level[parents[child]] + 1
    for parent in range(nodes):
        kids = [c for c in range(nodes) if parents[c] == parent]
        if kids:
            first[parent] = kids[0]
        for a, c in zip(kids, kids[1:], strict=False):
            sibling[a] = c
    return parents, first, sibling, max(level)


@ONE
@given(tree=trees(), seed=st.integers(0, 2**31 - 1), cap=st.sampled_from([0, 3]))
def test_eagle_trees_of_64_nodes_at_vocab_128k_equal_the_reference(tree, seed, cap):
    parents, first, sibling, depth = tree
    depth = max(1, depth - cap)  # cap > 0: deeper trees than the walk may go
    gen = torch.Generator().manual_seed(seed)
    b, n = 1, len(parents)
    logits = _peaked_logits(gen, (b, n), peak=6.0)
    predict = logits.argmax(-1)
    candidates = torch.randint(0, VOCAB, (b, n), generator=gen)
    follow = torch.rand(b, n, generator=gen) < 0.7  # most nodes carry their parent's argmax
    for node in range(1, n):
        candidates[:, node] = torch.where(follow[:, node], predict[:, parents[node]],
                                          candidates[:, node])  # fmt: skip
    retrieve_index = torch.arange(b * n).view(b, n)
    links = (torch.tensor([first] * b), torch.tensor([sibling] * b))
    args = (candidates, retrieve_index, *links)
    want = verify_tree_greedy_reference(*args, predict, depth=depth)
    got = verify_tree_greedy(*args, depth=depth, target_logits=logits)
    _same(got, want, FIELDS)
    target = torch.softmax(logits, -1)
    draft = torch.softmax(logits + torch.randn(b, n, VOCAB, generator=gen), -1)
    coins = torch.rand(b, n, generator=gen)
    keys = torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen)
    positions = torch.randint(0, 2**31, (b,), generator=gen)
    for q in (None, draft):
        for caller in (coins, None):  # SGLang-layout coins, and the stream's own
            tree_coins = (caller_tree_coins(caller) if caller is not None
                          else stream_tree_coins(candidates, *links, keys, positions))
            want = verify_tree_sampling_reference(TreeSamplingInputs(
                *args, target, q, *tree_coins, keys, positions, depth=depth,
                threshold_single=1.0, threshold_acc=1.0,
            ))  # fmt: skip
            got = verify_tree_sampling(*args, target, depth=depth, draft_probs=q, coins=caller,
                                       keys=keys, positions=positions)  # fmt: skip
            # the final draw is the exact two-level race on every implementation: equal
            _same(got, want, ("accept_index", "accept_token_num", "bonus"))


@ONE
@given(seed=st.integers(0, 2**31 - 1), kind=st.sampled_from(["vanilla", "gated"]))
def test_markov_head_walk_at_vocab_128k_equals_the_reference(seed, kind):
    torch.manual_seed(seed)
    head = make_markov_head(kind, vocab_size=VOCAB, rank=2, hidden_size=3)
    gen = torch.Generator().manual_seed(seed)
    base, hidden = _peaked_logits(gen, (1, 2), peak=2.0), torch.randn(1, 2, 3, generator=gen)
    anchor = torch.tensor([VOCAB - 1])
    tokens, corrected = markov_block_reference(head, base, anchor, hidden)
    with torch.no_grad():
        got = head.greedy_block(base, anchor, hidden, backend="torch")
        walked, logits = head.sample_block(base, anchor, hidden)
    assert torch.equal(got, tokens) and torch.equal(walked, tokens)
    assert torch.allclose(logits.double(), corrected, atol=1e-4)
