"""The toy model's induction head (`ToyConfig.copy_bonus`) and the demo text it makes: the token
that followed the current token's last occurrence gains the bonus, so the demo's text repeats
and every history drafter accepts well above nothing, each by its own measure."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specreg import Registry
from specreg.cli.demo import DEMO_CHAIN_WIDTH, demo_models, demo_prompts
from specreg.testing.lossless import check_greedy
from specreg.testing.toy_model import ToyConfig, ToyLM

ROOT = Path(__file__).parents[2]


def test_copy_votes_name_the_token_after_the_last_occurrence():
    toy = ToyLM(ToyConfig(copy_bonus=5.0), seed=0)
    windows = torch.full((3, toy.config.window), -1, dtype=torch.long)
    windows[0, :5] = torch.tensor([7, 4, 7, 9, 7])  # newest first: ... 7 9 7 4 7 -> 4 followed 7
    windows[1, :3] = torch.tensor([7, 7, 3])        # 3 7 7 -> 7 followed 7
    windows[2, :3] = torch.tensor([1, 2, 3])        # 1 never occurred before: no vote
    votes = toy.copy_votes(windows)
    assert votes.sum(1).tolist() == [1.0, 1.0, 0.0]
    assert int(votes[0].argmax()) == 4 and int(votes[1].argmax()) == 7


def test_the_bonus_is_added_to_the_logits_and_off_by_default():
    plain, copying = ToyLM(ToyConfig(), seed=0), ToyLM(ToyConfig(copy_bonus=5.0), seed=0)
    seqs = torch.tensor([[5, 6, 5]])
    lengths = torch.tensor([3])
    gained = copying.next_logits(seqs, lengths) - plain.next_logits(seqs, lengths)
    assert torch.allclose(gained[0, 6], torch.tensor(5.0)) and gained[0, :6].abs().max() < 1e-5
    assert ToyConfig().copy_bonus == 0.0


@pytest.fixture(scope="module")
def registry():
    import sys

    sys.path.insert(0, str(ROOT / "examples" / "specreg-ngram"))
    try:
        import specreg_ngram.plugin
    finally:
        sys.path.pop(0)
    found = Registry.load(fresh=True)
    if "ngram_example" not in {a.name for a in found.algorithms()}:
        found.register_plugin(specreg_ngram.plugin, "ngram_example")
    return found


def test_history_drafters_accept_well_above_nothing_and_differ(registry):
    target, draft = demo_models(0)
    prompts = demo_prompts(target.config, 0)
    rates = {}
    for name in ("ngram", "suffix", "ngram_example"):
        plan = registry.resolve({"algorithm": name, "num_draft_tokens": DEMO_CHAIN_WIDTH})
        checked = check_greedy(plan, target, draft, prompts, 48)
        assert checked.passed, name
        rates[name] = round(checked.result.acceptance.acceptance_rate, 3)
    assert min(rates.values()) > 0.2, rates
    assert len(set(rates.values())) == len(rates), rates
