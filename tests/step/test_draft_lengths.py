"""Bad per-request draft lengths are coded errors before any launch, every request at once:
SR921 names the request, its length and the maximum, and the fix in the user's terms; SR922
the wrong type, shape, dtype, device or a verify_lens given beside them. Every verifier and
drafter goes through the same check, against the plan's maximum."""

import pytest
import torch

from specreg import Registry
from specreg.step.chain_verifier import ChainVerifier
from specreg.cli.demo import toy_draft_checkpoint
from specreg.kernels.checks import check_draft_lengths
from specreg.errors import KernelInputError
from specreg.testing import ToyConfig

TOY = ToyConfig()


@pytest.fixture(scope="module")
def registry():
    return Registry.load(allowlist={"eagle", "dspark", "lookup", "draft_model"}, fresh=True)


def _chain(b=5, n=5, v=8):
    gen = torch.Generator().manual_seed(0)
    return torch.randint(0, v, (b, n), generator=gen), torch.randn(b, n, v, generator=gen)


def _problems(err):
    return [(p.code, p.field, p.message, p.fix) for p in err.value.problems]


def test_every_request_above_the_maximum_is_its_own_problem_before_any_launch(monkeypatch):
    import specreg.kernels.chain as chain

    def launched(*args, **kwargs):
        raise AssertionError("a kernel ran")

    monkeypatch.setattr(chain, "verify_chain_greedy", launched)
    candidates, logits = _chain()
    with pytest.raises(KernelInputError) as err:
        ChainVerifier(5).verify_greedy(candidates, logits, draft_lengths=[0, 7, -1, 4, 9])
    assert isinstance(err.value, ValueError)
    found = _problems(err)
    assert [(code, field) for code, field, *_ in found] == [
        ("SR921", "draft_lengths[1]"), ("SR921", "draft_lengths[2]"), ("SR921", "draft_lengths[4]")
    ]
    message = str(err.value)
    assert "request 1 asks for 7 drafts, above the maximum of 4" in message
    assert "request 4 asks for 9 drafts, above the maximum of 4" in message
    assert "request 2 asks for -1 drafts" in message
    fix = found[0][3]
    assert "min(length, 4)" in fix and "--speculative-num-steps" in fix
    assert "num_speculative_tokens" in fix
    assert "pass 0 to opt request 2 out" in found[1][3]


@pytest.mark.parametrize("lengths, words", [
    (torch.zeros(4, dtype=torch.int64), "shape [4], not [5]"),
    (torch.zeros(5), "dtype float32"),
    ([0, 1, 2.0, 1, True], "non-integers at requests [2, 4]"),
    ([0, 1], "2 entries for a batch of 5"),
    ("01234", "is a str"),
    (torch.zeros(5, dtype=torch.int64, device="meta"), "is on meta"),
])
def test_lengths_that_do_not_fit_the_batch_are_sr922(lengths, words):
    candidates, logits = _chain()
    with pytest.raises(KernelInputError) as err:
        ChainVerifier(5).verify_greedy(candidates, logits, draft_lengths=lengths)
    assert err.value.codes == ("SR922",)
    assert words in str(err.value)


def test_draft_lengths_and_verify_lens_together_are_sr922():
    candidates, logits = _chain()
    with pytest.raises(KernelInputError) as err:
        ChainVerifier(5).verify_greedy(candidates, logits, draft_lengths=[1] * 5,
                                       verify_lens=torch.full((5,), 2))
    assert err.value.codes == ("SR922",)


def test_unchecked_values_are_clamped_as_on_an_accelerator():
    lengths = torch.tensor([0, 7, -1])
    clamped = check_draft_lengths(lengths, 3, 4, device="cpu", check_values=False)
    assert clamped.tolist() == [0, 4, 0]
    candidates, logits = _chain(b=3)
    out = ChainVerifier(5, check_values=False).verify_greedy(candidates, logits,
                                                             draft_lengths=lengths)
    assert (out.num_accepted[[0, 2]] == 0).all()


