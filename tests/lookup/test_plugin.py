"""The lookup plugin through specreg: names and aliases, every config problem at once, the
conformance kit, exactness through the reference loop and on replayed text. Suffix decoding
beside arctic-inference's own drafts: test_lookup_arctic_drafts.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from specreg_lookup.drafter import NgramDrafter, SuffixDrafter
from specreg_lookup.kernels.match_tree import build_tree
from specreg_lookup.kernels.tree_verify import verify_tree_sampling
from specreg_lookup.sizes import NgramOptions, SuffixOptions

from specreg import Registry
from specreg.errors import ConfigError
from specreg.testing import ToyConfig, ToyLM, check_algorithm, check_greedy, check_sampling
from specreg.testing.lossless import P_VALUE_THRESHOLD, chi_square_p_value
from specreg.testing.replay import ReplayTarget


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.load(allowlist=frozenset({"lookup"}), fresh=True)


def test_list_shows_both_with_the_frameworks_names():
    done = subprocess.run([sys.executable, "-m", "specreg", "list", "--json"],
                          capture_output=True, text=True, timeout=120)
    listing = {a["name"]: a for a in json.loads(done.stdout)["algorithms"]}
    assert listing["ngram"]["aliases"] == ["prompt_lookup"]
    assert listing["suffix"]["aliases"] == ["suffix_decoding"]
    assert {listing[n]["plugin"] for n in ("ngram", "suffix")} == {"lookup"}


def test_framework_spellings_resolve(registry):
    assert registry.get_algorithm("NGRAM").name == "ngram"  # SGLang's spelling
    assert registry.get_algorithm("suffix_decoding").name == "suffix"
    plan = registry.resolve({"algorithm": "ngram", "num_steps": 5, "draft_config": {
        "prompt_lookup_min": 2, "prompt_lookup_max": 4}})
    assert (plan.gamma, plan.config.num_draft_tokens) == (5, 6)
    assert repr(plan.drafter) == ("NgramDrafter(min_ngram=2, max_ngram=4, num_steps=5, "
                                  "proposals='chain')")
    suffix = registry.resolve({"algorithm": "suffix"})
    assert suffix.gamma == 24  # vLLM: num_speculative_tokens = suffix_decoding_max_tree_depth
    from specreg_lookup.verifier import LookupVerifier

    assert isinstance(plan.verifier, LookupVerifier)


def _codes(registry, config) -> list[tuple[str, str | None]]:
    return [(p.code, p.field) for p in registry.check(config) if p.is_error]


def test_every_ngram_problem_at_once(registry):
    bad = {"algorithm": "ngram", "num_steps": 3, "num_draft_tokens": 9, "draft_config": {
        "prompt_lookup_min": 0, "max_bfs_breadth": "wide", "proposals": "graph", "lookup": 3}}
    assert sorted(_codes(registry, bad)) == [
        ("SR490", "draft_config.max_bfs_breadth"), ("SR490", "draft_config.min_ngram"),
        ("SR490", "draft_config.proposals"), ("SR492", "draft_config.lookup"),
        ("SR494", "num_draft_tokens"),
    ]
    assert _codes(registry, {"algorithm": "ngram", "draft_config": {
        "prompt_lookup_min": 4, "prompt_lookup_max": 2}}) == [("SR491", "draft_config.min_ngram")]
    assert _codes(registry, {"algorithm": "ngram", "draft_config": {
        "max_ngram": 3, "prompt_lookup_max": 3}}) == [("SR492", "draft_config.prompt_lookup_max")]
    with pytest.raises(ConfigError) as caught:
        registry.resolve(bad)
    assert len(caught.value.problems) == 5


def test_every_suffix_problem_at_once(registry):
    bad = {"algorithm": "suffix", "num_steps": 30, "draft_config": {
        "suffix_decoding_max_tree_depth": 24, "suffix_decoding_min_token_prob": 1.5,
        "suffix_decoding_max_spec_factor": -1, "suffix_decoding_max_cached_requests": -2}}
    assert sorted(_codes(registry, bad)) == [
        ("SR490", "draft_config.max_cached_requests"), ("SR490", "draft_config.max_spec_factor"),
        ("SR490", "draft_config.min_token_prob"), ("SR493", "num_steps"),
    ]
    zero = {"algorithm": "suffix", "draft_config": {"max_tree_depth": 0}}
    assert ("SR490", "draft_config.max_tree_depth") in _codes(registry, zero)


@pytest.mark.parametrize("name", ["ngram", "suffix"])
def test_conformance_kit_passes(registry, name):
    report = check_algorithm(registry, name)
    assert report.failures == [] and len(report.checked) > 10


def _repetitive_prompts(b: int, length: int, vocab: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(3)
    motif = torch.randint(0, vocab, (b, 5), generator=gen)
    return motif.repeat(1, length // 5 + 1)[:, :length]


@pytest.mark.parametrize("name, draft_config", [
    ("ngram", {"prompt_lookup_min": 1, "prompt_lookup_max": 3}),
    ("suffix", {"max_tree_depth": 16}),
])
def test_greedy_through_the_reference_loop_equals_plain_greedy(registry, name, draft_config):
    plan = registry.resolve({"algorithm": name, "num_steps": 3, "draft_config": draft_config})
    target = ToyLM(ToyConfig(), seed=0)
    prompts = _repetitive_prompts(4, 20, target.config.vocab_size)
    proposals = plan.drafter.propose_lists(prompts, torch.full((4,), 20))
    assert all(proposals), proposals  # the check is not vacuous: every request drafts
    check = check_greedy(plan, target, target, prompts, 24)
    assert check.passed, check.first_mismatch


@pytest.mark.parametrize("name", ["ngram", "suffix"])
def test_sampling_through_the_reference_loop_is_lossless(registry, name):
    plan = registry.resolve({"algorithm": name, "num_steps": 3,
                             "draft_config": {"max_tree_depth": 8} if name == "suffix" else {}})
    target = ToyLM(ToyConfig(), seed=1)
    prompt = _repetitive_prompts(1, 12, target.config.vocab_size)[0]
    check = check_sampling(plan, target, target, prompt, samples=1500, seed=5)
    assert check.passed, check.p_values


def test_tree_sampling_is_exact_and_greedy_choice_is_not():
    """Target-only tree sampling: the first emitted token follows p at the root (chi-square),
    whatever the tree; a negative control (walking by argmax) fails the same test."""
    history = torch.tensor([[1, 2, 3, 1, 2, 4, 1, 2, 0, 1, 2]])
    tree = build_tree(history, torch.tensor([11]), min_ngram=1, max_ngram=2, breadth=4,
                      num_nodes=6)
    assert int(tree.num_nodes[0]) == 5
    samples, v = 3000, 5
    probs = torch.softmax(torch.randn(6, v, generator=torch.Generator().manual_seed(0)), -1)
    batch = LookupTreeBatch.expand(tree, samples)
    out = verify_tree_sampling(batch, probs.expand(samples, 6, v),
                               generator=torch.Generator().manual_seed(1))
    first = torch.bincount(out.output_tokens[:, 0], minlength=v)
    assert chi_square_p_value(first, probs[0].double()) > P_VALUE_THRESHOLD
    greedy_first = torch.bincount(probs[0].argmax().expand(samples), minlength=v)
    assert chi_square_p_value(greedy_first, probs[0].double()) < P_VALUE_THRESHOLD
    assert float(out.num_accepted.float().mean()) > 0  # the tree is walked, not bypassed


class LookupTreeBatch:
    @staticmethod
    def expand(tree, b):
        from specreg_lookup.kernels.match_tree import LookupTree

        return LookupTree(tokens=tree.tokens.expand(b, -1), parents=tree.parents.expand(b, -1),
                          valid=tree.valid.expand(b, -1), depth=tree.depth.expand(b, -1))


def _replay(drafter, verifier, stream: torch.Tensor, prompt_len: int, tree: bool) -> float:
    """Greedy generation against a ReplayTarget; asserts the output is the stream itself."""
    target = ReplayTarget(stream[None, :], vocab_size=int(stream.max()) + 1)
    history = stream[None, :].clone()
    length = prompt_len
    emitted = []
    while length < stream.numel() - drafter.gamma - 1:
        lengths = torch.tensor([length])
        if tree:
            t = drafter.propose_tree(history, lengths)
            logits = target.logits(length - 1 + t.depth)
            out = verifier.verify_tree_greedy(t, logits)
        else:
            drafts = drafter.propose(history, lengths)
            cands = torch.cat([history[:, length - 1 : length], drafts], 1)
            logits = target.logits(length - 1 + torch.arange(cands.shape[1])[None, :])
            out = verifier.verify_greedy(cands, logits)
        n = int(out.num_accepted[0]) + 1
        assert out.output_tokens[0, :n].tolist() == stream[length : length + n].tolist()
        emitted.append(n)
        length += n
    return sum(emitted) / len(emitted)


@pytest.mark.parametrize("tree", [False, True])
def test_replayed_text_is_reproduced_exactly(registry, tree):
    words = "the cat sat on the mat and the cat ran to the mat of the dog ".split() * 6
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    stream = torch.tensor([vocab[w] for w in words])
    proposals = "tree" if tree else "chain"
    ngram = registry.resolve({"algorithm": "ngram", "num_steps": 6, "draft_config": {
        "prompt_lookup_min": 1, "prompt_lookup_max": 3, "proposals": proposals}})
    suffix = registry.resolve({"algorithm": "suffix", "num_steps": 6, "draft_config": {
        "max_tree_depth": 16, "proposals": proposals}})
    for plan in (ngram, suffix):
        mean = _replay(plan.drafter, plan.verifier, stream, 8, tree)
        assert mean > 3.0, (plan.algorithm.name, mean)  # a repeating text is mostly accepted


def test_ngram_options_defaults_are_vllms():
    assert NgramOptions().min_ngram == NgramOptions().max_ngram == 5
    assert NgramDrafter().options.proposals == "chain"


def test_the_frameworks_option_spellings_reach_the_drafter(registry):
    """vLLM's speculative-config keys and SGLang's server fields, as each framework spells them."""
    vllm = registry.resolve({"method": "ngram", "num_speculative_tokens": 4,
                             "prompt_lookup_min": 2, "prompt_lookup_max": 3})
    assert (vllm.gamma, vllm.drafter.options.min_ngram, vllm.drafter.options.max_ngram) == (4, 2, 3)
    suffix = registry.resolve({"method": "suffix", "suffix_decoding_max_tree_depth": 12,
                               "suffix_decoding_min_token_prob": 0.2})
    assert suffix.gamma == 12 and suffix.drafter.options.min_token_prob == 0.2
    sglang = registry.resolve({"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 8,
                               "speculative_ngram_max_bfs_breadth": 4})
    assert (sglang.gamma, sglang.drafter.options.max_bfs_breadth) == (7, 4)
    (bad,) = registry.check(
        {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 0}
    )
    assert bad.code == "SR490" and "prompt_lookup_min=0" in bad.message  # the user's own key


def test_sglang_ngram_is_sglangs_breadth_first_tree(registry):
    """SGLang's NGRAM: a tree of 12 nodes by default (the root included), breadth 10, matches of
    any length up to the trie depth 18; steps and topk, which its worker never reads, are
    ignored with the notice SR185 (SGLang overwrites topk with the breadth)."""
    plan = registry.resolve({"speculative_algorithm": "NGRAM"})
    options = plan.drafter.options
    assert (plan.config.num_draft_tokens, plan.gamma, plan.config.topk) == (12, 11, 1)
    assert (options.proposals, options.min_ngram, options.max_ngram, options.max_bfs_breadth) == (
        "tree", 1, 18, 10)
    assert plan.config.notices == ()
    given = registry.resolve({"speculative_algorithm": "NGRAM", "speculative_num_steps": 2,
                              "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
                              "speculative_ngram_max_trie_depth": 4})
    assert (given.config.num_draft_tokens, given.gamma, given.drafter.options.max_ngram) == (8, 7, 4)
    assert [n.code for n in given.config.notices] == ["SR185"]
    # the chain is vLLM's ngram, unchanged
    assert registry.resolve({"algorithm": "ngram"}).drafter.options.proposals == "chain"


@pytest.mark.parametrize("name, draft_config", [
    ("ngram", {"prompt_lookup_min": 1, "prompt_lookup_max": 3, "proposals": "tree",
               "max_bfs_breadth": 4}),
    ("suffix", {"max_tree_depth": 16, "proposals": "tree"}),
])
def test_tree_proposals_through_the_reference_loop(registry, name, draft_config, monkeypatch):
    """Trees from the history go through the loop's tree step and the tree verifier: greedy
    equals plain greedy, sampling passes the chi-square checks, and the chain path is never
    taken (its `propose` raises)."""
    plan = registry.resolve({"algorithm": name, "num_steps": 5, "draft_config": draft_config})
    assert plan.drafter.proposes_trees

    def no_chain(*args, **kwargs):
        raise AssertionError("the chain path ran for a tree plan")

    monkeypatch.setattr(plan.drafter, "propose", no_chain)
    target = ToyLM(ToyConfig(), seed=0)
    prompts = _repetitive_prompts(4, 20, target.config.vocab_size)
    trees = plan.drafter.propose_tree(prompts, torch.full((4,), 20))
    assert bool((trees.num_nodes > 1).all()), trees.num_nodes  # real trees, not bare roots
    check = check_greedy(plan, target, target, prompts, 24)
    assert check.passed, check.first_mismatch
    assert check.result.mean_accepted_length > 1.0
    sampled = registry.resolve({"algorithm": name, "num_steps": 3, "draft_config": draft_config})
    monkeypatch.setattr(sampled.drafter, "propose", no_chain)
    prompt = _repetitive_prompts(1, 12, target.config.vocab_size)[0]
    lossless = check_sampling(sampled, ToyLM(ToyConfig(), seed=1), target, prompt, samples=1500,
                              seed=5)
    assert lossless.passed, lossless.p_values


@pytest.mark.parametrize("name, max_depth", [("ngram", "max_ngram"), ("suffix", "max_tree_depth")])
def test_conformance_kit_passes_with_tree_proposals(registry, name, max_depth):
    """The kit's widths, buffers, greedy and adaptive-candidate clauses with trees (a candidate
    verifies the breadth-first first slots of the tree); tree sampling's losslessness is
    test_tree_proposals_through_the_reference_loop's."""
    draft_config = {"proposals": "tree", max_depth: 3 if name == "ngram" else 16}
    report = check_algorithm(registry, name, base_config={"draft_config": draft_config},
                             lossless=False)
    assert report.failures == [] and len(report.checked) > 10


def test_the_suffix_request_api_refuses_unknown_ids_with_a_coded_value_error():
    """arctic-inference's SuffixDecodingCache raises ValueError for a request that is not
    active (and for starting one twice); so does SuffixDrafter, with SR495 and its fix."""
    from specreg_lookup.errors import RequestStateError

    drafter = SuffixDrafter(SuffixOptions(), num_steps=4)
    for call in (lambda: drafter.speculate("r1", [1, 2]),
                 lambda: drafter.add_active_response("r1", [3]),
                 lambda: drafter.stop_request("r1")):
        with pytest.raises(ValueError) as info:
            call()
        assert isinstance(info.value, RequestStateError) and info.value.code == "SR495"
        assert "not active" in str(info.value) and "start_request('r1', prompt)" in str(info.value)
    drafter.start_request("r1", [1, 2, 3])
    with pytest.raises(RequestStateError, match="already active"):
        drafter.start_request("r1", [1])
    drafter.stop_request("r1")
    assert drafter.active_requests == set()
