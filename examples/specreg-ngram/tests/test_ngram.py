"""Unit tests of the ngram plugin: the drafter's lookup rules and the plugin's hooks."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from specreg import ConfigError, KernelInputError, Registry, SpecConfig

import specreg_ngram.plugin as ngram_plugin
from specreg_ngram import NgramDrafter


def lookup(drafter: NgramDrafter, *rows: list[int]):
    match = drafter.lookup([torch.tensor(r) for r in rows])
    return match.tokens.tolist(), match.ngram_len.tolist()


def naive_propose(history: list[int], max_ngram: int, min_ngram: int, gamma: int) -> list[int]:
    """The documented rules, one request at a time."""
    length = len(history)
    for k in range(max_ngram, min_ngram - 1, -1):
        suffix = history[length - k :] if length >= k else None
        starts = [j for j in range(length - k) if history[j : j + k] == suffix]
        if suffix is not None and starts:
            start = starts[-1] + k
            break
    else:
        start = length - 1
    ext = list(history)
    for i in range(gamma):
        ext.append(ext[start + i])
    return ext[length:]


# ------------------------------------------------------------------------------------ drafter
def test_match_proposes_the_continuation():
    drafter = NgramDrafter(max_ngram=2, min_ngram=1, num_draft_tokens=4)
    tokens, ngram = lookup(drafter, [7, 8, 9, 10, 11, 3, 7, 8])
    assert tokens == [[9, 10, 11]] and ngram == [2]


def test_longest_ngram_is_preferred_over_a_more_recent_shorter_match():
    # "5 6" occurs at 0 (followed by 1 2) and "6" alone later (followed by 9).
    drafter = NgramDrafter(max_ngram=3, min_ngram=1, num_draft_tokens=3)
    tokens, ngram = lookup(drafter, [5, 6, 1, 2, 6, 9, 5, 6])
    assert tokens == [[1, 2]] and ngram == [2]
    shorter_only = NgramDrafter(max_ngram=1, min_ngram=1, num_draft_tokens=3)
    tokens, ngram = lookup(shorter_only, [5, 6, 1, 2, 6, 9, 5, 6])
    assert tokens == [[9, 5]] and ngram == [1]


def test_most_recent_match_is_preferred():
    drafter = NgramDrafter(max_ngram=2, min_ngram=2, num_draft_tokens=3)
    tokens, _ = lookup(drafter, [1, 2, 3, 4, 1, 2, 5, 6, 0, 1, 2])
    assert tokens == [[5, 6]]


def test_continuation_reaching_the_end_repeats_periodically():
    drafter = NgramDrafter(max_ngram=3, min_ngram=1, num_draft_tokens=6)
    tokens, ngram = lookup(drafter, [4, 1, 2, 1, 2, 1])
    assert tokens == [[2, 1, 2, 1, 2]] and ngram == [3]


def test_fallback_repeats_the_last_token():
    drafter = NgramDrafter(max_ngram=3, min_ngram=1, num_draft_tokens=4)
    tokens, ngram = lookup(drafter, [1, 2, 3], [9])
    assert tokens == [[3, 3, 3], [9, 9, 9]] and ngram == [0, 0]
    at_least_two = NgramDrafter(max_ngram=3, min_ngram=2, num_draft_tokens=3)
    tokens, ngram = lookup(at_least_two, [1, 4, 2, 4])  # only a 1-gram would match
    assert tokens == [[4, 4]] and ngram == [0]


def test_padded_input_matches_list_input_and_ignores_padding():
    rows = [[1, 2, 3, 1, 2], [8, 8], [3, 1, 3, 1, 3, 1, 3]]
    drafter = NgramDrafter(max_ngram=2, num_draft_tokens=4)
    from_list = drafter.propose([torch.tensor(r) for r in rows])
    padded = torch.full((3, 9), 1, dtype=torch.int32)  # padding value that would match
    for i, row in enumerate(rows):
        padded[i, : len(row)] = torch.tensor(row)
    lengths = torch.tensor([len(r) for r in rows])
    assert torch.equal(drafter.propose(padded, lengths), from_list)
    assert from_list.dtype == torch.int64 and from_list.shape == (3, 3)


def test_batched_lookup_follows_the_documented_rules():
    generator = torch.Generator().manual_seed(0)
    for max_ngram, min_ngram, n in ((3, 1, 5), (4, 2, 3), (1, 1, 8)):
        drafter = NgramDrafter(max_ngram=max_ngram, min_ngram=min_ngram, num_draft_tokens=n)
        rows = [
            torch.randint(
                0, 4, (int(torch.randint(1, 30, (1,), generator=generator)),), generator=generator
            )
            for _ in range(40)
        ]
        got = drafter.propose(rows).tolist()
        want = [naive_propose(r.tolist(), max_ngram, min_ngram, n - 1) for r in rows]
        assert got == want


def test_invalid_lengths_and_shapes_are_reported():
    drafter = NgramDrafter()
    with pytest.raises(KernelInputError) as info:
        drafter.propose(torch.zeros(2, 4, dtype=torch.long), torch.tensor([4, 0]))
    assert info.value.code == "SR903"
    with pytest.raises(KernelInputError) as info:
        drafter.propose(torch.zeros(2, 4, dtype=torch.long), torch.tensor([4, 5]))
    assert info.value.code == "SR903"
    with pytest.raises(KernelInputError) as info:
        drafter.propose(torch.zeros(2, 4))
    assert info.value.code == "SR901"
    with pytest.raises(KernelInputError) as info:
        drafter.propose([])
    assert info.value.code == "SR900"
    with pytest.raises(KernelInputError) as info:
        drafter.propose([torch.tensor([1, 2])], torch.tensor([2]))
    assert info.value.code == "SR900"


def test_constructor_rejects_bad_ranges_all_at_once():
    with pytest.raises(ConfigError) as info:
        NgramDrafter(max_ngram=0, min_ngram=True, num_draft_tokens=1)
    assert info.value.codes == ("SR103", "SR104", "SR103")
    with pytest.raises(ConfigError, match="min_ngram=3 is larger than max_ngram=2"):
        NgramDrafter(max_ngram=2, min_ngram=3)


# ------------------------------------------------------------------------------------- hooks
@pytest.fixture
def registry() -> Registry:
    registry = Registry(strict=True)
    registry.register_plugin(ngram_plugin, "ngram_example", distribution="specreg-ngram", version="0.1.0")
    return registry


def test_registered_capabilities(registry):
    spec = registry.get_algorithm("prompt_lookup_example")
    assert spec.name == "ngram_example" and spec.drafting == "chain"
    assert spec.verify_rules == ("greedy", "chain_sampling")
    assert spec.owns_draft_kv is False and spec.uses_target_hidden_states is False
    assert spec.origin.distribution == "specreg-ngram"


@pytest.mark.parametrize(
    ("given", "steps", "draft_tokens"),
    [({}, 3, 4), ({"num_steps": 5}, 5, 6), ({"num_draft_tokens": 3}, 2, 3)],
)
def test_chain_parameters_are_inferred_from_each_other(registry, given, steps, draft_tokens):
    plan = registry.resolve({"algorithm": "ngram_example", **given})
    assert (plan.config.num_steps, plan.config.topk) == (steps, 1)
    assert plan.config.num_draft_tokens == draft_tokens
    assert plan.gamma == draft_tokens - 1
    assert plan.num_tokens_per_req("target_verify") == draft_tokens
    assert plan.num_tokens_per_req("draft_decode") == 1
    drafter = NgramDrafter.from_plan(plan)
    assert drafter.gamma == plan.gamma


def test_plan_states_the_memory_a_lookup_allocates(registry):
    plan = registry.resolve({"algorithm": "ngram_example", "num_draft_tokens": 5})
    memory = plan.memory()
    assert memory.unstated == ()
    assert {b.owner for b in memory.buffers} == {"verifier", "drafter"}
    match = plan.drafter.lookup([torch.tensor([1, 2, 3, 1, 2]), torch.tensor([4, 4])])
    found = sum(t.numel() * t.element_size() for t in (match.tokens, match.ngram_len, match.start))
    stated = [b for b in memory.buffers if b.owner == "drafter"]
    assert all(b.per == "per request" for b in stated)
    assert sum(b.device_bytes for b in stated) * 2 == found


def test_inconsistent_and_out_of_range_parameters_are_reported(registry):
    problems = registry.check({"algorithm": "ngram_example", "num_steps": 3, "num_draft_tokens": 6})
    assert [p.code for p in problems] == ["SR501"]  # the plugin's own catalog code
    assert "num_draft_tokens = num_steps + 1 = 4" in problems[0].message
    problems = registry.check({"algorithm": "ngram_example", "num_steps": 0, "topk": 2})
    assert sorted(p.field for p in problems) == ["num_steps", "topk"]
    assert registry.check(SpecConfig(algorithm="ngram_example", num_draft_tokens=32)) == []


def test_other_algorithms_are_left_to_their_plugins():
    from specreg import AlgorithmSpec

    other = AlgorithmSpec(name="other", drafting="chain", verify_rules=("greedy",))
    config = SpecConfig(algorithm="other", num_steps=3, num_draft_tokens=9)
    assert ngram_plugin.specreg_resolve_config(config=config, algorithm=other) is None
    assert ngram_plugin.specreg_validate_config(config=config, algorithm=other) == []


def test_plugin_import_does_not_import_torch():
    code = "import specreg_ngram, specreg_ngram.plugin, sys; assert 'torch' not in sys.modules"
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=ngram_plugin.__file__[: -len("specreg_ngram/plugin.py")],
    )


# ------------------------------------------------------------------------- a generation loop
VOCAB = 11


def toy_next(prev2: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """The toy target's greedy choice: a fixed function of the two previous tokens."""
    return (3 * prev + prev2 + 1) % VOCAB


