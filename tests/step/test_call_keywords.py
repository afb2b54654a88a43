"""The verifiers' and drafters' public methods name every keyword they take (no `**kwargs`, so
`help()` and IDEs show them), and a keyword they do not take is SR930 naming the method, the
closest keyword and every accepted one, not a TypeError from an internal function."""

from __future__ import annotations

import inspect
import pydoc

import pytest
import torch

from specreg import Registry
from specreg.step.call_keywords import checked_keywords, keyword_names
from specreg.step.chain_verifier import ChainVerifier
from specreg.errors import KernelInputError, UnknownKeywordError
from specreg.contract.sampling_params import SamplingParams

#: config -> the plan objects whose public methods are checked
PLANS = {
    "draft_model": {"algorithm": "draft_model", "num_steps": 3},
    "dspark": {"algorithm": "dspark", "num_draft_tokens": 4},
    "eagle": {"algorithm": "eagle", "num_steps": 2, "topk": 2, "num_draft_tokens": 4},
    "medusa": {"algorithm": "medusa"},
    "ngram": {"algorithm": "ngram", "num_draft_tokens": 4},
    "suffix": {"algorithm": "suffix", "num_draft_tokens": 4},
}
#: methods a serving loop calls per step, by the name they have on any plan object
STEP_METHODS = (
    "verify_greedy", "verify_greedy_from_predict", "verify_sampling", "verify_target_only",
    "verify_from_logits", "verify_sampling_from_logits", "verify_tree_greedy",
    "verify_tree_sampling", "build_tree", "propose", "propose_tree", "lookup", "start", "tree",
    "tree_from_heads", "sample_tree_from_heads", "draft", "pick", "build_draft_block",
)


def _plan_objects():
    registry = Registry.load()
    for name, config in PLANS.items():
        plan = registry.resolve(config)
        for role in ("verifier", "drafter"):
            obj = getattr(plan, role)
            for method in STEP_METHODS:
                if callable(getattr(obj, method, None)):
                    yield f"{name}.{role}.{method}", obj, method


CASES = list(_plan_objects())


@pytest.mark.parametrize(("label", "obj", "method"), CASES, ids=[c[0] for c in CASES])
def test_step_methods_name_their_keywords_and_refuse_others(label, obj, method):
    bound = getattr(obj, method)
    params = inspect.signature(bound).parameters.values()
    assert not any(p.kind is p.VAR_KEYWORD for p in params), label
    with pytest.raises(UnknownKeywordError) as err:
        bound(None, None, None, no_such_keyword=1)
    error = err.value
    assert isinstance(error, TypeError) and isinstance(error, KernelInputError)
    assert error.codes == ("SR930",)
    text = str(error)
    owner = type(bound.__self__).__name__  # BlockVerifier.propose is its BlockDrafter's
    assert f"{owner}.{method}() does not take the keyword no_such_keyword=" in text
    assert all(name in text for name in keyword_names(bound) if name != "seed"), text


def test_every_plan_has_step_methods_checked():
    checked = {label.split(".")[0] for label, _, _ in CASES}
    assert checked == set(PLANS)
    assert len(CASES) >= 20


def test_help_shows_the_keywords():
    text = pydoc.render_doc(ChainVerifier.verify_sampling)
    for name in ("keys", "positions", "params", "invariant", "draft_lengths", "token_bitmask"):
        assert f"{name}:" in text, name


def test_a_misspelt_keyword_names_the_right_one():
    verifier = ChainVerifier(4)
    candidates, probs = torch.zeros(1, 4, dtype=torch.long), torch.full((1, 4, 8), 1 / 8)
    with pytest.raises(UnknownKeywordError) as err:
        verifier.verify_sampling(candidates, probs, None, seeds=torch.tensor([1]))
    assert "rename seeds= to keys=" in str(err.value)
    with pytest.raises(UnknownKeywordError) as err:
        verifier.verify_greedy(candidates, probs, draft_length=[1])
    assert "rename draft_length= to draft_lengths=" in str(err.value)
    assert err.value.problems[0].field == "draft_length"


