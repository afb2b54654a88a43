"""The standalone draft-model plugin: names, bad input before any model loads, the drafter's
catch-up, sampling and rollback (against a draft forward over the whole committed prefix)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from specreg import ConfigError, KernelInputError, Registry
from specreg.testing.draft_model_step import ToyDraftRunner
from specreg.testing.toy_model import ToyConfig, ToyLM


@pytest.fixture(scope="module")
def registry():
    return Registry.load(allowlist={"draft_model"}, fresh=True)


def _folder(tmp_path, name, **config):
    (tmp_path / name).mkdir()
    (tmp_path / name / "config.json").write_text(json.dumps(config))
    return str(tmp_path / name)


def test_framework_names_are_aliases(registry):
    for name in ("draft_model", "STANDALONE", "draft_target"):
        assert registry.get_algorithm(name).name == "draft_model"
    plan = registry.resolve({"method": "draft_model", "num_speculative_tokens": 5})
    assert (plan.config.num_steps, plan.config.num_draft_tokens, plan.gamma) == (5, 6, 5)
    from specreg_draft_model.drafter import DraftModelDrafter

    assert isinstance(plan.drafter, DraftModelDrafter)
    assert type(plan.verifier).__name__ == "ChainVerifier"


def test_specreg_list_shows_the_four_new_algorithms_with_their_aliases():
    """`specreg list` (a real subprocess): ngram, suffix, draft_model and medusa, each from its
    built-in plugin, with the frameworks' names as aliases."""
    done = subprocess.run([sys.executable, "-m", "specreg", "list", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listing = {a["name"]: a for a in json.loads(done.stdout)["algorithms"]}
    want = {"ngram": (["prompt_lookup"], "lookup"), "suffix": (["suffix_decoding"], "lookup"),
            "draft_model": (["standalone", "draft_target"], "draft_model"),
            "medusa": ([], "medusa")}
    for name, (aliases, plugin) in want.items():
        assert (listing[name]["aliases"], listing[name]["plugin"]) == (aliases, plugin), name


def test_every_problem_at_once_before_any_model_loads(registry, tmp_path):
    """A draft of another vocabulary and an inconsistent chain, both reported from the
    config.json files alone."""
    flags = {
        "algorithm": "draft_model", "num_steps": 3, "num_draft_tokens": 6,
        "--model-path": _folder(tmp_path, "target", vocab_size=32000),
        "--speculative-draft-model-path": _folder(tmp_path, "draft", vocab_size=151936),
    }
    codes = [p.code for p in registry.check(flags) if p.is_error]
    assert sorted(codes) == ["SR470", "SR472"]
    with pytest.raises(ConfigError) as caught:
        registry.resolve(flags)
    message = str(caught.value)
    assert "151936 differs from the target's 32000" in message
    assert "--speculative-draft-model-path" in message


def test_sglang_standalone_chain_takes_sglangs_rewrite(registry, tmp_path):
    """SGLang runs STANDALONE on its EAGLE worker: with topk 1 (or unset) it rewrites the draft
    tokens to steps + 1, so specreg adopts the same value with the notice SR162 (not SR472)."""
    flags = {
        "--speculative-algorithm": "STANDALONE", "--speculative-num-steps": 3,
        "--speculative-num-draft-tokens": 6,
        "--model-path": _folder(tmp_path, "target", vocab_size=32000),
        "--speculative-draft-model-path": _folder(tmp_path, "draft", vocab_size=32000),
    }
    plan = registry.resolve(flags)
    assert (plan.config.num_steps, plan.config.topk, plan.config.num_draft_tokens) == (3, 1, 4)
    assert [n.code for n in plan.config.notices] == ["SR162"]
    defaults = registry.resolve({k: v for k, v in flags.items() if "num" not in k})
    assert (defaults.config.num_steps, defaults.config.num_draft_tokens) == (3, 4)  # SGLang's


def test_draft_without_a_vocabulary_names_the_vllm_key(registry, tmp_path):
    config = {"method": "draft_model", "num_speculative_tokens": 3,
              "model": _folder(tmp_path, "draft", architectures=["LlamaForCausalLM"])}
    [found] = [p for p in registry.check(config) if p.is_error]
    assert found.code == "SR471" and "speculative config's 'model'" in found.fix


def test_same_vocabulary_resolves(registry, tmp_path):
    plan = registry.resolve({
        "--speculative-algorithm": "standalone",
        "--model-path": _folder(tmp_path, "target", vocab_size=96),
        "--speculative-draft-model-path": _folder(tmp_path, "draft", text_config={"vocab_size": 96}),
    })
    assert plan.drafter.vocab_size == 96 and plan.gamma == 3
    from specreg_draft_model.checkpoint import vocab_size_of

    assert vocab_size_of({"text_config": {"vocab_size": 96}}) == (96, "text_config.vocab_size")


def test_cli_check_and_explain(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "specreg", "check", "--speculative-algorithm", "STANDALONE",
         "--model-path", _folder(tmp_path, "target", vocab_size=100),
         "--speculative-draft-model-path", _folder(tmp_path, "draft", vocab_size=200)],
        capture_output=True, text=True,
    )
    assert result.returncode == 1 and "SR470" in result.stdout
    explained = subprocess.run(
        [sys.executable, "-m", "specreg", "explain", "SR470"], capture_output=True, text=True
    )
    assert explained.returncode == 0 and "vocabulary differs" in explained.stdout


# ------------------------------------------------------------------------------ the drafter
TOY = ToyConfig()


@pytest.fixture(scope="module")
def drafter(registry):
    return registry.resolve({"algorithm": "draft_model", "num_steps": 4}).drafter


def _fresh_q(drafter, model, history, lengths, seed):
    """The drafts' q recomputed with an empty draft cache (every committed token fed again)."""
    runner = ToyDraftRunner(model, history.shape[0], history.shape[1] + drafter.gamma + 1)
    g = torch.Generator().manual_seed(seed)
    zeros = torch.zeros_like(lengths)
    return drafter.draft(runner, history, lengths, zeros, temperature=1.0, generator=g)


class CountingRunner(ToyDraftRunner):
    """Records how many tokens each catch-up fed."""

    def __init__(self, *args):
        super().__init__(*args)
        self.fed: list[int] = []

    def __call__(self, tokens, start, counts):
        self.fed.append(int(counts.max()))
        return super().__call__(tokens, start, counts)


def test_rolled_back_cache_drafts_as_a_fresh_forward(drafter):
    """Across verify rounds with random acceptance, drafting from the rolled-back cache gives
    the drafts and q of a draft forward over the committed prefix alone, and each catch-up
    after the prompt feeds one token (two after a fully accepted chain). The transformers
    harness holds its KV cache to the same, with a negative control
    (tests/models/test_transformers.py)."""
    model = ToyLM(TOY, seed=3)
    g = torch.Generator().manual_seed(0)
    b, capacity = 4, 80
    history = torch.randint(0, TOY.vocab_size, (b, capacity), generator=g)
    lengths = torch.full((b,), 6)
    runner = CountingRunner(model, b, capacity + drafter.gamma + 1)
    cache_lens = torch.zeros(b, dtype=torch.long)
    catch_ups = []
    for round_ in range(8):
        runner.fed.clear()
        draft = drafter.draft(
            runner, history, lengths, cache_lens, temperature=1.0,
            generator=torch.Generator().manual_seed(round_),
        )
        catch_ups.append(runner.fed[0])
        fresh = _fresh_q(drafter, model, history, lengths, round_)
        assert torch.equal(draft.tokens, fresh.tokens) and torch.allclose(draft.q, fresh.q)
        accepted = torch.randint(0, drafter.gamma + 1, (b,), generator=g)
        accepted[round_ % b] = drafter.gamma  # a fully accepted chain every round
        cols = lengths[:, None] + torch.arange(drafter.gamma)[None, :]
        keep = torch.arange(drafter.gamma)[None, :] < accepted[:, None]
        history[torch.arange(b)[:, None].expand_as(cols)[keep], cols[keep]] = draft.tokens[keep]
        cache_lens = drafter.rollback(lengths, accepted)
        lengths = lengths + accepted + 1  # the accepted drafts, then the bonus (random here)
    assert catch_ups[0] == 6 and set(catch_ups[1:]) == {2}


def test_rollback_keeps_the_fed_accepted_drafts(drafter):
    lengths = torch.tensor([10, 10, 10, 10])
    accepted = torch.tensor([-1, 0, 2, 4])  # -1: the request committed nothing
    assert drafter.rollback(lengths, accepted).tolist() == [9, 10, 12, 13]


def test_greedy_drafts_follow_the_draft_model(drafter):
    model = ToyLM(TOY, seed=5)
    history = torch.randint(0, TOY.vocab_size, (2, 30), generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([12, 20])
    drafts = drafter.propose(history, lengths, model=ToyDraftRunner(model, 2, 40))
    seqs = history.clone()
    for j in range(drafter.gamma):
        seqs[torch.arange(2), lengths + j] = model.next_logits(seqs, lengths + j).argmax(-1)
    assert torch.equal(drafts, seqs[torch.arange(2)[:, None], lengths[:, None] + torch.arange(4)])


def test_bad_run_time_inputs_are_coded(drafter):
    model = ToyLM(TOY, seed=5)
    history = torch.zeros(2, 30, dtype=torch.long)
    with pytest.raises(KernelInputError, match="SR473"):
        drafter.propose(history, torch.tensor([5, 6]))  # no draft model
    runner = ToyDraftRunner(model, 2, 40)
    with pytest.raises(KernelInputError, match="SR473"):
        drafter.draft(runner, history, torch.tensor([5, 6]), torch.tensor([0, 7]))
    with pytest.raises(KernelInputError, match="SR473"):
        drafter.draft(runner, history, torch.tensor([5, 6]), torch.tensor([0, 0]), gamma=9)


def test_conformance_kit_passes(registry):
    """The kit's contract (widths, buffers, greedy == plain greedy, lossless sampling with the
    draft's q, adaptive candidates) through the toy draft runner."""
    from specreg.testing import check_algorithm

    report = check_algorithm(registry, "draft_model", samples=1000)
    assert report.failures == [] and len(report.checked) > 10
