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
