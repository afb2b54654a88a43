"""The with-draft rule end to end: drafters that sample with each request's parameters.

The reference loop runs mixed batches (greedy and sampled requests) on dflash, dspark and eagle
(tree and chain-shaped trees) with drafts drawn from the requests' filtered q, for a close and a
far draft model. Greedy requests must equal plain greedy decoding token for token; each sampled
kind's first and second tokens must follow plain decoding with the same parameters (exact
marginals, chi-square at fixed seeds). Negative controls, asserted to reject: drafts drawn from
the unfiltered q while the verifier assumes the filtered one, and tree children drawn with
replacement while the tree rule assumes without.
"""

import pytest
import torch

from specreg import Registry
from specreg.cli.demo import toy_draft_checkpoint
from specreg.step.draft_sampling import ChildrenDraw
from specreg.errors import KernelInputError
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.contract.sampling_params import SamplingParams
from specreg.testing.loop import SpeculativeLoop
from specreg.testing.lossless import P_VALUE_THRESHOLD, check_mixed_params, chi_square_p_value
from specreg.testing.toy_model import ToyConfig, ToyLM

CONFIG = ToyConfig()
PROMPT_LEN = 8
#: Request kinds of the sampled batches: a greedy one and hard cuts of every filter.
KINDS = (
    dict(temperature=0.0),
    dict(temperature=1.0, top_k=3),
    dict(temperature=0.8, top_p=0.5),
    dict(temperature=1.3, min_p=0.15),
    dict(temperature=0.7, top_k=12, top_p=0.8, min_p=0.05),
    dict(temperature=1.0),
)
PER_KIND = 1000

PLANS = {
    "dflash": {"algorithm": "dflash"},
    "dspark": {"algorithm": "dspark"},
    "eagle_tree": {"algorithm": "eagle", "num_steps": 3, "topk": 4, "num_draft_tokens": 8},
    "eagle_chain": {"algorithm": "eagle", "num_steps": 3, "topk": 1, "num_draft_tokens": 4},
}


def _plan(name: str):
    config = dict(PLANS[name])
    if config["algorithm"] in ("dflash", "dspark"):
        config["draft_config"] = toy_draft_checkpoint(CONFIG)
    return Registry.load().resolve(config)


@pytest.fixture(scope="module")
def target():
    return ToyLM(CONFIG, seed=0)


@pytest.fixture(scope="module")
def drafts(target):
    return {"close": target.perturbed(0.25, seed=1), "far": target.perturbed(3.0, seed=5)}


@pytest.fixture(scope="module")
def prompt():
    return torch.randint(0, CONFIG.vocab_size - 1, (PROMPT_LEN,),
                         generator=torch.Generator().manual_seed(4))


def _params(batch: int, seed: int) -> SamplingParams:
    kinds = [KINDS[r % len(KINDS)] for r in range(batch)]
    return SamplingParams.of(
        batch, temperature=[k["temperature"] for k in kinds],
        top_k=[k.get("top_k", 0) for k in kinds], top_p=[k.get("top_p", 1.0) for k in kinds],
        min_p=[k.get("min_p", 0.0) for k in kinds], seed=seed * 100_003 + torch.arange(batch),
    )


