"""Per-request draft lengths end to end through the reference loop, for every built-in algorithm:
greedy with lengths 0, 1 and the plan's maximum in one batch equals plain greedy decoding token
for token, every verify keeps each request within its length (0: one plain token per step), and
sampled generation follows the target's exact marginals in every length group (chi-square).
The drafters themselves propose at most each request's length."""

from __future__ import annotations

import functools

import pytest
import torch

from specreg import Registry
from specreg.cli.demo import toy_draft_checkpoint
from specreg.errors import KernelInputError
from specreg.testing import ToyConfig, ToyLM, check_greedy
from specreg.testing.loop import SpeculativeLoop
from specreg.testing.lossless import P_VALUE_THRESHOLD, chi_square_p_value, target_marginals

TOY = ToyConfig()
DRAFT_CONFIG = toy_draft_checkpoint(TOY)
LOOKUP = {"prompt_lookup_min": 1, "prompt_lookup_max": 3}

CASES = {
    "eagle-chain": {"algorithm": "eagle", "num_steps": 3, "topk": 1},
    "eagle-tree": {"algorithm": "eagle", "num_steps": 3, "topk": 4, "num_draft_tokens": 8},
    "dspark": {"algorithm": "dspark", "draft_config": DRAFT_CONFIG},
    "dflash": {"algorithm": "dflash", "draft_config": DRAFT_CONFIG},
    "ngram": {"algorithm": "ngram", "num_steps": 3, "draft_config": LOOKUP},
    "ngram-tree": {"algorithm": "ngram", "num_steps": 3,
                   "draft_config": {**LOOKUP, "proposals": "tree"}},
    "suffix": {"algorithm": "suffix", "num_steps": 3, "draft_config": {"max_tree_depth": 16}},
    "draft_model": {"algorithm": "draft_model", "num_steps": 3},
    "medusa": {"algorithm": "medusa", "num_steps": 3},
}


@pytest.fixture(scope="module")
def registry():
    return Registry.load(
        allowlist={"eagle", "dspark", "lookup", "draft_model", "medusa"}, fresh=True
    )


@pytest.fixture(scope="module")
def models():
    target = ToyLM(TOY, seed=0)
    return target, target.perturbed(0.25, seed=12)


def _prompts(b):
    motif = torch.randint(0, TOY.vocab_size, (b, 5), generator=torch.Generator().manual_seed(3))
    return motif.repeat(1, 5)[:, :24]  # repetitive: the lookup drafters find matches


class Spy:
    """The plan's verifier, recording every verify's accepted counts; `drop_lengths` makes it
    ignore the lengths it is given (the control, with the drafter's `DropLengths`)."""

    def __init__(self, verifier, *, drop_lengths=False):
        self._verifier, self._drop, self.accepted = verifier, drop_lengths, []

    def __getattr__(self, name):
        method = getattr(self._verifier, name)
        if not name.startswith("verify") or not callable(method):
            return method

        @functools.wraps(method)
        def recorded(*args, **kwargs):
            if self._drop:
                kwargs.pop("draft_lengths", None)
            out = method(*args, **kwargs)
            self.accepted.append(out.num_accepted.long().clone())
            return out

        return recorded


class DropLengths:
    """A drafter that ignores the lengths it is given (the control)."""

    def __init__(self, drafter):
        self._drafter = drafter

    def __getattr__(self, name):
        value = getattr(self._drafter, name)
        if not callable(value):
            return value

        @functools.wraps(value)
        def dropped(*args, **kwargs):
            kwargs.pop("draft_lengths", None)
            return value(*args, **kwargs)

        return dropped


def _spied(plan, *, drop_lengths=False):
    spy = Spy(plan.verifier, drop_lengths=drop_lengths)
    drafter = DropLengths(plan.drafter) if drop_lengths else plan.drafter
    return plan.__class__(
        algorithm=plan.algorithm, cache=None, resolution=plan.resolution, verifier=spy,
        cache_swapper=None, drafter=drafter,
    ), spy


def _within(spy, lengths):
    return all(bool((a <= lengths).all()) for a in spy.accepted)


@pytest.mark.parametrize("case", sorted(CASES))
def test_mixed_lengths_greedy_equals_plain_greedy(registry, models, case):
    plan = registry.resolve(CASES[case])
    top = plan.max_draft_length
    lengths = torch.tensor([0, 1, top, top, 0, 1, top, 2])
    spied, spy = _spied(plan)
    target, draft = models
    check = check_greedy(spied, target, draft, _prompts(8), 16, draft_lengths=lengths)
    assert check.passed, f"first mismatch at column {check.first_mismatch}"
    assert spy.accepted and _within(spy, lengths)
    assert all(bool((a[lengths == 0] == 0).all()) for a in spy.accepted)
    longest = max(int(a[lengths == top].max()) for a in spy.accepted)
    # the long rows do speculate (the check is not vacuous); the toy target follows the
    # prompt's motif for one token at a time, so lookup drafts are accepted one at a time
    assert longest >= (1 if CASES[case]["algorithm"] in ("ngram", "suffix") else 2), longest


