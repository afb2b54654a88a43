"""Every algorithm end to end on a real transformers model, through the reference loop.

The target is a small random Llama built from a config (seeded; nothing is downloaded,
`specreg.testing.transformers_models`). Each case pairs a config with the draft side its
drafter reads: a smaller Llama sharing the vocabulary (draft_model), random Medusa heads on the
target's hidden state (medusa), the target's hidden state through a perturbed LM head (EAGLE's
tree and chain, DSpark's and DFlash's block drafters), or nothing (model-free drafters such as
ngram and suffix, when installed). Greedy output must equal `model.generate` token for token;
sampled first and second tokens must follow the target's exact marginals (chi-square).
"""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from specreg import Registry  # noqa: E402
from specreg.testing.lossless import check_greedy, check_sampling  # noqa: E402
from specreg.testing.toy_model import greedy_reference  # noqa: E402
from specreg.testing.transformers_models import (  # noqa: E402
    CausalLM,
    DraftRunner,
    checkpoint_config,
    generate_greedy,
    tiny_llama,
    truncated_draft,
)

PROMPT_LEN, NUM_NEW, SAMPLES = 8, 24, 2000
#: Model-free drafters (other helpers' plugins): run when the registry has them.
MODEL_FREE = ("ngram", "suffix")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def registry():
    return Registry.load(fresh=True)


@pytest.fixture(scope="module")
def target_model():
    return tiny_llama(seed=0)


@pytest.fixture(scope="module")
def target(target_model):
    return CausalLM(target_model)


@pytest.fixture(scope="module")
def prompts():
    return torch.randint(0, 255, (3, PROMPT_LEN), generator=torch.Generator().manual_seed(0))


def _perturbed_head(model, *, seed: int, noise: float = 0.5) -> torch.nn.Linear:
    """The target's LM head plus seeded noise: a draft head over the target's hidden states."""
    weight = model.lm_head.weight
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    head.weight.data = weight + noise * weight.std() * torch.randn(weight.shape, generator=g)
    return head.requires_grad_(False)


def _medusa_heads(plan, model, *, seed: int):
    """Random Medusa heads initialised as Medusa does: each head's output layer is the target's
    LM head, its residual blocks small random maps (here seeded noise instead of zeros)."""
    torch.manual_seed(seed)
    heads = plan.drafter.make_heads(
        hidden_size=model.config.hidden_size, vocab_size=model.config.vocab_size
    )
    for out in heads.out:
        out.weight.data = model.lm_head.weight.clone()
    for blocks in heads.blocks:
        for block in blocks:
            block.weight.data.normal_(0.0, 0.05)
            block.bias.data.zero_()
    return heads.eval().requires_grad_(False)


def _folders(tmp_path_factory, target_model, draft_model):
    """The target's and the draft's checkpoint folders (config.json only), as a framework
    passes them: the plugin reads both vocabularies before any model loads."""
    root = tmp_path_factory.mktemp("checkpoints")
    paths = {}
    for name, model in (("target", target_model), ("draft", draft_model)):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(checkpoint_config(model)))
        paths[name] = str(root / name)
    return paths


def _block_checkpoint(model) -> dict:
    return {
        "architectures": ["DFlashDraftModel"], "vocab_size": model.config.vocab_size,
        "hidden_size": model.config.hidden_size, "num_hidden_layers": 1,
        "num_target_layers": model.config.num_hidden_layers, "target_layer_ids": [1],
        "block_size": 4, "mask_token_id": model.config.vocab_size - 1, "markov_rank": 8,
        "markov_head_type": "vanilla",
    }


CASES = ["draft_model", "medusa", "eagle tree", "eagle chain", "dspark", "dflash", *MODEL_FREE]


