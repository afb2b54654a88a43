"""No verifier, drafter or rule draws randomness outside the counter-based stream.

Every torch entry point that draws from a generator (`torch.rand*`, `torch.randn*`,
`torch.randint*`, `torch.randperm`, `torch.multinomial`, `torch.bernoulli`, `torch.normal`,
`torch.poisson` and the in-place `Tensor.uniform_/exponential_/normal_/random_/bernoulli_/
geometric_/log_normal_/cauchy_`) is replaced by one that raises for the duration of a test;
each test then runs one path with its request keys given (a request's key is drawn once for it,
by `fresh_keys`, outside the step). A path that still drew from torch's generators fails. The
control shows the trap catches a draw: the same trap around `torch.rand` raises.
"""

from __future__ import annotations

import pytest
import torch

from specreg import Registry
from specreg.kernels.chain import (
    sample_tokens,
    verify_chain_invariant,
    verify_chain_sampling,
    verify_chain_target_only,
)
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.relaxed import (
    verify_chain_relaxed,
    verify_chain_relaxed_with_params,
    verify_chain_synthetic_greedy,
)
from specreg.kernels.relaxed.types import RuleParams
from specreg.contract.sampling_params import SamplingParams

_MODULE_DRAWS = ("rand", "rand_like", "randn", "randn_like", "randint", "randint_like",
                 "randperm", "multinomial", "bernoulli", "normal", "poisson")
_TENSOR_DRAWS = ("uniform_", "exponential_", "normal_", "random_", "bernoulli_",
                 "geometric_", "log_normal_", "cauchy_")


class DrawOutsideStream(AssertionError):
    pass


@pytest.fixture
def no_generator_draws(monkeypatch):
    def trap(name):
        def raising(*args, **kwargs):
            raise DrawOutsideStream(f"a draw from torch's generators: {name}")

        return raising

    for name in _MODULE_DRAWS:
        monkeypatch.setattr(torch, name, trap(f"torch.{name}"))
    for name in _TENSOR_DRAWS:
        monkeypatch.setattr(torch.Tensor, name, trap(f"Tensor.{name}"))


B, N, V = 6, 4, 700