def test_keywords_that_need_params_are_refused_without_them():
    verifier = ChainVerifier(4)
    candidates, probs = torch.zeros(1, 4, dtype=torch.long), torch.full((1, 4, 8), 1 / 8)
    mask = torch.full((1, 4, 1), -1, dtype=torch.int32)
    with pytest.raises(UnknownKeywordError, match="token_bitmask= only with params="):
        verifier.verify_sampling(candidates, probs, None, token_bitmask=mask)
    with pytest.raises(UnknownKeywordError, match="keys="):
        verifier.verify_target_only(candidates, probs, seed=3)
    params = SamplingParams.of(1, temperature=1.0)
    with pytest.raises(KernelInputError) as err:  # with params the seeds are per request
        verifier.verify_sampling(candidates, probs, None, params=params, seed=3)
    assert err.value.code == "SR910"
    out = verifier.verify_sampling(candidates, probs, None, params=params, token_bitmask=mask)
    assert out.output_tokens.shape == (1, 4)


SEEDED = [case for case in CASES if "seed" in keyword_names(getattr(case[1], case[2]))]


@pytest.mark.parametrize(("label", "obj", "method"), SEEDED, ids=[c[0] for c in SEEDED])
def test_seed_beside_params_is_refused_by_every_verifier_that_names_it(label, obj, method):
    """With params the seeds are per request (params.seed): seed= beside them is SR910 on
    every chain verifier method, not ignored (BlockVerifier.verify_sampling_from_logits
    dropped it)."""
    n, vocab = obj.num_draft_tokens, 8
    candidates = torch.zeros(1, n, dtype=torch.long)
    target, draft = torch.zeros(1, n, vocab), torch.zeros(1, n - 1, vocab)
    if "probs" in keyword_names(getattr(obj, method))[1]:  # probabilities, not logits
        target, draft = target.softmax(-1), draft.softmax(-1)
    args = (candidates, target) if method == "verify_target_only" else (
        candidates, target, draft)
    params = SamplingParams.of(1, temperature=1.0)
    call = getattr(obj, method)
    assert call(*args, params=params).output_tokens.shape == (1, n)  # the inputs are sound
    with pytest.raises(KernelInputError) as err:
        call(*args, params=params, seed=3)
    assert err.value.codes == ("SR910",), label
    assert "put the seed in SamplingParams.of(..., seed=...)" in str(err.value)


def test_every_seeded_verifier_is_checked():
    assert {label.split(".")[0] for label, _, _ in SEEDED} == {
        "draft_model", "dspark", "ngram", "suffix"}
    assert any(label == "dspark.verifier.verify_sampling_from_logits" for label, _, _ in SEEDED)


def test_tree_keywords_that_need_params_are_refused_without_them():
    from specreg.kernels.tree_build import build_tree

    verifier = Registry.load().resolve(PLANS["eagle"]).verifier
    tree = build_tree(torch.tensor([1]), torch.tensor([[-1, 0, 1]]), torch.tensor([[0, 1, 2]]),
                      torch.tensor([[4, 5, 6]]), torch.tensor([3]), topk=2, depth=2,
                      num_verify_tokens=4)
    probs = torch.full((1, 4, 8), 1 / 8)
    with pytest.raises(UnknownKeywordError, match="penalties= only with params="):
        verifier.verify_sampling(tree, probs, penalties=object())


def test_greedy_verification_does_not_read_the_random_stream():
    verifier = ChainVerifier(4)
    gen = torch.Generator().manual_seed(0)
    candidates = torch.randint(0, 8, (3, 4), generator=gen)
    logits = torch.randn(3, 4, 8, generator=gen)
    plain = verifier.verify_greedy(candidates, logits)
    keyed = verifier.verify_greedy(candidates, logits, keys=torch.tensor([1, 2, 3]),
                                   positions=torch.tensor([4, 5, 6]))
    assert torch.equal(plain.output_tokens, keyed.output_tokens)


def test_the_check_keeps_the_signature_and_the_docstring():
    class Example:
        @checked_keywords(refused=("seed",))
        def verify(self, tokens, *, keys=None, seed=None):
            """Doc."""
            return tokens, keys

    assert Example().verify(1, keys=2) == (1, 2)
    assert list(inspect.signature(Example.verify).parameters) == ["self", "tokens", "keys", "seed"]
    assert Example.verify.__doc__ == "Doc."
    with pytest.raises(UnknownKeywordError) as err:
        Example().verify(1, key=2)
    assert "Example.verify() keywords: tokens, keys." in str(err.value)  # seed: refused, unlisted
