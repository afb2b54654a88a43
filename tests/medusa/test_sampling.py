"""Medusa drafts with each request's sampling parameters, and the verifier's with-draft rule
on them stays lossless.

Laws are computed in float64 from the rule's definitions (`tests.support.lossless`, which
imports nothing from specreg): q_d = filter(head d's logits / T), the second of two draws
without replacement P2(j) = q_j * sum_{i != j} q_i / (1 - q_i), and the filtered target. Every
chi-square runs at level ALPHA = 1e-4 on at most MAX_BINS bins: the likeliest tokens of
expected count >= MIN_EXPECTED alone, the rest of the support in one bin; a token of zero
probability fails at once. Each docstring states the smallest binned total variation its test
detects with power 0.99 (`detectable_tv`), and every statistical test has a negative control
the same check must reject. Draws are keyed on the random stream by fixed keys, so each run is
the same.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from specreg_medusa.drafter import MedusaDrafter
from specreg_medusa.sizes import children_heads, eagle_layout, tree_nodes

from specreg import KernelInputError, Registry
from specreg.step.draft_sampling import sample_children
from specreg.contract.sampling_params import SamplingParams
from tests.support.lossless import ALPHA, chi_square_pvalue, detectable_tv, filtered_softmax

MIN_EXPECTED = 25
MAX_BINS = 12
V = 32
#: One sampled kind, every filter cutting (top-k 12 of 32, top-p 0.9, min-p 0.02).
KIND = dict(temperature=0.9, top_k=12, top_p=0.9, min_p=0.02)
#: The kinds of the mixed batches: a greedy one, each filter alone, top-k below the children
#: count (children past q's support), and all three.
MIXED = (
    dict(temperature=0.0),
    dict(temperature=1.0, top_k=2),
    dict(temperature=0.8, top_p=0.6),
    dict(temperature=1.3, min_p=0.15),
    dict(temperature=0.7, top_k=10, top_p=0.85, min_p=0.03),
    dict(temperature=1.0),
)


@pytest.fixture(scope="module")
def registry():
    return Registry.load(allowlist={"medusa", "eagle"}, fresh=True)


@pytest.fixture(scope="module")
def plan(registry):
    """Two heads, three children per head: the root has 3 children, choice 0 has 2 and choice
    1 has 1 (7 nodes)."""
    return registry.resolve({"algorithm": "medusa", "num_steps": 2, "topk": 3})


@pytest.fixture(scope="module")
def rows():
    """A root target row, a Markov target table (the target after token x is table[x]) and
    two head rows close to the target, V = 32."""
    g = torch.Generator().manual_seed(11)
    root = torch.randn(V, generator=g)
    table = torch.randn(V, V, generator=g)
    heads = torch.stack([root + 0.6 * torch.randn(V, generator=g),
                         table[int(root.argmax())] + 0.6 * torch.randn(V, generator=g)])
    return root, table, heads


def _law(logits: torch.Tensor, kind: dict) -> np.ndarray:
    return filtered_softmax(logits.double().numpy(), kind["temperature"],
                            top_k=kind.get("top_k", 0), top_p=kind.get("top_p", 1.0),
                            min_p=kind.get("min_p", 0.0))


def _second_draw(q: np.ndarray) -> np.ndarray:
    """The law of the second of two draws without replacement from q."""
    others = q / np.where(q < 1, 1 - q, np.inf)
    return q * (others.sum() - others)


def _bins(law: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(token -> bin, bin probabilities): the likeliest tokens of expected count >=
    MIN_EXPECTED alone (at most MAX_BINS - 1 of them), the rest of the support in one bin
    (merged into the last bin when it is too light); tokens of zero probability map to -1."""
    of_token = np.full(law.shape[0], -1)
    big = [t for t in np.argsort(-law) if law[t] * n >= MIN_EXPECTED][: MAX_BINS - 1]
    of_token[big] = np.arange(len(big))
    rest = (law > 0) & (of_token < 0)
    if rest.any():
        of_token[rest] = len(big) if law[rest].sum() * n >= MIN_EXPECTED else len(big) - 1
    probs = np.bincount(of_token[law > 0], weights=law[law > 0])
    return of_token, probs


