"""ngram and suffix under vLLM's custom_class: the proposer called as vLLM 0.33's GPU model runner
calls propose()."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from specreg_lookup.kernels.ngram_match.reference import propose_row

from specreg import Registry
from specreg.adapters.vllm_proposers import proposer_class
from specreg.errors import PluginError


def _vllm_config(k: int) -> SimpleNamespace:
    return SimpleNamespace(speculative_config=SimpleNamespace(num_speculative_tokens=k))


def _token_ids_cpu(histories: list[list[int]], width: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """vLLM's persistent-batch buffers: token_ids_cpu int32 [max_reqs, max_len], and
    num_tokens_no_spec [max_reqs]; padding past a request's tokens holds stale values."""
    ids = np.full((len(histories), width), 77, dtype=np.int32)
    for i, h in enumerate(histories):
        ids[i, : len(h)] = h
    return ids, np.array([len(h) for h in histories], dtype=np.int32)


def test_ngram_proposes_vllms_drafts_and_nothing_on_no_match():
    registry = Registry.load(allowlist=frozenset({"lookup"}), fresh=True)
    proposer = proposer_class("ngram")(_vllm_config(3), registry=registry)
    histories = [[1, 2, 3, 4, 5, 8, 9, 1, 2, 3, 4, 5], [7, 7], [1, 2, 3, 4], [1, 2, 3, 4, 5, 6]]
    ids, lens = _token_ids_cpu(histories)
    drafts = proposer.propose([[5], [], [4], [6]], lens, ids, slot_mappings=None)
    # vLLM's defaults prompt_lookup_min = max = 5: the earliest 5-gram match, then k tokens
    assert drafts == [[8, 9, 1], [], [], []]
    assert drafts == [propose_row(h, 5, 5, 3) if s else [] for h, s in
                      zip(histories, [[5], [], [4], [6]], strict=True)]


def test_suffix_drafts_per_request_and_learns_from_earlier_responses():
    registry = Registry.load(allowlist=frozenset({"lookup"}), fresh=True)
    proposer = proposer_class("suffix")(_vllm_config(4), registry=registry)
    first = [9, 1, 2, 3, 4, 5, 6, 1, 2, 3]
    ids, lens = _token_ids_cpu([first])
    # "1 2 3" was followed by "4 5 6": the request's own tree proposes it; a match of 3 tokens
    # allows max_spec_factor * 3 = 3 drafts (k = 4 is the cap)
    assert proposer.propose([[3]], lens, ids) == [[4, 5, 6]]
    # the next step's tokens extend the request: a 5-token match now, so the full k = 4
    grown = [*first, 4, 5]
    ids, lens = _token_ids_cpu([grown])
    assert proposer.propose([[4, 5]], lens, ids) == [[6, 1, 2, 3]]
    grown += [6, 7]
    ids, lens = _token_ids_cpu([grown])
    proposer.propose([[6, 7]], lens, ids)
    # a new request in the same row: its own text has no match, but the earlier response
    # (4 5 6 7, in the global tree) does: "4 5" is followed by "6 7"
    ids, lens = _token_ids_cpu([[8, 8, 4, 5]])
    assert proposer.propose([[5]], lens, ids) == [[6, 7]]


# ------------------------------------------------------------- what a drafter declares it needs
class _Drafter:
    def __init__(self, gamma: int) -> None:
        self.gamma = gamma

    def propose(self, history, lengths):
        return history[:, -1:].repeat(1, self.gamma)


def _declaring(needs: object, *, hidden: bool = False) -> Registry:
    """A registry whose one algorithm 'toy' builds a chain drafter declaring `needs`
    (`_UNSET`: no declaration)."""
    from specreg import AlgorithmSpec, ParamRange, hookimpl

    kind = type("ToyDrafter", (_Drafter,), {} if needs is _UNSET else {"needs": needs})

    class Toy:
        @hookimpl
        def specreg_register_algorithms(self, register):
            register(AlgorithmSpec(name="toy", drafting="chain", verify_rules=("greedy",),
                                   uses_target_hidden_states=hidden,
                                   num_draft_tokens=ParamRange(2, 8, 4)))

        @hookimpl
        def specreg_make_drafter(self, config, algorithm):
            return kind(config.num_draft_tokens - 1) if algorithm.name == "toy" else None

    registry = Registry()
    registry.register_plugin(Toy(), "toy")
    return registry


_UNSET = object()


def test_every_built_in_drafter_declares_what_it_needs():
    from specreg.contract.protocols import DRAFTER_NEEDS

    registry = Registry.load(fresh=True)
    seen = {}
    for name, config in (("ngram", {}), ("suffix", {}), ("eagle", {"num_steps": 3, "topk": 1}),
                         ("medusa", {"num_steps": 3, "topk": 1})):
        plan = registry.resolve({"algorithm": name, **config})
        seen[name] = plan.drafter.needs
    assert set(seen.values()) <= set(DRAFTER_NEEDS)
    assert seen == {"ngram": "token_history", "suffix": "token_history",
                    "eagle": "target_hidden_states", "medusa": "target_hidden_states"}