@pytest.fixture(scope="module")
def cases(registry, target_model, tmp_path_factory):
    """case -> (plan, the draft side), built once per module."""
    small = truncated_draft(target_model)
    folders = _folders(tmp_path_factory, target_model, small)
    hidden_draft = CausalLM(target_model, head=_perturbed_head(target_model, seed=1))
    configs = {
        "draft_model": ({
            "--speculative-algorithm": "STANDALONE", "--speculative-num-steps": 3,
            "--model-path": folders["target"],
            "--speculative-draft-model-path": folders["draft"],
        }, CausalLM(small)),
        "medusa": ({"algorithm": "medusa", "num_steps": 3, "topk": 2, "num_draft_tokens": 6}, None),
        "eagle tree": ({"algorithm": "eagle", "num_steps": 3, "topk": 2, "num_draft_tokens": 6},
                       hidden_draft),
        "eagle chain": ({"algorithm": "eagle", "num_steps": 3, "topk": 1}, hidden_draft),
        "dspark": ({"algorithm": "dspark", "draft_config": _block_checkpoint(target_model)},
                   hidden_draft),
        "dflash": ({"algorithm": "dflash", "draft_config": _block_checkpoint(target_model)},
                   hidden_draft),
    }
    names = {a.name for a in registry.algorithms()}
    for name in MODEL_FREE:
        if name in names:
            configs[name] = ({"algorithm": name, "num_draft_tokens": 4}, hidden_draft)
    built = {}
    for case, (config, draft) in configs.items():
        plan = registry.resolve(config)
        if case == "medusa":
            draft = CausalLM(target_model, heads=_medusa_heads(plan, target_model, seed=2))
        built[case] = (plan, draft)
    return built


def _case(cases, name):
    assert name in cases, f"built-in algorithm {name} is not registered"
    return cases[name]


def test_the_harness_forward_is_generate(target, target_model, prompts):
    """The adapter's full-context forward decodes exactly what `model.generate` does."""
    assert torch.equal(greedy_reference(target, prompts, NUM_NEW), generate_greedy(
        target_model, prompts, NUM_NEW
    ))


@pytest.mark.parametrize("name", CASES)
def test_greedy_equals_generate(cases, name, target, target_model, prompts):
    plan, draft = _case(cases, name)
    expected = generate_greedy(target_model, prompts, NUM_NEW)
    checked = check_greedy(plan, target, draft, prompts, NUM_NEW)
    assert torch.equal(checked.result.tokens, expected), f"first mismatch {checked.first_mismatch}"
    assert plan.drafter is not None  # the plugin drafted, not the toy model
    if name not in MODEL_FREE:  # drafts were accepted: the draft side really drafted
        assert checked.result.mean_accepted_length > 1.2, checked.result.mean_accepted_length


@pytest.mark.parametrize("name", CASES)
def test_sampling_is_lossless(cases, name, target, prompts):
    plan, draft = _case(cases, name)
    checked = check_sampling(plan, target, draft, prompts[0], samples=SAMPLES, seed=0)
    assert checked.passed, checked.p_values


@pytest.mark.parametrize("roll_back", [True, False], ids=["rolled back", "control: kept"])
def test_draft_kv_cache_rolls_back(registry, target_model, roll_back):
    """Over verify rounds with random acceptance, the draft model's batched KV cache, rolled
    back per request, drafts the q of a forward over the committed prefix alone; a cache that
    keeps the rejected drafts' KV (the negative control) drafts something else."""
    drafter = registry.resolve({"algorithm": "draft_model", "num_steps": 4}).drafter
    small = truncated_draft(target_model)
    g = torch.Generator().manual_seed(0)
    b, gamma = 3, drafter.gamma
    history = torch.randint(0, 255, (b, 80), generator=g)
    lengths = torch.full((b,), PROMPT_LEN)
    runner = DraftRunner(small, b, roll_back=roll_back)
    cache_lens = torch.zeros(b, dtype=torch.long)
    matched = []
    for round_ in range(6):
        draft = drafter.draft(runner, history, lengths, cache_lens, temperature=1.0,
                              generator=torch.Generator().manual_seed(round_))
        fresh = drafter.draft(DraftRunner(small, b), history, lengths, torch.zeros_like(lengths),
                              temperature=1.0, generator=torch.Generator().manual_seed(round_))
        matched.append(torch.allclose(draft.q, fresh.q, atol=1e-5))
        accepted = torch.randint(0, gamma, (b,), generator=g)  # a rejection in every request
        cols = lengths[:, None] + torch.arange(gamma)[None, :]
        keep = torch.arange(gamma)[None, :] < accepted[:, None]
        history[torch.arange(b)[:, None].expand_as(cols)[keep], cols[keep]] = draft.tokens[keep]
        cache_lens = drafter.rollback(lengths, accepted)
        lengths = lengths + accepted + 1
    assert all(matched) if roll_back else not any(matched[1:]), matched
