"""Property: for random configs with adaptive candidate steps, every plan's widths and gamma are
exactly what its verifier and drafter accept, for the main config and every candidate; a config
the algorithm cannot serve is a coded ConfigError instead."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specreg import ConfigError, Phase, Registry
from tests.support.fuzz import fuzz_settings

pytestmark = pytest.mark.fuzz

VOCAB = 16
DRAFT_CONFIG = {"vocab_size": VOCAB, "markov_rank": 4, "markov_head_type": "vanilla",
                "mask_token_id": VOCAB - 1}


@pytest.fixture(scope="module")
def registry():
    return Registry.load(fresh=True)


@st.composite
def adaptive_configs(draw):
    algorithm = draw(st.sampled_from(["eagle", "eagle3", "dspark", "dflash"]))
    data = {
        "algorithm": algorithm,
        "candidate_steps": draw(st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True)),
    }
    if algorithm.startswith("eagle"):
        data["num_steps"] = draw(st.integers(1, 6))
        data["topk"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            data["num_draft_tokens"] = draw(st.integers(2, 24))
    else:
        if draw(st.booleans()):
            data["num_draft_tokens"] = draw(st.integers(2, 12))
        block = draw(st.one_of(st.none(), st.integers(2, 12)))
        data["draft_config"] = DRAFT_CONFIG | ({"block_size": block} if block else {})
    return data


def _random_logits(gen, *shape):
    return torch.randn(*shape, VOCAB, generator=gen)


def _check_tree(plan, candidate, gen):
    drafter, verifier = plan.drafter, plan.verifier
    b, k = 2, drafter.topk
    assert drafter.widths_by_steps[candidate.steps] == candidate.sizes.verify_width
    draft = drafter.start(_random_logits(gen, b), torch.zeros(b, 3))
    for _ in range(1, candidate.steps):
        draft = drafter.step(draft, _random_logits(gen, b * k), draft.hidden)
    tree = drafter.tree(draft, torch.tensor([1, 2]), torch.tensor([5, 7]))
    n = candidate.sizes.verify_width
    assert tree.num_verify_tokens == n and n in verifier.widths
    out = verifier.verify_greedy(tree, _random_logits(gen, b, n))
    assert out.output_tokens.shape == (b, verifier.num_steps + 1)
    assert bool((out.num_accepted <= min(candidate.steps, candidate.gamma)).all())


def _check_block(plan, candidate, gen):
    drafter, verifier = plan.drafter, plan.verifier
    b, g = 2, candidate.gamma
    anchor = torch.tensor([1, 2])
    ids, _ = drafter.build_draft_block(anchor, torch.tensor([5, 7]), vocab_size=VOCAB)
    assert ids.shape == (b, plan.num_tokens_per_req(Phase.TARGET_VERIFY, is_draft_worker=True))
    head = drafter.make_head(vocab_size=VOCAB, hidden_size=0)
    drafts, _ = drafter.propose(_random_logits(gen, b, drafter.draft_width), anchor, head=head,
                                gamma=g)
    assert drafts.shape == (b, g)
    chain = drafter.candidates(anchor, drafts)
    assert chain.shape[1] == candidate.sizes.verify_width and chain.shape[1] in verifier.widths
    out = verifier.verify_greedy(chain, _random_logits(gen, b, g + 1))
    assert bool((out.num_accepted <= g).all())


@fuzz_settings(40, 400)
@given(config=adaptive_configs())
def test_plan_widths_and_gamma_are_what_its_verifier_and_drafter_accept(registry, config):
    try:
        plan = registry.resolve(config)
    except ConfigError as exc:
        assert all(registry.catalog.lookup(p.code) and p.fix for p in exc.problems)
        return
    sizes = [plan.resolution.main, *(c.sizes for c in plan.candidates)]
    verifier, drafter = plan.verifier, plan.drafter
    assert plan.gamma == max(s.gamma for s in sizes) == verifier.gamma == drafter.gamma
    top = plan.num_tokens_per_req(Phase.TARGET_VERIFY)
    assert top == max(s.verify_width for s in sizes) == verifier.num_draft_tokens
    assert set(verifier.widths) == {s.verify_width for s in sizes}
    for phase in Phase:
        for worker in (False, True):
            assert plan.num_tokens_per_req(phase, worker) == max(
                s.width(phase, worker) for s in sizes
            )
    assert [c.steps for c in plan.candidates] == sorted(s for s in config["candidate_steps"] if s)
    gen = torch.Generator().manual_seed(len(plan.candidates))
    check = _check_tree if plan.algorithm.drafting == "tree" else _check_block
    for candidate in plan.candidates:
        check(plan, candidate, gen)


@pytest.mark.parametrize(
    "config, codes",
    [
        # the issue's repros: consistent plans now
        ({"algorithm": "eagle", "topk": 4, "num_steps": 3, "num_draft_tokens": 16,
          "candidate_steps": [1, 3, 5]}, ()),
        ({"algorithm": "eagle", "topk": 4, "num_steps": 3, "candidate_steps": [1, 3]}, ()),
        ({"algorithm": "dspark", "num_draft_tokens": 8, "candidate_steps": [1, 3]}, ()),
        # candidates the algorithm cannot serve: coded
        ({"algorithm": "dspark", "num_draft_tokens": 4, "candidate_steps": [1, 5]}, ("SR312",)),
        ({"algorithm": "eagle", "candidate_steps": [1, 40]}, ("SR122",)),
    ],
)
def test_the_issue_repros(registry, config, codes):
    if codes:
        assert {p.code for p in registry.check(config) if p.is_error} == set(codes)
        with pytest.raises(ConfigError):
            registry.resolve(config)
        return
    plan = registry.resolve(config)
    width = plan.num_tokens_per_req(Phase.TARGET_VERIFY)
    assert width == plan.verifier.num_draft_tokens == plan.gamma + 1
    assert max(c.config.num_draft_tokens for c in plan.candidates) <= width
    assert plan.config.num_draft_tokens <= width