def _verdict(tokens: torch.Tensor, law: np.ndarray) -> tuple[bool, int]:
    """(whether the binned chi-square accepts `tokens` as draws of `law`, the bin count): any
    token of zero probability rejects."""
    tokens = tokens.numpy()
    of_token, probs = _bins(law, tokens.shape[0])
    found = of_token[tokens]
    if (found < 0).any():
        return False, probs.shape[0]
    counts = np.bincount(found, minlength=probs.shape[0])
    return chi_square_pvalue(counts, probs) >= ALPHA, probs.shape[0]


def _assert_follows(tokens: torch.Tensor, law: np.ndarray, stated_tv: float) -> None:
    accepted, bins = _verdict(tokens, law)
    assert detectable_tv(tokens.shape[0], bins) <= stated_tv
    assert accepted


def _rejects(tokens: torch.Tensor, law: np.ndarray) -> bool:
    return not _verdict(tokens, law)[0]


def _batch(kinds, n: int) -> SamplingParams:
    """n requests, request r of kind r % len(kinds)."""
    columns = {name: [kinds[r % len(kinds)].get(name, default) for r in range(n)]
               for name, default in (("temperature", 1.0), ("top_k", 0), ("top_p", 1.0),
                                     ("min_p", 0.0))}
    return SamplingParams.of(n, **columns)


def _keys(n: int, offset: int = 0) -> torch.Tensor:
    return torch.arange(n, dtype=torch.int64) * 7919 + 104729 + offset


def _target_rows(tree, root, table, roots_rows=None) -> torch.Tensor:
    """Target logits [b, N, V]: the root's row is `root` (or `roots_rows` [b, V]), node i's is
    table[its token] (the target after a node depends on the node's token alone)."""
    b, n = tree.retrieve_index.shape
    tokens = tree.draft_tokens.view(b, n)
    logits = table[tokens]
    logits[:, 0] = root if roots_rows is None else roots_rows
    return logits


# ------------------------------------------------------------------------------- the layouts
def test_every_static_tree_draws_each_nodes_children_in_order():
    """The recursive rule's condition on every layout of up to 6 heads and 6 choices, all
    widths, and the largest trees the plugin serves: every node with children has choices 0,
    1, ..., c - 1 of its head in sibling order (`children_heads` >= 0). A hand-made tree whose
    node has choices {1} only, or {0, 2}, gets -1 there."""
    shapes = [(s, k, n) for s in range(1, 7) for k in range(1, 7)
              for n in range(s + 1, min(tree_nodes(s, k), 64) + 1)]
    shapes += [(16, 16, 256), (16, 2, 256), (4, 16, 256), (8, 4, 33)]
    for steps, topk, width in shapes:
        layout = eagle_layout(steps, topk, width)
        parents = {p[:-1] for p in layout.paths}
        for node, head in zip(((), *layout.paths), layout.children_heads, strict=True):
            assert head == (len(node) if node in parents else -1), (steps, topk, width, node)
    assert children_heads([(0,), (1,), (1, 1)]) == (0, -1, -1, -1)
    assert children_heads([(0,), (2,), (0, 0)]) == (-1, 1, -1, -1)


def test_sampled_tree_links_and_q_rows(plan, rows):
    """In the built verify tree, each node's children, in the verifier's sibling order, are the
    first draws of its head in draw order, and its draft_probs row is that head's q (zero for
    leaves and greedy requests)."""
    drafter = plan.drafter
    _, _, heads = rows
    b = 12
    params = _batch(MIXED, b)
    out = drafter.sample_tree_from_heads(
        heads.expand(b, 2, V).contiguous(), torch.zeros(b, dtype=torch.long),
        torch.full((b,), 20), params=params, keys=_keys(b))
    draft = drafter.start(heads[None, 0].expand(b, V), torch.zeros(b, 1), params=params,
                          keys=_keys(b), positions=torch.full((b,), 21))
    draft = drafter.step(draft, heads[None, 1].expand(b, V), torch.zeros(b, 1))
    tree = out.tree
    n = tree.num_verify_tokens
    assert torch.equal(drafter.tree(draft, torch.zeros(b, dtype=torch.long),
                                    torch.full((b,), 20)).draft_tokens, tree.draft_tokens)
    assert torch.equal(drafter.draft_probs(draft), out.draft_probs)
    tokens = tree.draft_tokens.view(b, n)
    first, sibling = tree.retrieve_next_token.view(b, n), tree.retrieve_next_sibling.view(b, n)
    depth = tree.positions.view(b, n) - 20
    for r in range(b):
        for node in range(n):
            children, child = [], int(first[r, node])
            while child >= 0:
                children.append(int(tokens[r, child]))
                child = int(sibling[r, child])
            head = int(depth[r, node])
            if children:
                assert children == draft.head_tokens[r, head, : len(children)].tolist()
            expected = (draft.head_q[r, head] if children and not params.greedy[r]
                        else torch.zeros(V))
            assert torch.equal(out.draft_probs[r, node], expected)