def test_a_loop_that_drops_the_lengths_is_caught(registry, models):
    plan = registry.resolve(CASES["eagle-tree"])
    lengths = torch.tensor([0, 1, 3, 3])
    spied, spy = _spied(plan, drop_lengths=True)
    target, draft = models
    with pytest.raises(KernelInputError) as err:  # the loop's acceptance counts refuse it too
        check_greedy(spied, target, draft, _prompts(4), 12, draft_lengths=lengths)
    assert err.value.codes == ("SR132",)
    assert not _within(spy, lengths)


@pytest.mark.parametrize("case", ["eagle-tree", "dspark", "draft_model"])
def test_mixed_lengths_sampling_follows_the_target_in_every_group(registry, models, case):
    """The first two sampled tokens of each length group against the target's exact
    marginals (the draft model's q drives classic rejection sampling for dspark and
    draft_model; the tree rules are target-only)."""
    plan = registry.resolve(CASES[case])
    top = plan.max_draft_length
    per_group = 1000
    groups = (0, 1, top)
    lengths = torch.tensor(groups).repeat(per_group)
    target, draft = models
    prompt = _prompts(1)[0, :12]
    loop = SpeculativeLoop(plan, target, draft, sampling=True, seed=9, draft_lengths=lengths)
    result = loop.generate(prompt[None, :].expand(lengths.numel(), -1).clone(), 2)
    first, second = target_marginals(target, prompt, 1.0)
    v, length = TOY.vocab_size, prompt.numel()
    for group in groups:
        rows = result.tokens[lengths == group]
        for column, probs in ((length, first), (length + 1, second)):
            p = chi_square_p_value(torch.bincount(rows[:, column], minlength=v), probs)
            assert p > P_VALUE_THRESHOLD, (group, column, p)


# ---------------------------------------------------------------------------------- drafters
def test_chain_drafters_propose_at_most_each_length(registry):
    history = _prompts(3)
    counts = torch.full((3,), history.shape[1])
    last = history[:, -1]
    for case in ("ngram", "suffix"):
        drafter = registry.resolve(CASES[case]).drafter
        full = drafter.propose(history, counts)
        cut = drafter.propose(history, counts, draft_lengths=[0, 1, 3])
        for r, k in enumerate((0, 1, 3)):
            assert cut[r, :k].tolist() == full[r, :k].tolist(), case
            assert (cut[r, k:] == last[r]).all(), case
        tree = drafter.propose_tree(history, counts, draft_lengths=[0, 1, 3])
        kept = tree.valid & (tree.depth > torch.tensor([0, 1, 3])[:, None])
        assert not bool(kept.any()) and not bool(tree.valid[0, 1:].any()), case


def test_block_drafter_proposes_at_most_each_length(registry):
    plan = registry.resolve(CASES["dflash"])
    g = plan.gamma
    logits = torch.randn(3, g + 1, 8, generator=torch.Generator().manual_seed(2))
    anchor = torch.tensor([5, 6, 7])
    full, _ = plan.drafter.propose(logits, anchor)
    cut, _ = plan.drafter.propose(logits, anchor, draft_lengths=[0, 1, g])
    for r, k in enumerate((0, 1, g)):
        assert cut[r, :k].tolist() == full[r, :k].tolist()
        assert (cut[r, k:] == anchor[r]).all()


def test_draft_model_runs_only_the_longest_requests_steps(registry, models):
    drafter = registry.resolve(CASES["draft_model"]).drafter
    target, _ = models
    history = _prompts(3)
    lengths = torch.full((3,), history.shape[1])
    calls = []

    def runner(tokens, start, counts):
        calls.append(tokens.shape[1])
        ext = torch.cat([history, torch.zeros(3, 8, dtype=torch.long)], 1)
        ext[torch.arange(3)[:, None], start[:, None] + torch.arange(tokens.shape[1])] = tokens
        return target.next_logits(ext, start + counts)

    zeros = torch.zeros(3, dtype=torch.long)
    full = drafter.draft(runner, history, lengths, zeros, temperature=1.0,
                         generator=torch.Generator().manual_seed(1))
    full_calls, calls[:] = len(calls), []
    cut = drafter.draft(runner, history, lengths, zeros, temperature=1.0,
                        generator=torch.Generator().manual_seed(1), draft_lengths=[0, 1, 1])
    assert len(calls) < full_calls  # one draft step, then its token fed: fewer forwards
    assert torch.equal(cut.tokens[1:, 0], full.tokens[1:, 0])
    assert (cut.tokens[0] == history[0, -1]).all() and (cut.tokens[:, 1:] == history[:, -1:]).all()
    assert (cut.q[0] == 0).all() and (cut.q[:, 1:] == 0).all() and (cut.q[1:, 0] > 0).any()
    assert cut.cache_lens.tolist() == (lengths + 1).tolist()  # the one draft is in the KV