def _exact(target: ToyLM, prompt: torch.Tensor, kind: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain decoding's first and second token distributions under `kind`'s parameters."""
    v = CONFIG.vocab_size
    first = filtered_distribution(target.next_logits(prompt[None], torch.tensor([PROMPT_LEN]))[0],
                                  **kind)
    seqs = torch.cat([prompt.expand(v, -1), torch.arange(v)[:, None]], dim=1)
    after = target.next_logits(seqs, torch.full((v,), PROMPT_LEN + 1))
    second = sum(float(first[x]) * filtered_distribution(after[x], **kind)
                 for x in range(v) if float(first[x]) > 0)
    return first, second


def _p_values(plan, target, draft, prompt, *, seed=0, per_kind=PER_KIND, **loop_kwargs):
    """{kind index: (first-token p, second-token p)} and the run's result."""
    batch = per_kind * len(KINDS)
    loop = SpeculativeLoop(plan, target, draft, params=_params(batch, seed), seed=seed,
                           **loop_kwargs)
    result = loop.generate(prompt.expand(batch, -1).clone(), 2)
    out = {}
    for index, kind in enumerate(KINDS):
        rows = torch.arange(index, batch, len(KINDS))
        if kind["temperature"] == 0:
            continue
        first, second = _exact(target, prompt, kind)
        out[index] = tuple(
            chi_square_p_value(torch.bincount(result.tokens[rows, PROMPT_LEN + j],
                                              minlength=CONFIG.vocab_size), expected)
            for j, expected in enumerate((first, second))
        )
    return out, result


@pytest.mark.parametrize(("plan_name", "draft_name"), [
    ("dflash", "close"), ("dspark", "close"), ("eagle_tree", "close"), ("eagle_chain", "far"),
    ("dflash", "far"), ("eagle_tree", "far"),
])
def test_sampled_drafts_keep_plain_decoding_distribution(plan_name, draft_name, target, drafts,
                                                         prompt):
    p_values, result = _p_values(_plan(plan_name), target, drafts[draft_name], prompt)
    assert result.verify_rule == "with_draft"
    assert all(p > P_VALUE_THRESHOLD for pair in p_values.values() for p in pair), p_values
    if draft_name == "close":  # the drafts were really accepted, not just corrected
        assert result.mean_accepted_length > 1.2, result.mean_accepted_length


@pytest.mark.parametrize("plan_name", ["eagle_tree"])
def test_per_request_draft_lengths_keep_the_distribution(plan_name, target, drafts, prompt):
    plan = _plan(plan_name)
    gamma = plan.resolution.main.gamma if plan_name == "dflash" else int(plan.config.num_steps)
    batch = PER_KIND * len(KINDS)
    lengths = [(0, 1, gamma)[(r // len(KINDS)) % 3] for r in range(batch // 2)]
    p_values, result = _p_values(plan, target, drafts["close"], prompt, seed=2,
                                 per_kind=PER_KIND // 2, draft_lengths=lengths)
    assert result.verify_rule == "with_draft"
    assert all(p > P_VALUE_THRESHOLD for pair in p_values.values() for p in pair), p_values


@pytest.mark.parametrize("plan_name", list(PLANS))
def test_greedy_requests_equal_plain_greedy_in_the_mixed_batch(plan_name, target, drafts):
    prompts = torch.randint(0, 95, (3, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
    checked = check_mixed_params(_plan(plan_name), target, drafts["close"], prompts, 12,
                                 samples=600, seed=1)
    assert checked.result.verify_rule == "with_draft"
    assert checked.greedy_passed, checked.first_mismatch


def _unfiltered_q(logits, params, rows, **_):
    """The negative control's drafter: temperature only, no top-k / top-p / min-p."""
    p = params.select(rows)
    return torch.softmax(logits.index_select(0, rows).float() / p.temperature[:, None], dim=-1)


@pytest.mark.parametrize("plan_name", ["dflash", "eagle_tree"])
def test_negative_control_drafts_from_the_unfiltered_q_are_rejected(plan_name, target, drafts,
                                                                     prompt, monkeypatch):
    import specreg.step.draft_sampling as draft_sampling

    monkeypatch.setattr(draft_sampling, "filtered_q", _unfiltered_q)
    p_values, result = _p_values(_plan(plan_name), target, drafts["close"], prompt,
                                 per_kind=PER_KIND // 2)
    assert result.verify_rule == "with_draft"
    assert min(p_values[5]) > P_VALUE_THRESHOLD  # no filter: nothing differs
    for kind in (1, 2, 3, 4):  # every filtering kind is caught
        assert min(p_values[kind]) < P_VALUE_THRESHOLD, p_values


def test_negative_control_children_with_replacement_are_rejected(target, drafts, prompt,
                                                                 monkeypatch):
    import specreg.step.draft_sampling as draft_sampling

    real = draft_sampling.sample_children

    def with_replacement(logits, params, k, *, generator=None, **kwargs):
        drawn = real(logits, params, k, generator=generator, **kwargs)
        sampled = (~params.greedy).nonzero().flatten()
        tokens, q = drawn.tokens.clone(), drawn.q[sampled]
        for j in range(k):  # k independent draws from q: siblings may repeat
            race = q / torch.empty_like(q).exponential_(generator=generator)
            tokens[sampled, j] = race.argmax(-1)
        return ChildrenDraw(tokens=tokens, weights=drawn.weights, q=drawn.q)

    monkeypatch.setattr(draft_sampling, "sample_children", with_replacement)
    p_values, _ = _p_values(_plan("eagle_tree"), target, drafts["close"], prompt)
    assert min(p for pair in p_values.values() for p in pair) < P_VALUE_THRESHOLD, p_values


def test_the_rule_follows_the_drafter_and_the_request(target, drafts):
    close = drafts["close"]
    params = _params(6, 0)
    assert SpeculativeLoop(_plan("dflash"), target, close, params=params,
                           draft_rule="target_only").verify_rule == "target_only"
    assert SpeculativeLoop(_plan("dflash"), target, close).verify_rule == "greedy"
    ngram = Registry.load().resolve({"algorithm": "ngram"})
    assert SpeculativeLoop(ngram, target, close, params=params).verify_rule == "target_only"
    with pytest.raises(ValueError, match="cannot draw"):
        SpeculativeLoop(ngram, target, close, params=params, draft_rule="with_draft")
    with pytest.raises(ValueError, match="draft_rule"):
        SpeculativeLoop(_plan("dflash"), target, close, params=params, draft_rule="sometimes")


def test_drafters_reject_bad_params_before_drawing(target):
    dflash, eagle = _plan("dflash").drafter, _plan("eagle_tree").drafter
    logits = torch.randn(3, 5, CONFIG.vocab_size)
    anchor = torch.zeros(3, dtype=torch.long)
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    with pytest.raises(KernelInputError) as wrong_size:
        dflash.propose(logits, anchor, params=_params(2, 0), generator=generator)
    assert wrong_size.value.code == "SR910"
    with pytest.raises(KernelInputError) as both:
        dflash.propose(logits, anchor, params=_params(3, 0), temperature=0.7)
    assert both.value.code == "SR927"
    with pytest.raises(KernelInputError) as tree_size:
        eagle.start(logits[:, 0], torch.zeros(3, 3), params=_params(4, 0), generator=generator)
    assert tree_size.value.code == "SR910"
    deterministic = eagle.start(logits[:, 0], torch.zeros(3, 3))
    with pytest.raises(KernelInputError) as no_q:
        eagle.draft_logits(deterministic)
    assert no_q.value.code == "SR928"
    assert torch.equal(generator.get_state(), state)  # nothing was drawn


def test_drafters_on_the_triton_path_draw_from_the_filtered_q(force_backend, monkeypatch):
    """Under the interpreter, with the Triton backend fixed at plan resolution: the drafters'
    q statistics come from `row_stats_triton`, and every sampled draft lies in the filtered q
    (top_k=3 here), every greedy one is the argmax."""
    import specreg.kernels.filtering as filtering
    from specreg.step.draft_sampling import filtered_q

    calls = []
    real = filtering.row_stats_triton

    def counted(*args, **kwargs):
        calls.append(args[1].numel())
        return real(*args, **kwargs)

    monkeypatch.setattr(filtering, "row_stats_triton", counted)
    force_backend("triton")
    dflash, eagle = _plan("dflash").drafter, _plan("eagle_tree").drafter
    assert dflash.backend == "triton" and eagle.backend == "triton"
    params = SamplingParams.of(2, temperature=[0.0, 1.0], top_k=[0, 3])
    logits = torch.randn(2, 3, CONFIG.vocab_size, generator=torch.Generator().manual_seed(2))
    drafts, rows = dflash.propose(logits, torch.zeros(2, dtype=torch.long), params=params,
                                  generator=torch.Generator().manual_seed(0), gamma=3)
    assert torch.equal(rows, logits.float())
    assert torch.equal(drafts[0], logits[0].argmax(-1))
    q = filtered_q(logits[1], params.select(torch.ones(3, dtype=torch.long)), torch.arange(3),
                   backend="torch")
    assert bool((q.gather(1, drafts[1][:, None]) > 0).all())
    draft = eagle.start(logits[:, 0], torch.zeros(2, 3), params=params,
                        generator=torch.Generator().manual_seed(0))
    children = draft.token_list[0]
    assert torch.equal(children[0], torch.topk(logits[0, 0], 4).indices)
    kept = set(torch.topk(logits[1, 0], 3).indices.tolist())
    assert set(children[1, :3].tolist()) == kept  # the 3 tokens q keeps come first
    assert calls == [1, 1, 1, 1]  # one sampled row per block position, then the tree's root