def test_a_node_whose_children_are_not_first_draws_gets_no_q(monkeypatch, rows):
    """A static tree whose root keeps choices {0, 2} (not a prefix of head 0's draws) gives the
    root an all-zero q row (the target-only rule there) while choice 0's children {0, 1} keep
    head 1's q."""
    import specreg_medusa.sizes as runtime

    monkeypatch.setattr(runtime, "static_tree", lambda s, k, n: ((0,), (2,), (0, 0), (0, 1)))
    drafter = MedusaDrafter(topk=3, widths_by_steps={2: 5})
    _, _, heads = rows
    params = _batch([KIND], 2)
    out = drafter.sample_tree_from_heads(heads.expand(2, 2, V).contiguous(),
                                         torch.zeros(2, dtype=torch.long), torch.full((2,), 4),
                                         params=params, keys=_keys(2))
    assert drafter.layouts[2].children_heads == (-1, 1, -1, -1, -1)
    assert torch.equal(out.draft_probs[:, 0], torch.zeros(2, V))
    assert bool((out.draft_probs[:, 1].sum(-1) > 0.99).all())


# ----------------------------------------------------------------------- (a) the children
def test_a_heads_children_follow_its_filtered_q_without_replacement(plan, rows):
    """12,000 requests draw both heads (topk 3) from one row each under KIND. Head 0's first
    child must follow q_0 = filter(head 0 / T), its second child the second draw without
    replacement P2, head 1's first child q_1 (drawn at the next position). Each check has at
    most 12 bins (MAX_BINS): it detects a binned TV of 0.035 with power 0.99 at level 1e-4.
    The drafter's q rows equal the float64 law to 1e-6. Controls the same check rejects: children drawn from
    the unfiltered softmax at the same temperature, from the filtered law at T = 1.2, and a
    "second child" drawn with replacement (an independent first draw: the next request's)."""
    _, _, heads = rows
    n = 12_000
    params = _batch([KIND], n)
    draft = plan.drafter.start(heads[None, 0].expand(n, V), torch.zeros(n, 1), params=params,
                               keys=_keys(n), positions=torch.full((n,), 100))
    draft = plan.drafter.step(draft, heads[None, 1].expand(n, V), torch.zeros(n, 1))
    q0, q1 = _law(heads[0], KIND), _law(heads[1], KIND)
    assert np.abs(draft.head_q[0, 0].double().numpy() - q0).max() < 1e-6
    assert np.abs(draft.head_q[0, 1].double().numpy() - q1).max() < 1e-6
    tokens = draft.head_tokens
    assert bool((tokens[:, :, 0] != tokens[:, :, 1]).all())
    _assert_follows(tokens[:, 0, 0], q0, 0.035)
    _assert_follows(tokens[:, 0, 1], _second_draw(q0), 0.035)
    _assert_follows(tokens[:, 1, 0], q1, 0.035)

    def first_children(kind):
        logits = heads[None, 0].expand(n, V).contiguous()
        return sample_children(logits, _batch([kind], n), 3, keys=_keys(n),
                               positions=torch.full((n,), 100)).tokens[:, 0]

    assert _rejects(first_children(dict(temperature=KIND["temperature"])), q0)
    assert _rejects(first_children(dict(KIND, temperature=1.2)), q0)
    with_replacement = tokens[:, 0, 0].roll(1)  # another request's first draw: independent
    assert _rejects(with_replacement, _second_draw(q0))


# ------------------------------------------------------------------ (b) end to end, lossless
def _verify(plan, sampled, root, table, params, keys, *, draft_probs=None, roots_rows=None):
    logits = _target_rows(sampled.tree, root, table, roots_rows)
    q = sampled.draft_probs if draft_probs is None else draft_probs
    return plan.verifier.verify_from_logits(sampled.tree, logits, params=params, keys=keys,
                                            draft_probs=q)