def test_a_token_history_drafter_of_a_third_party_runs_under_custom_class():
    proposer = proposer_class("toy")(_vllm_config(3), registry=_declaring("token_history"))
    ids, lens = _token_ids_cpu([[4, 5, 6]])
    assert proposer.propose([[6]], lens, ids) == [[6, 6, 6]]


def test_a_drafter_needing_more_than_token_ids_is_refused_naming_the_seam():
    for needs, words in (("target_hidden_states", "hidden states"), ("draft_model", "draft model")):
        with pytest.raises(PluginError) as info:
            proposer_class("toy")(_vllm_config(3), registry=_declaring(needs))
        message = str(info.value)
        assert "SR175" in message and "custom_class seam" in message and words in message


def test_an_undeclared_or_unknown_need_is_the_plugins_error():
    cases = ((_UNSET, "declares no `needs`"), ("tokens", "needs='tokens'"),
             ("token_history", "uses_target_hidden_states=True"))
    for needs, words in cases:
        registry = _declaring(needs, hidden=words.startswith("uses_"))
        with pytest.raises(PluginError) as info:
            proposer_class("toy")(_vllm_config(3), registry=registry)
        message = str(info.value)
        assert "SR190" in message and words in message and "needs = 'token_history'" in message


def test_suffix_takes_vllms_suffix_decoding_options():
    """Under custom_class vLLM still carries suffix_decoding_* in the speculative config."""
    registry = Registry.load(allowlist=frozenset({"lookup"}), fresh=True)
    config = _vllm_config(2)
    config.speculative_config.suffix_decoding_max_tree_depth = 6
    config.speculative_config.suffix_decoding_min_token_prob = 0.5
    drafter = proposer_class("suffix")(config, registry=registry).drafter
    assert (drafter.options.max_tree_depth, drafter.options.min_token_prob) == (6, 0.5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_ngram_reads_vllms_rows_in_place_with_the_drafts_of_a_copy(dtype):
    """The ngram drafter declares reads_within_lengths: the proposer hands it a view of
    token_ids_cpu (stale tokens past each length, rows 0..n-1) or one gather of the decoding
    rows, never the zero-padded int64 copy, and drafts exactly what the copy and vLLM's rule
    give."""
    from specreg.contract.protocols import reads_within_lengths

    registry = Registry.load(allowlist=frozenset({"lookup"}), fresh=True)
    config = SimpleNamespace(speculative_config=SimpleNamespace(num_speculative_tokens=3),
                             model_config=SimpleNamespace(max_model_len=40))
    draft = {"min_ngram": 1, "max_ngram": 3}
    fast = proposer_class("ngram")(config, registry=registry, draft_config=draft)
    slow = proposer_class("ngram")(config, registry=registry, draft_config=draft)
    slow.in_place = False
    assert fast.in_place and reads_within_lengths(fast.drafter)
    seen = []
    real = fast.drafter.propose_lists
    fast.drafter.propose_lists = lambda h, n: seen.append(h) or real(h, n)
    rng = np.random.default_rng(7)
    for trial in range(60):
        b = int(rng.integers(1, 7))
        histories = [rng.integers(0, 4, int(rng.integers(1, 39))).tolist() for _ in range(b)]
        ids = rng.integers(0, 4, (b + 2, 48)).astype(dtype)  # stale tokens everywhere
        for i, h in enumerate(histories):
            ids[i, : len(h)] = h
        lens = np.array([len(h) for h in histories] + [0, 0], dtype=np.int32)
        sampled = [[1] if rng.random() < 0.8 or trial % 2 == 0 else [] for _ in range(b)]
        got = fast.propose(sampled, lens, ids)
        assert got == slow.propose(sampled, lens, ids)
        assert got == [propose_row(h, 1, 3, min(3, 40 - len(h))) if s else []
                       for h, s in zip(histories, sampled, strict=True)]
        active = [i for i, s in enumerate(sampled) if s]
        if active:  # the rows in their own dtype: a view when they lead the batch
            assert seen[-1].numpy().dtype == dtype
            prefix = active == list(range(len(active)))
            assert np.shares_memory(seen[-1].numpy(), ids) == prefix


def test_reads_within_lengths_is_declared_exactly():
    from specreg.contract.protocols import reads_within_lengths

    assert not reads_within_lengths(object())
    assert not reads_within_lengths(SimpleNamespace(reads_within_lengths="yes"))
    assert reads_within_lengths(SimpleNamespace(reads_within_lengths=True))
