"""Tree verification is lossless at production shapes: a topk-4, depth-4 tree at V = 32,768 and
V = 151,936 (Qwen's vocabulary), float32 and bfloat16 rows, recursive rejection (children drawn
from q without replacement) and the target-only rule, every draw on the counter-based stream.
Both run on the default CPU path, the one a user gets: the target-only rule compiled where numba
is installed (the `cpu` extra), held bit for bit to the torch path by
tests/kernels/test_tree_numba.py; recursive rejection on torch.

The tree (8 nodes, BFS order): the root 0; its four children 1-4 (the topk siblings, drawn from
q without replacement in sibling order); below child 1 a chain 5 -> 6 -> 7 (depth 2, 3, 4). The
target depends on the prefix: a node's token t picks the law its children are verified
against, law A (`ll.dyadic_rows`' p: four heads, a flat tail, zero-mass tokens) or law B (A
rolled by SHIFT tokens: other heads, other blocks), by `_law_of`: A's first head and the even
tail tokens pick A, its other three heads and the odd tail tokens B; q likewise (A's or B's
q). The root is token 0, so the first emitted token follows A; when the first emitted token t
was an accepted draft, the second follows law(t). The expected laws are float64 from the
definitions (the rows are dyadic, exact in both dtypes), binned and tested as in
`tests/kernels/test_lossless_production_shapes.py` (`ll.check_lossless`: each head its own
bin, the tail in 6 bins of equal mass, B = 10, Pearson chi-square at level 1e-4, the smallest
binned TV detected with power >= 0.99 stated per test and asserted, and a control with 1.1 x
that TV injected that must be rejected).
"""

import numpy as np
import pytest
import torch
from specreg.kernels.tree_verify_sampling import verify_tree_sampling

from tests.support import lossless as ll
from tests.support.eagle import tree_links

SMALL_V, QWEN_V = 32_768, 151_936
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
SHIFT = 129  # law B = law A rolled by a block and a token
PARENTS = (-1, 0, 0, 0, 0, 1, 5, 6)
NODES, DEPTH, TOPK = len(PARENTS), 4, 4
#: Elements of one [chunk, NODES, V] block of target (or draft) rows, gathered into one buffer
#: reused by every chunk (a fresh block that size is mapped and faulted in afresh each time):
#: large enough that the verify's per-call cost is shared by tens of trees at V 151,936.
CHUNK_ELEMENTS = 1 << 25

#: (rule, vocab) -> requests per dtype, and the stated eps per dtype, pooled, and for the
#: second token (pooled over dtypes, per law).
TREE_PLAN = {
    ("residual", SMALL_V): (6_144, {"float32": 0.0481, "bfloat16": 0.0481, "both": 0.034,
                                    "second": 0.057}),
    ("target_only", SMALL_V): (6_144, {"float32": 0.0481, "bfloat16": 0.0481, "both": 0.034,
                                       "second": 0.078}),
    ("residual", QWEN_V): (3_072, {"float32": 0.068, "bfloat16": 0.068, "both": 0.0481,
                                   "second": 0.081}),
    ("target_only", QWEN_V): (3_072, {"float32": 0.068, "bfloat16": 0.068, "both": 0.0481,
                                      "second": 0.118}),
}


pytestmark = pytest.mark.usefixtures("one_thread")


def _laws(vocab: int):
    """(p rows [2, V], q rows [2, V], heads per law, the law each token picks [V]): law A and
    law B = A rolled by SHIFT."""
    rows = ll.dyadic_rows(vocab)
    p = np.stack([rows.p, np.roll(rows.p, SHIFT)])
    q = np.stack([rows.q, np.roll(rows.q, SHIFT)])
    law_of = np.arange(vocab) % 2
    law_of[rows.heads] = [0, 1, 1, 1]
    return p, q, (rows.heads, (rows.heads + SHIFT) % vocab), law_of