def test_the_emitted_tokens_follow_the_filtered_target(plan, rows):
    """8,000 requests under KIND: sampled trees verified by the recursive rule with the
    drafter's q. The first emitted token must follow p = filter(target root row / T); the
    second (from the same step when a child was accepted, else from a second step rooted at
    the first, drawn at the next positions) the two-step law sum_x p(x) filter(table[x] / T),
    which the depth-2 nodes (head 1's shared draws) decide. Each check has at most 12 bins: it
    detects a binned TV of 0.045 with power 0.99 at level 1e-4. Control the same check
    rejects: the same trees verified against q from the wrong temperature (T = 2.5)."""
    root, table, heads = rows
    n, seq = 8_000, 30
    params, keys = _batch([KIND], n), _keys(n)
    drafter = plan.drafter
    sampled = drafter.sample_tree_from_heads(
        heads.expand(n, 2, V).contiguous(), torch.zeros(n, dtype=torch.long),
        torch.full((n,), seq), params=params, keys=keys)
    out = _verify(plan, sampled, root, table, params, keys)
    first = out.output_tokens[:, 0]
    p = _law(root, KIND)
    _assert_follows(first, p, 0.045)
    assert float(out.num_accepted.float().mean()) > 0.3  # the drafts do get accepted

    second = out.output_tokens[:, 1].clone()
    again = (out.num_accepted == 0).nonzero().flatten()
    m = again.shape[0]
    follow = drafter.sample_tree_from_heads(
        heads.expand(m, 2, V).contiguous(), first[again], torch.full((m,), seq + 1),
        params=params.select(again), keys=keys[again])
    second[again] = _verify(plan, follow, root, table, params.select(again), keys[again],
                            roots_rows=table[first[again]]).output_tokens[:, 0]
    two_step = sum(p[x] * _law(table[x], KIND) for x in range(V) if p[x] > 0)
    _assert_follows(second, two_step, 0.045)

    hot = drafter.sample_tree_from_heads(
        heads.expand(n, 2, V).contiguous(), torch.zeros(n, dtype=torch.long),
        torch.full((n,), seq), params=_batch([dict(KIND, temperature=2.5)], n), keys=keys)
    wrong = _verify(plan, sampled, root, table, params, keys, draft_probs=hot.draft_probs)
    assert _rejects(wrong.output_tokens[:, 0], p)


# -------------------------------------------------------------- (c) per-request parameters
def test_each_request_draws_and_emits_under_its_own_parameters(plan, rows):
    """One batch of 6,000 requests cycling through MIXED (1,000 each): greedy requests keep
    the deterministic top-k tree and get no q; each sampled request's q rows are its own
    filtered law (to 1e-6), its first child follows that law and its first emitted token the
    target filtered by its own parameters (per kind at most 12 bins and 1,000 draws: a binned
    TV of 0.125 detected with power 0.99 at level 1e-4). Control: each kind's first tokens
    against the law of the next kind are rejected."""
    root, table, heads = rows
    n, kinds = 6_000, len(MIXED)
    params, keys = _batch(MIXED, n), _keys(n, 5)
    head_logits = heads.expand(n, 2, V).contiguous()
    bonus, lens = torch.zeros(n, dtype=torch.long), torch.full((n,), 40)
    sampled = plan.drafter.sample_tree_from_heads(head_logits, bonus, lens, params=params,
                                                  keys=keys)
    greedy = plan.drafter.tree_from_heads(head_logits, bonus, lens)
    out = _verify(plan, sampled, root, table, params, keys)
    tokens = sampled.tree.draft_tokens.view(n, -1)
    first_child = tokens[:, 1]  # the root's first child: head 0's first draw
    for index, kind in enumerate(MIXED):
        chosen = torch.arange(index, n, kinds)
        if kind["temperature"] == 0:
            assert torch.equal(tokens[chosen], greedy.draft_tokens.view(n, -1)[chosen])
            assert not bool(sampled.draft_probs[chosen].any())
            assert bool((out.output_tokens[chosen, 0] == root.argmax()).all())
            continue
        q0 = _law(heads[0], kind)
        assert np.abs(sampled.draft_probs[chosen[0], 0].double().numpy() - q0).max() < 1e-6
        _assert_follows(first_child[chosen], q0, 0.125)
        _assert_follows(out.output_tokens[chosen, 0], _law(root, kind), 0.125)
        other = MIXED[index % (kinds - 1) + 1]  # the next sampled kind
        assert _rejects(out.output_tokens[chosen, 0], _law(root, other))