def toy_target_logits(histories: list[torch.Tensor], candidates: torch.Tensor) -> torch.Tensor:
    """[b, n, V] logits; row i scores the token following candidates[:, i]."""
    before_anchor = torch.stack([h[-2] for h in histories])
    prev2 = torch.cat([before_anchor[:, None], candidates[:, :-1]], dim=1)
    favourite = toy_next(prev2, candidates)
    return torch.nn.functional.one_hot(favourite, VOCAB).float() * 4.0


def speculative_generate(plan, drafter, prompts, max_new_tokens):
    """The loop the README describes: draft, verify greedily, commit accepted drafts + bonus."""
    histories = [p.clone() for p in prompts]
    forward_passes = 0
    while min(len(h) - len(p) for h, p in zip(histories, prompts, strict=True)) < max_new_tokens:
        drafts = drafter.propose(histories)  # [b, gamma]
        anchors = torch.stack([h[-1] for h in histories])  # the last committed tokens
        candidates = torch.cat([anchors[:, None], drafts], dim=1)  # [b, n]
        result = plan.verifier.verify_greedy(candidates, toy_target_logits(histories, candidates))
        forward_passes += 1
        emitted = result.num_emitted.tolist() if hasattr(result, "num_emitted") else None
        for r in range(len(histories)):
            count = int(result.accept_len[r]) + 1
            assert emitted is None or emitted[r] == count
            histories[r] = torch.cat([histories[r], result.output_tokens[r, :count]])
    outputs = [h[len(p) : len(p) + max_new_tokens] for h, p in zip(histories, prompts, strict=True)]
    return outputs, forward_passes


def plain_greedy(prompt: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    tokens = prompt.tolist()
    for _ in range(max_new_tokens):
        tokens.append(int(toy_next(torch.tensor(tokens[-2]), torch.tensor(tokens[-1]))))
    return torch.tensor(tokens[len(prompt) :])


def test_generation_loop_reproduces_greedy_decoding_with_fewer_passes(registry):
    plan = registry.resolve({"algorithm": "ngram_example", "num_draft_tokens": 5})
    drafter = NgramDrafter.from_plan(plan, max_ngram=3)
    prompts = [torch.tensor([1, 2, 3]), torch.tensor([4, 0, 7, 7, 2]), torch.tensor([5, 5])]
    outputs, passes = speculative_generate(plan, drafter, prompts, max_new_tokens=40)
    for prompt, output in zip(prompts, outputs, strict=True):
        assert torch.equal(output, plain_greedy(prompt, 40))
    # The toy target's output is periodic, so prompt lookup finds it: far fewer target passes.
    assert passes < 40 // 2