@pytest.fixture
def x():
    """The inputs, built before the trap is set (tests request `x` first)."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(B, N, V, generator=g) * 2
    draft_logits = logits[:, : N - 1] + torch.randn(B, N - 1, V, generator=g)
    candidates = torch.randint(0, V, (B, N), generator=g)
    return {
        "candidates": candidates,
        "logits": logits,
        "draft_logits": draft_logits,
        "p": torch.softmax(logits, -1),
        "q": torch.softmax(draft_logits, -1),
        "keys": torch.arange(B, dtype=torch.int64) * 7919 + 3,
        "positions": torch.arange(B, dtype=torch.int64) * 5,
        "params": SamplingParams.of(
            B, temperature=[0.0, 0.7, 1.0, 1.3, 0.9, 1.0], top_k=[0, 20, 0, 5, 0, 50],
            top_p=[1.0, 0.9, 0.8, 1.0, 0.95, 1.0], min_p=[0.0, 0.0, 0.05, 0.0, 0.0, 0.1],
            seed=[-1, 4, -1, 9, -1, -1],
        ),
    }


@pytest.fixture
def history():
    return torch.randint(0, V, (B, 10), generator=torch.Generator().manual_seed(1))


def test_the_trap_catches_a_draw(no_generator_draws):
    with pytest.raises(DrawOutsideStream):
        torch.rand(3)
    with pytest.raises(DrawOutsideStream):
        torch.empty(3).exponential_()


@pytest.mark.parametrize("rule", ["classic", "target_only", "invariant", "sample"])
def test_chain_rules_draw_only_from_the_stream(x, no_generator_draws, rule):
    keyed = {"keys": x["keys"], "positions": x["positions"]}
    if rule == "classic":
        out = verify_chain_sampling(x["candidates"], x["p"], x["q"], **keyed).bonus
    elif rule == "target_only":
        out = verify_chain_target_only(x["candidates"], x["p"], **keyed).bonus
    elif rule == "invariant":
        out = verify_chain_invariant(x["candidates"], x["p"], **keyed).bonus
    else:
        out = sample_tokens(x["p"][:, 0], **keyed)
    assert out.shape == (B,)


@pytest.mark.parametrize("invariant", [False, True])
def test_params_chain_draws_only_from_the_stream(x, no_generator_draws, invariant):
    out = verify_chain_with_params(
        x["candidates"], x["logits"].clone(), x["draft_logits"].clone(), params=x["params"],
        keys=x["keys"], positions=x["positions"], invariant=invariant,
    )
    assert out.bonus.shape == (B,)


@pytest.mark.parametrize("rule", [
    RuleParams(mode=0, threshold_single=0.8, threshold_acc=0.5),
    RuleParams(mode=1, posterior_threshold=0.09, posterior_alpha=0.3),
    RuleParams(mode=2, rates=(0.9, 0.5, 0.2)),
], ids=["thresholds", "typical", "synthetic"])
def test_lossy_rules_draw_only_from_the_stream(x, no_generator_draws, rule):
    keyed = {"keys": x["keys"], "positions": x["positions"]}
    verify_chain_relaxed(x["candidates"], x["p"], x["q"], rule=rule, **keyed)
    verify_chain_relaxed_with_params(
        x["candidates"], x["logits"].clone(), x["draft_logits"].clone(), rule=rule,
        params=x["params"], **keyed,
    )
    if rule.mode == 2:
        verify_chain_synthetic_greedy(x["candidates"], x["logits"], rule=rule, **keyed)


def test_drafters_samplers_draw_only_from_the_stream(x, no_generator_draws):
    from specreg.step.draft_sampling import sample_children, sample_rows

    rows = sample_rows(x["draft_logits"][:, 0], x["params"], keys=x["keys"],
                       positions=x["positions"])
    children = sample_children(x["draft_logits"][:, 0], x["params"], 3, keys=x["keys"],
                               positions=x["positions"])
    assert rows.tokens.shape == (B,) and children.tokens.shape == (B, 3)


@pytest.fixture
def draft_model_plan():
    return Registry.load().resolve({"algorithm": "draft_model", "num_steps": 3})


def test_draft_model_drafter_draws_only_from_the_stream(
    x, history, draft_model_plan, no_generator_draws
):
    plan = draft_model_plan
    table = x["logits"][:, 0]

    def runner(tokens, start, counts):  # a stand-in draft model: one fixed row per request
        return table

    lengths = torch.full((B,), 10)
    cache = torch.zeros(B, dtype=torch.int64)
    for drawn in ({"temperature": 0.8}, {"params": x["params"]}):
        draft = plan.drafter.draft(runner, history, lengths, cache, keys=x["keys"], **drawn)
        assert draft.tokens.shape == (B, 3)


def test_a_call_without_keys_draws_only_its_keys(x, no_generator_draws):
    """Without `keys` the one draw outside the stream is each request's key (`fresh_keys`,
    torch.randint); given the keys, nothing else is drawn (the tests above)."""
    with pytest.raises(DrawOutsideStream, match="randint"):
        verify_chain_sampling(x["candidates"], x["p"], x["q"], positions=x["positions"])


@pytest.fixture
def eagle_tree():
    """An EAGLE tree (4 requests, topk 3, 3 steps, 10 nodes) with its p and q, built before the
    trap is set."""
    from specreg.kernels.tree_build import build_tree

    from tests.support.eagle import random_draft

    gen = torch.Generator().manual_seed(5)
    b, topk, steps, n, vocab = 4, 3, 3, 10, 50
    parent_list, sel, drafts = random_draft(b, topk, steps, n, vocab, gen)
    tree = build_tree(torch.randint(0, vocab, (b,), generator=gen), parent_list, sel, drafts,
                      torch.randint(0, 5, (b,), generator=gen), topk=topk, depth=steps,
                      num_verify_tokens=n, mask_mode="qlen_only")
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen) * 2, -1)
    q = torch.softmax(torch.randn(b, n, vocab, generator=gen) * 2, -1)
    return tree, p, q, (steps, topk, n)


@pytest.mark.parametrize("invariant", [False, True])
def test_tree_verifiers_draw_only_from_the_stream(eagle_tree, no_generator_draws, invariant):
    from specreg_eagle.verifier import EagleVerifier

    tree, p, q, (steps, topk, n) = eagle_tree
    verifier = EagleVerifier(num_steps=steps, topk=topk, num_draft_tokens=n)
    keys = torch.arange(p.shape[0], dtype=torch.int64) + 9
    out = verifier.verify_sampling(tree, p, draft_probs=None if invariant else q, keys=keys,
                                   invariant=invariant)
    assert out.bonus.shape == (p.shape[0],)


@pytest.fixture
def medusa_inputs(x):
    """A medusa plan (3 heads, topk 2, 7 nodes), its head logits [B, 3, V] and target logits
    [B, 7, V], built before the trap is set."""
    plan = Registry.load().resolve({"algorithm": "medusa", "num_steps": 3, "topk": 2})
    width = plan.config.num_draft_tokens
    target = torch.randn(B, width, V, generator=torch.Generator().manual_seed(7))
    return plan, x["draft_logits"].contiguous(), target


def test_medusa_sampled_drafting_and_its_verify_draw_only_from_the_stream(
    x, medusa_inputs, no_generator_draws
):
    """Medusa's heads sampled with each request's parameters (all heads at once, and head by
    head), then the tree verified by the with-draft rule on their q: every draw on the stream."""
    plan, heads, target = medusa_inputs
    bonus, seq_lens = x["candidates"][:, 0], x["positions"] + 4
    sampled = plan.drafter.sample_tree_from_heads(heads, bonus, seq_lens, params=x["params"],
                                                  keys=x["keys"])
    draft = plan.drafter.start(heads[:, 0], torch.zeros(B, 1), params=x["params"],
                               keys=x["keys"], positions=seq_lens + 1)
    for d in (1, 2):
        draft = plan.drafter.step(draft, heads[:, d], torch.zeros(B, 1))
    assert torch.equal(plan.drafter.draft_probs(draft), sampled.draft_probs)
    out = plan.verifier.verify_from_logits(sampled.tree, target, params=x["params"],
                                           keys=x["keys"], draft_probs=sampled.draft_probs)
    assert out.bonus.shape == (B,)