def test_a_request_draws_the_same_alone_or_in_a_batch(plan, rows):
    """A request's tree and q are a function of its key, its positions and its own parameters:
    alone, or at another row of a batch of other requests, it draws the same tokens."""
    _, _, heads = rows
    b = 9
    params = _batch(MIXED, b)
    head_logits = heads.expand(b, 2, V).contiguous() + torch.arange(b)[:, None, None] * 0.01
    lens = torch.arange(b) + 3
    batch = plan.drafter.sample_tree_from_heads(head_logits, torch.zeros(b, dtype=torch.long),
                                                lens, params=params, keys=_keys(b))
    order = torch.tensor([4, 0, 8, 2])
    alone = plan.drafter.sample_tree_from_heads(
        head_logits[order], torch.zeros(4, dtype=torch.long), lens[order],
        params=params.select(order), keys=_keys(b)[order])
    n = batch.tree.num_verify_tokens
    assert torch.equal(alone.tree.draft_tokens.view(4, n),
                       batch.tree.draft_tokens.view(b, n)[order])
    assert torch.equal(alone.draft_probs, batch.draft_probs[order])


def test_the_loop_runs_medusa_with_draft_and_greedy_stays_plain_greedy(registry):
    """The reference loop picks the with-draft rule for a medusa plan under per-request
    parameters (the heads drawn from q, draft_probs to the verifier), and its greedy requests
    equal plain greedy decoding token for token."""
    from specreg.testing.demo_params import mixed_demo_params
    from specreg.testing.loop import SpeculativeLoop
    from specreg.testing.toy_model import ToyConfig, ToyLM, greedy_reference

    config = ToyConfig()
    target = ToyLM(config, seed=0)
    draft = target.perturbed(0.25, seed=1)
    plan = registry.resolve({"algorithm": "medusa", "num_steps": 3, "topk": 2})
    prompts = torch.randint(0, config.vocab_size, (12, 8),
                            generator=torch.Generator().manual_seed(3))
    params = mixed_demo_params(12)
    loop = SpeculativeLoop(plan, target, draft, params=params)
    assert loop.verify_rule == "with_draft"
    result = loop.generate(prompts, 10)
    greedy = params.greedy
    assert torch.equal(result.tokens[greedy], greedy_reference(target, prompts[greedy], 10))
    assert result.acceptance.accepted_tokens > 0


def test_the_triton_path_builds_the_same_trees(force_backend, rows):
    """On the Triton backend (the interpreter here) the deterministic and the sampled trees of
    several requests equal the torch path's: same links, positions and tokens, q rows within
    float32 rounding of the torch filter's. (build_tree's Triton kernel reads each request's
    row at its own stride: an expanded layout row handed every request after the first a
    broken tree.)"""
    _, _, heads = rows
    b = 3
    params = SamplingParams.of(b, temperature=[0.0, 0.7, 1.3], top_k=[0, 20, 5],
                               min_p=[0.0, 0.0, 0.1])
    head_logits = heads.expand(b, 2, V) + torch.arange(b)[:, None, None] * 0.1
    built = {}
    for backend in ("torch", "triton"):
        force_backend(backend)
        drafter = MedusaDrafter(topk=3, widths_by_steps={2: 7})
        assert drafter.backend == backend
        args = (head_logits, torch.zeros(b, dtype=torch.long), torch.arange(b) + 3)
        built[backend] = (drafter.tree_from_heads(*args),
                          drafter.sample_tree_from_heads(*args, params=params, keys=_keys(b)))
    (plain, sampled), (plain_triton, sampled_triton) = built["torch"], built["triton"]
    for torch_tree, triton_tree in ((plain, plain_triton), (sampled.tree, sampled_triton.tree)):
        assert not bool(triton_tree.invalid.any())
        for field in ("tree_mask", "positions", "retrieve_next_token", "retrieve_next_sibling",
                      "draft_tokens"):
            assert torch.equal(getattr(torch_tree, field), getattr(triton_tree, field)), field
    assert float((sampled.draft_probs - sampled_triton.draft_probs).abs().max()) < 1e-6


