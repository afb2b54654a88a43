"""Catalog entries SR400–SR499: the HiSparse sparse-attention KV cache."""

from specreg.catalog import ErrorEntry

ENTRIES: tuple[ErrorEntry, ...] = (
    ErrorEntry(
        code="SR400",
        title="HiSparse swap step count above capacity",
        seed=True,
        meaning=(
            "One swap call resolves every speculative step of a verify together, and its unique "
            "misses must fit the hot buffer plus the scratch area sized at configuration time "
            "(steps x top_k). Any step count from 1 to that capacity works; above it the call "
            "cannot keep every location valid for the whole call."
        ),
        when=(
            "A swap call whose top_k_tokens has more steps than the layout was configured for, or "
            "a config whose target_verify width exceeds the cache's max_steps."
        ),
        solutions=(
            "Raise the cache's max_steps option (--kv-cache-option max_steps=N) so the scratch "
            "area covers N x top_k rows.",
            "Lower --speculative-num-draft-tokens so target_verify fits.",
            "A single step is an ordinary call: pass [bs, top_k] or [bs, 1, top_k].",
        ),
        example_fix=(
            "# before (layout sized for 4 steps)\nswapper.swap(top_k_tokens_with_6_steps, ...)\n"
            "# after\n--kv-cache hisparse --kv-cache-option max_steps=6"
        ),
    ),
)
