"""Catalog entries SR300–SR399: the DSpark plugin and its DFlash base."""

from specreg.catalog import ErrorEntry

ENTRIES: tuple[ErrorEntry, ...] = (
    ErrorEntry(
        code="SR300",
        title="DSpark needs at least two draft tokens",
        seed=True,
        meaning=(
            "DSpark proposes gamma = num_draft_tokens - 1 tokens per step; the verify width "
            "includes the anchor (bonus) token. With num_draft_tokens below 2 gamma is below 1, "
            "so there would be nothing to propose."
        ),
        when=(
            "--speculative-algorithm dspark (or dflash) with --speculative-num-draft-tokens 1 or 0, "
            "often set in the belief that it disables drafting, or from a stale config template."
        ),
        solutions=(
            "Set --speculative-num-draft-tokens to gamma + 1, at least 2 (4 to 8 is typical).",
            "Leave it unset so gamma comes from the draft checkpoint (block_size), or the "
            "default gamma 7.",
            "To turn speculation off, drop --speculative-algorithm instead.",
        ),
        example_fix=(
            "# before\n--speculative-algorithm dspark --speculative-num-draft-tokens 1\n"
            "# after\n--speculative-algorithm dspark --speculative-num-draft-tokens 8   # gamma 7"
        ),
    ),
)