def _tree_plan(registry):
    return registry.resolve({"algorithm": "eagle", "num_steps": 3, "topk": 2,
                             "num_draft_tokens": 6})


def test_every_plan_object_checks_against_the_plans_maximum(registry):
    """The eagle tree verifier (max = num_steps), dspark's and dflash's block verifiers and
    drafters (max = gamma), the ngram drafter and verifier and the draft-model drafter."""
    from tests.support.eagle import random_draft

    tree_plan = _tree_plan(registry)
    assert tree_plan.max_draft_length == 3
    gen = torch.Generator().manual_seed(1)
    parent_list, sel, drafts = random_draft(2, 2, 3, 6, 8, gen)
    tree = tree_plan.verifier.build_tree(torch.zeros(2, dtype=torch.int64), torch.full((2,), 4),
                                         parent_list=parent_list, top_scores_index=sel,
                                         draft_tokens=drafts)
    logits = torch.randn(2, 6, 8, generator=gen)
    calls = [
        (lambda lens: tree_plan.verifier.verify_greedy(tree, logits, draft_lengths=lens), 3),
        (lambda lens: tree_plan.verifier.verify_sampling(tree, logits.softmax(-1),
                                                         keys=torch.tensor([1, 2]),
                                                         draft_lengths=lens), 3),
    ]
    for algorithm in ("dspark", "dflash"):
        plan = registry.resolve({"algorithm": algorithm,
                                 "draft_config": toy_draft_checkpoint(TOY)})
        n = plan.gamma + 1
        assert plan.max_draft_length == plan.gamma
        candidates = torch.zeros(2, n, dtype=torch.int64)
        block = torch.randn(2, n, 8, generator=gen)
        calls.append((lambda lens, p=plan, c=candidates, x=block: p.verifier.verify_greedy(
            c, x, draft_lengths=lens), plan.gamma))
        if algorithm == "dflash":  # no head: the drafter proposes from the block's logits
            calls.append((lambda lens, p=plan, x=block: p.drafter.propose(
                x, torch.zeros(2, dtype=torch.int64), draft_lengths=lens), plan.gamma))
    ngram = registry.resolve({"algorithm": "ngram", "num_steps": 3})
    history = torch.tensor([[1, 2, 3, 1, 2, 3, 1], [4, 4, 4, 4, 4, 4, 4]])
    calls.append((lambda lens: ngram.drafter.propose(history, torch.full((2,), 7),
                                                     draft_lengths=lens), 3))
    drafter = registry.resolve({"algorithm": "draft_model", "num_steps": 3}).drafter
    calls.append((lambda lens: drafter.draft(lambda *a: torch.zeros(2, 8),
                                             history, torch.full((2,), 7),
                                             torch.zeros(2, dtype=torch.int64),
                                             draft_lengths=lens), 3))
    for call, maximum in calls:
        call([0, maximum])  # at the maximum: fine
        with pytest.raises(KernelInputError) as err:
            call([0, maximum + 1])
        assert err.value.codes == ("SR921",), call
        assert (f"request 1 asks for {maximum + 1} drafts, above the maximum of {maximum}"
                in str(err.value))


def test_dflash_takes_draft_lengths_though_not_ragged_verify_lens(registry):
    from specreg.errors import ConfigError

    plan = registry.resolve({"algorithm": "dflash", "draft_config": toy_draft_checkpoint(TOY)})
    n = plan.gamma + 1
    candidates, logits = _chain(b=3, n=n)
    out = plan.verifier.verify_greedy(candidates, logits, draft_lengths=[0, 1, n - 1])
    assert out.num_accepted.tolist()[0] == 0
    with pytest.raises(ConfigError):
        plan.verifier.verify_greedy(candidates, logits, verify_lens=torch.ones(3, dtype=torch.long))
