"""ngram and suffix under vLLM's custom_class: the proposer called as vLLM 0.33's GPU model runner
calls propose()."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from specreg_lookup.kernels.ngram_match.reference import propose_row

from specreg import Registry
from specreg.adapters.vllm_proposers import __getattr__ as proposer_class


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
