"""Catalog entries SR490-SR495 of the lookup plugin (ngram prompt lookup and suffix decoding),
and the error its suffix request API raises (SR495)."""

from collections.abc import Hashable

from specreg.catalog import ErrorEntry
from specreg.errors import SpecRegError, problem

ENTRIES: tuple[ErrorEntry, ...] = (
    ErrorEntry(
        code="SR490",
        title="ngram/suffix option has the wrong type or is out of range",
        meaning=(
            "ngram and suffix take their options from the draft config object (they have no "
            "draft checkpoint). An n-gram size must be an integer of at least 1, a breadth at "
            "least 1, a suffix tree depth at least 1, max_cached_requests at least -1 (-1: no "
            "limit, 0: no global tree), max_spec_factor at least 0, min_token_prob within "
            "[0, 1], proposals 'chain' or 'tree', match_type 'bfs' or 'prob'."
        ),
        when="Resolving or checking an ngram or suffix config, before any model loads.",
        solutions=(
            "Set the option named in the message to a value in its accepted range.",
            "Leave the option out to use vLLM's (or SGLang's) default.",
        ),
        example_fix=(
            "# before\n{\"algorithm\": \"ngram\", \"draft_config\": {\"prompt_lookup_min\": 0}}\n"
            "# after\n{\"algorithm\": \"ngram\", \"draft_config\": {\"prompt_lookup_min\": 1}}"
        ),
    ),
    ErrorEntry(
        code="SR491",
        title="ngram: prompt_lookup_min is larger than prompt_lookup_max",
        meaning=(
            "ngram matches the last n tokens for n from prompt_lookup_max down to "
            "prompt_lookup_min; a minimum above the maximum leaves no n-gram size to match. "
            "vLLM refuses the same configuration."
        ),
        when="An ngram config whose min_ngram (prompt_lookup_min) exceeds max_ngram "
        "(prompt_lookup_max).",
        solutions=(
            "Lower prompt_lookup_min or raise prompt_lookup_max.",
            "Give only one of the two: the other takes the same value (vLLM's rule).",
        ),
        example_fix=(
            "# before\n{\"prompt_lookup_min\": 4, \"prompt_lookup_max\": 2}\n"
            "# after\n{\"prompt_lookup_min\": 2, \"prompt_lookup_max\": 4}"
        ),
    ),
    ErrorEntry(
        code="SR492",
        title="ngram/suffix: unknown or repeated option",
        meaning=(
            "The draft config object of ngram or suffix holds a key that is no option of the "
            "algorithm, or names one option twice under two spellings (for instance "
            "max_ngram and prompt_lookup_max). The accepted spellings are specreg's short "
            "names and the frameworks' own (vLLM's prompt_lookup_* and suffix_decoding_*, "
            "SGLang's speculative_ngram_*)."
        ),
        when="Resolving or checking an ngram or suffix config.",
        solutions=(
            "Rename the key to one the message lists.",
            "Remove the key, or keep one spelling of a repeated option.",
        ),
        example_fix=(
            "# before\n{\"algorithm\": \"suffix\", \"draft_config\": {\"max_depth\": 32}}\n"
            "# after\n{\"algorithm\": \"suffix\", \"draft_config\": "
            "{\"suffix_decoding_max_tree_depth\": 32}}"
        ),
    ),
    ErrorEntry(
        code="SR493",
        title="suffix: more draft tokens per step than the suffix trees are deep",
        meaning=(
            "Suffix decoding proposes the continuation of the longest suffix match found in its "
            "trees, which hold paths of at most max_tree_depth tokens, so a draft never exceeds "
            "that depth. A larger num_speculative_tokens sizes verify buffers for tokens that "
            "are never proposed."
        ),
        when="A suffix config whose num_steps (vLLM: num_speculative_tokens) exceeds "
        "max_tree_depth (vLLM: suffix_decoding_max_tree_depth).",
        solutions=(
            "Lower num_speculative_tokens (--speculative-num-steps) to at most max_tree_depth.",
            "Raise suffix_decoding_max_tree_depth.",
            "Leave num_speculative_tokens unset: vLLM then uses max_tree_depth.",
        ),
        example_fix=(
            "# before\n{\"method\": \"suffix\", \"num_speculative_tokens\": 32, "
            "\"suffix_decoding_max_tree_depth\": 24}\n"
            "# after\n{\"method\": \"suffix\", \"num_speculative_tokens\": 24, "
            "\"suffix_decoding_max_tree_depth\": 24}"
        ),
    ),
    ErrorEntry(
        code="SR494",
        title="ngram/suffix: num_draft_tokens must be num_steps + 1",
        meaning=(
            "ngram and suffix propose up to num_steps tokens (vLLM's num_speculative_tokens), "
            "verified with num_draft_tokens = num_steps + 1 slots: the anchor then the drafts, "
            "a chain or the nodes of a tree. Other values size the verify buffers for tokens "
            "that are never proposed, or cut proposals short."
        ),
        when="--speculative-num-steps and --speculative-num-draft-tokens both set "
        "inconsistently for ngram or suffix.",
        solutions=(
            "Set only one of the two flags; the other is inferred.",
            "Set num_draft_tokens to num_steps + 1.",
        ),
        example_fix=(
            "# before\n--speculative-algorithm ngram --speculative-num-steps 3 "
            "--speculative-num-draft-tokens 8\n"
            "# after\n--speculative-algorithm ngram --speculative-num-steps 3"
        ),
    ),
    ErrorEntry(
        code="SR495",
        title="suffix: a request id that is not active, or already is",
        meaning=(
            "SuffixDrafter keeps a suffix tree per active request, as arctic-inference's "
            "SuffixDecodingCache does: start_request(req_id, prompt) opens one, "
            "add_active_response and speculate use it, stop_request closes it. Using an id that "
            "was never started (or was stopped), or starting one that is active, is the caller's "
            "mistake; the error is a ValueError, as arctic-inference raises."
        ),
        when="Calling SuffixDrafter.add_active_response, speculate or stop_request with a "
        "request id that is not active, or start_request with one that is.",
        solutions=(
            "Call start_request(req_id, prompt) before the request's first "
            "add_active_response or speculate, and stop_request once, when it ends.",
            "Check `req_id in drafter.active_requests` first where a request may have ended.",
        ),
        example_fix=(
            "# before\ndrafter.speculate(\"req-7\", context)\n"
            "# after\ndrafter.start_request(\"req-7\", prompt)\n"
            "drafter.speculate(\"req-7\", context)"
        ),
    ),
)


class RequestStateError(SpecRegError, ValueError):
    """SR495: the suffix request API was called with an id that is not active (or, to start,
    one that is); a ValueError, as arctic-inference's SuffixDecodingCache raises."""


def request_state_error(req_id: Hashable, *, active: bool, call: str) -> RequestStateError:
    """The SR495 error for `call` on `req_id` (active: whether the id is active already)."""
    if active:
        what = f"suffix: {call}({req_id!r}) for a request that is already active"
        accepted = "a request id not among active_requests"
        fix = f"stop_request({req_id!r}) first, or use a new request id"
    else:
        what = (f"suffix: {call}({req_id!r}) for a request that is not active (never started, "
                "or already stopped)")
        accepted = "a request id among active_requests (opened by start_request)"
        fix = f"call start_request({req_id!r}, prompt) first"
    return RequestStateError(problem("SR495", what, accepted=accepted, fix=fix,
                                     field="req_id"))