# -------------------------------------------------------------------- (e) bad input, coded
@pytest.mark.parametrize("bad, code", [
    (dict(top_p=0.0), "SR913"),
    (dict(temperature=-1.0), "SR911"),
    (dict(top_k=V + 1), "SR912"),
    (dict(min_p=float("nan")), "SR914"),
])
def test_invalid_parameters_are_coded(plan, bad, code):
    b = 3
    [(name, value)] = bad.items()
    usable = {"temperature": 0.8, "top_k": 0, "top_p": 1.0, "min_p": 0.0}[name]
    params = SamplingParams.of(b, **{"temperature": 0.8, name: [usable, value, usable]})
    head_logits = torch.randn(b, 2, V)
    with pytest.raises(KernelInputError, match=code):
        plan.drafter.sample_tree_from_heads(head_logits, torch.zeros(b, dtype=torch.long),
                                            torch.ones(b, dtype=torch.long), params=params)
    with pytest.raises(KernelInputError, match=code):
        plan.drafter.start(head_logits[:, 0], torch.zeros(b, 1), params=params)


def test_bad_shapes_and_values_are_coded(plan):
    b = 3
    drafter = plan.drafter
    bonus, lens = torch.zeros(b, dtype=torch.long), torch.ones(b, dtype=torch.long)
    params = SamplingParams.of(b, temperature=0.8)
    nan = torch.randn(b, 2, V)
    nan[1, 1, 5] = float("nan")
    with pytest.raises(KernelInputError, match=r"SR904.*\(1, 1\)"):
        drafter.sample_tree_from_heads(nan, bonus, lens, params=params)
    masked = torch.randn(b, 2, V)
    masked[2, 0] = float("-inf")
    with pytest.raises(KernelInputError, match=r"SR904.*\(2, 0\)"):
        drafter.sample_tree_from_heads(masked, bonus, lens, params=params)
    draft = drafter.start(torch.randn(b, V), torch.zeros(b, 1), params=params)
    with pytest.raises(KernelInputError, match="SR904"):
        drafter.step(draft, nan[:, 1], torch.zeros(b, 1))
    with pytest.raises(KernelInputError, match="SR910"):
        drafter.sample_tree_from_heads(torch.randn(b, 2, V), bonus, lens,
                                       params=SamplingParams.of(b + 1, temperature=0.8))
    with pytest.raises(KernelInputError, match="SR910"):
        drafter.sample_tree_from_heads(torch.randn(b, 2, V), bonus, lens, params={"T": 1})
    with pytest.raises(KernelInputError, match="SR900"):
        drafter.start(torch.randn(b, V), torch.zeros(b, 1), params=params,
                      positions=torch.zeros(b + 1, dtype=torch.long))
    with pytest.raises(KernelInputError, match="SR904"):
        drafter.start(torch.randn(b, V), torch.zeros(b, 1), params=params,
                      positions=torch.full((b,), -1))
    with pytest.raises(KernelInputError, match="SR928"):
        drafter.draft_probs(drafter.start(torch.randn(b, V), torch.zeros(b, 1)))
    sampled = drafter.sample_tree_from_heads(torch.randn(b, 2, V), bonus, lens, params=params)
    logits = torch.randn(b, sampled.tree.num_verify_tokens, V)
    with pytest.raises(KernelInputError, match="SR929"):
        plan.verifier.verify_from_logits(sampled.tree, logits, params=params,
                                         draft_logits=logits, draft_probs=sampled.draft_probs)


def test_without_value_checks_a_nan_head_row_costs_only_its_own_q(rows):
    """With value checks off (the GPU default) a NaN head row is not refused: that request's
    head keeps its top-k with an all-zero q (the target-only rule at those nodes) and every
    other request draws exactly as it would without it."""
    _, _, heads = rows
    drafter = MedusaDrafter(topk=3, widths_by_steps={2: 7}, check_values=False)
    b = 4
    params = _batch([KIND], b)
    head_logits = heads.expand(b, 2, V).contiguous()
    clean = drafter.sample_tree_from_heads(head_logits, torch.zeros(b, dtype=torch.long),
                                           torch.full((b,), 6), params=params, keys=_keys(b))
    broken = head_logits.clone()
    broken[2, 1, 7] = float("nan")
    out = drafter.sample_tree_from_heads(broken, torch.zeros(b, dtype=torch.long),
                                         torch.full((b,), 6), params=params, keys=_keys(b))
    others = torch.tensor([0, 1, 3])
    assert torch.equal(out.tree.draft_tokens.view(b, -1)[others],
                       clean.tree.draft_tokens.view(b, -1)[others])
    assert torch.equal(out.draft_probs[others], clean.draft_probs[others])
    depth = out.tree.positions.view(b, -1)[2] - 6
    assert not bool(out.draft_probs[2, depth == 1].any())  # head 1's q: none
    assert torch.equal(out.draft_probs[2, 0], clean.draft_probs[2, 0])  # head 0 unaffected