def _draft_trees(q: np.ndarray, law_of: np.ndarray, requests: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Candidates [N, NODES]: root 0, four children of the root from q_A without replacement,
    then each chain node from the q row of its parent's token."""
    cand = np.zeros((requests, NODES), dtype=np.int64)
    cand[:, 1:5] = ll.draws_without_replacement(q[0], requests, TOPK, rng)
    for node in (5, 6, 7):
        parent_law = law_of[cand[:, PARENTS[node]]]
        for law in (0, 1):
            rows = np.nonzero(parent_law == law)[0]
            cand[rows, node] = ll.draws(q[law], rows.shape[0], rng)
    return cand


def _run_tree(p, q, law_of, dtype, cand, positions, offset, with_draft):
    """(first emitted token [N], second [N] or -1 where the first was not an accepted draft,
    accepted drafts [N]) of verifying `cand`'s trees, request r keyed r + offset.

    Each tree's rows are its nodes' laws (A or B), so the trees are verified in the order of
    their law patterns: a chunk's rows then mostly equal the previous chunk's, and only the
    node rows whose law changed are copied into the reused buffers. A request's draws depend on
    its key and positions alone, so the order changes no token."""
    requests, vocab = cand.shape[0], p.shape[1]
    chunk = min(requests, max(1, CHUNK_ELEMENTS // (NODES * vocab)))
    p_rows = torch.from_numpy(p).to(dtype)
    q_rows = torch.from_numpy(q).to(dtype)
    node_laws = torch.from_numpy(law_of)[torch.from_numpy(cand)]  # [N, NODES]
    pattern = (node_laws << torch.arange(NODES)).sum(1)
    order = torch.sort(pattern, stable=True).indices
    p_buffer = torch.empty(chunk * NODES, vocab, dtype=dtype, device="cpu")
    q_buffer = torch.empty_like(p_buffer) if with_draft else None
    held = torch.full((chunk * NODES,), -1, dtype=torch.int64, device="cpu")  # law of each row
    first = np.empty(requests, dtype=np.int64)
    second, accepted = np.empty_like(first), np.empty_like(first)
    for start in range(0, requests, chunk):
        picked = order[start : start + chunk]
        b = picked.numel()
        laws = node_laws[picked].flatten()
        stale = (laws != held[: b * NODES]).nonzero().squeeze(1)
        for rows, buffer in ((p_rows, p_buffer), (q_rows, q_buffer)):
            if buffer is not None and stale.numel():
                buffer.index_copy_(0, stale, rows.index_select(0, laws[stale]))
        held[stale] = laws[stale]
        index, next_token, next_sibling = tree_links(b, PARENTS)
        draft = q_buffer[: b * NODES].view(b, NODES, vocab) if q_buffer is not None else None
        result = verify_tree_sampling(
            torch.from_numpy(cand)[picked], index, next_token, next_sibling,
            p_buffer[: b * NODES].view(b, NODES, vocab), depth=DEPTH, draft_probs=draft,
            keys=picked + offset, positions=torch.from_numpy(positions)[picked],
            check_values=False,
        )
        out = result.output_tokens.numpy()
        taken = result.accept_token_num.numpy().astype(np.int64)
        first[picked.numpy()] = out[:, 0]
        second[picked.numpy()] = np.where(taken >= 1, out[:, 1], -1)
        accepted[picked.numpy()] = taken
    return first, second, accepted


@pytest.mark.slow
@pytest.mark.parametrize("vocab", [SMALL_V, QWEN_V])
@pytest.mark.parametrize("rule", ["residual", "target_only"])
def test_tree_emits_the_target_law(rule, vocab):
    """The first emitted token of a topk-4, depth-4 tree follows law A, from float32 and from
    bfloat16 rows; the token after an accepted first draft t follows law(t) (A or B).

    `residual`: q drafts the children and verifies them (recursive rejection; about 0.4 of the
    root's first children are rejected, and the residual after up to four rejected siblings
    spans the tail's blocks and the heads); `target_only`: the same children, no q. B = 10 bins;
    binned TV detected with power >= 0.99 at level 1e-4 (`TREE_PLAN`, asserted):
    - V 32,768: N = 6,144 trees per dtype: eps <= 0.0481 per dtype, 0.034 pooled (12,288);
    - V 151,936: N = 3,072 per dtype: eps <= 0.068, 0.0481 pooled (6,144);
    the second token per law, pooled over dtypes (the larger of the two laws' detectable TVs):
    V 32,768: 4,498 (A) and 5,804 (B) draws, eps <= 0.057 (residual); 2,879 and 2,382, eps <=
    0.078 (target only); V 151,936: 2,192 and 2,853, eps <= 0.081 (residual); 1,439 and 1,019,
    eps <= 0.118 (target only). A tree costs about 3 ms of CPU at V 151,936 (8 rows) in chunks of
    27 trees, so eps = 0.005 (N = 566,600 per sample) would take about half an hour; the whole
    file takes about 50 s.
    Control (i) at 1.1 x the stated eps is rejected for each sample. The bfloat16 rows hold the float32 values: its first 256 trees
    are rerun on float32 rows and must emit the very same tokens.
    """
    requests, stated = TREE_PLAN[(rule, vocab)]
    p, q, heads, law_of = _laws(vocab)
    with_draft = rule == "residual"
    firsts, seconds, depths = {}, [], []
    for index, dtype in enumerate(DTYPES):
        offset = (3 + with_draft) << 40 | vocab << 20 | index << 18
        rng = np.random.default_rng(offset)
        cand = _draft_trees(q, law_of, requests, rng)
        positions = rng.integers(0, 2**40, requests)
        first, second, accepted = _run_tree(p, q, law_of, DTYPES[dtype], cand, positions,
                                            offset, with_draft)
        if dtype == "bfloat16":
            again = _run_tree(p, q, law_of, torch.float32, cand[:256], positions[:256], offset,
                              with_draft)
            assert np.array_equal(again[0], first[:256]) and np.array_equal(again[1], second[:256])
        firsts[dtype] = first
        seconds.append(np.stack([first, second]))
        depths.append(accepted)
    for index, (dtype, found) in enumerate(firsts.items()):
        ll.check_lossless(found, p[0], heads[0], stated[dtype], vocab + index)
    ll.check_lossless(np.concatenate(list(firsts.values())), p[0], heads[0], stated["both"],
                      vocab + 7)
    pairs = np.concatenate(seconds, axis=1)
    pairs = pairs[:, pairs[1] >= 0]
    for law in (0, 1):
        found = pairs[1, law_of[pairs[0]] == law]
        ll.check_lossless(found, p[law], heads[law], stated["second"], vocab + 11 + law)
    reached = np.bincount(np.concatenate(depths), minlength=DEPTH + 1)
    assert reached.min() > 0 if with_draft else reached[2] > 0, reached  # the walk goes deep
