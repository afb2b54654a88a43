"""The ngram plugin's own catalog entry, SR501 (registered by `plugin.specreg_register_errors`).

Codes SR500-SR899 belong to third-party plugins. Imports neither torch nor triton.
"""

from __future__ import annotations

from specreg.catalog import ErrorEntry

CHAIN_MISMATCH = ErrorEntry(
    code="SR501",
    title="ngram: num_draft_tokens must be num_steps + 1",
    meaning=(
        "ngram drafts one chain of num_steps tokens, verified with num_draft_tokens = "
        "num_steps + 1 tokens (the drafts plus the anchor). Setting both to other values "
        "would size the verify buffers for tokens that are never drafted."
    ),
    when="--speculative-algorithm ngram_example with both --speculative-num-steps and "
    "--speculative-num-draft-tokens set inconsistently.",
    solutions=(
        "Set only one of the two flags; the other is inferred.",
        "Set num_draft_tokens to num_steps + 1.",
    ),
    example_fix=(
        "# before\n--speculative-algorithm ngram_example --speculative-num-steps 3 "
        "--speculative-num-draft-tokens 6\n# after\n--speculative-algorithm ngram_example "
        "--speculative-num-steps 3"
    ),
)
