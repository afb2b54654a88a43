"""Structured output through the reference loop: the grammar's bitmask at every verified node.

`check_constrained` (the demo's "json schema" row) with a real grammar engine (xgrammar) on a
chain plan, a block plan and a branching tree plan: no emitted token refused by the grammar,
greedy equal to plain constrained greedy, the first two sampled tokens distributed as
non-speculative constrained sampling. Negative control: a constraint that gives every node the
root's mask (a matcher not advanced along the draft) is caught.
"""

from __future__ import annotations

import pytest
import torch

from specreg import Registry
from specreg.cli.demo import toy_draft_checkpoint
from specreg.testing.toy_model import ToyConfig, ToyLM

pytest.importorskip("xgrammar")

from specreg.testing.grammar import (  # noqa: E402
    DEMO_PREFILL,
    GrammarConstraint,
    check_constrained,
    compile_demo_grammar,
    token_id,
)

TOY = ToyConfig()


@pytest.fixture(scope="module")
def models():
    target = ToyLM(TOY, seed=0)
    return target, target.perturbed(0.25, seed=1)


@pytest.fixture(scope="module")
def grammar():
    return compile_demo_grammar(TOY.vocab_size)


def _plan(config):
    return Registry.load().resolve(config)


PLANS = {
    "chain": {"algorithm": "draft_model", "num_draft_tokens": 4},
    "block": {"algorithm": "dflash", "draft_config": toy_draft_checkpoint(TOY)},
    "tree": {"algorithm": "eagle", "num_steps": 3, "topk": 4, "num_draft_tokens": 8},
}


def _prompts():
    return torch.randint(0, TOY.vocab_size - 1, (3, 12), generator=torch.Generator().manual_seed(5))


@pytest.mark.parametrize("shape", sorted(PLANS))
def test_constrained_decoding_is_exact_and_lossless(shape, models, grammar):
    target, draft = models
    checked = check_constrained(_plan(PLANS[shape]), target, draft, _prompts(), 10,
                                samples=1200, grammar=grammar)
    assert checked.violations == 0
    assert checked.greedy_passed
    assert checked.p_value > 1e-3, checked.p_value


class _RootMaskOnly(GrammarConstraint):
    """Every node gets the mask after the committed tokens: the matcher never follows drafts."""

    def bitmask(self, paths, depths):
        roots = super().bitmask(paths[:, :1], depths[:, :1])
        return roots.expand(-1, depths.shape[1], -1).contiguous()


def test_a_mask_not_advanced_along_the_draft_is_caught(models, grammar):
    target, draft = models
    checked = check_constrained(_plan(PLANS["tree"]), target, draft, _prompts(), 10,
                                samples=1200, grammar=grammar, constraint_type=_RootMaskOnly)
    assert checked.violations > 0 and not checked.sampling_passed


def test_bitmask_rows_follow_each_nodes_path(grammar):
    """Node masks for a small tree: after `[` digits, '-' and ']' are allowed; after `[1`
    also ','; a path that leaves the grammar gives an all-ones (unreachable) row."""
    c = GrammarConstraint(grammar, 1, TOY.vocab_size, [token_id(t) for t in DEMO_PREFILL])
    root = token_id("[")
    one, comma, brace = token_id("1"), token_id(","), token_id("{")
    paths = torch.tensor([[[root, -1, -1], [root, one, -1], [root, brace, -1]]])
    depths = torch.tensor([[0, 1, 1]])
    masks = c.bitmask(paths, depths)

    def allowed(row):
        return {t for t in range(TOY.vocab_size) if int(row[t // 32]) >> (t % 32) & 1}

    digits = {token_id(str(d)) for d in range(10)}
    assert allowed(masks[0, 0]) == digits | {token_id("-"), token_id("]")}
    assert allowed(masks[0, 1]) == digits | {comma, token_id("]")}
    assert allowed(masks[0, 2]) == set(range(TOY.vocab_size))
    # the matcher is back where it was: the root's mask again
    assert torch.equal(c.bitmask(paths[:, :1], depths[:, :1])[0, 0], masks[0, 0])
