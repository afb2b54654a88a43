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
    ErrorEntry(
        code="SR401",
        title="HiSparse hot buffer smaller than top_k",
        meaning=(
            "Every selected token of one step must be resident at once, so the per-request hot buffer needs at least top_k slots."
        ),
        when="Resolving a config (or calling compute_layout) with hot_size < top_k.",
        solutions=(
            "Raise hot_size to at least top_k (a power of two such as 4096 is usual): --hisparse-config '{\"hot_size\": 4096}', or --kv-cache-option hot_size=N.",
            "Lower top_k to the indexer's real selection size.",
        ),
        example_fix="# before\n--kv-cache-option hot_size=1024 --kv-cache-option top_k=2048\n# after\n--kv-cache-option hot_size=4096 --kv-cache-option top_k=2048",
    ),
    ErrorEntry(
        code="SR402",
        title="HiSparse tail page smaller than the tokens written per step",
        meaning=(
            "The tail page holds the newest tokens, written on device during the step (one per verify position). Each of them needs its own tail slot, or a newer token would overwrite one still being attended to."
        ),
        when="page_size < tokens written per step (default: the verify width, max_steps).",
        solutions=(
            "Raise --kv-cache-option page_size=N to at least the verify width.",
            "Leave page_size unset: it defaults to max_steps.",
        ),
        example_fix="# before\n--kv-cache-option page_size=2   # verify width 4\n# after\n--kv-cache-option page_size=4",
    ),
    ErrorEntry(
        code="SR403",
        title="HiSparse scratch area cannot hold one call's misses",
        meaning=(
            "One swap call may miss up to steps x top_k distinct tokens, all of which must stay valid for the whole call. They fit in the hot buffer plus the scratch area; a scratch_rows set below steps x top_k - hot_size cannot guarantee that."
        ),
        when="compute_layout with an explicit scratch_rows smaller than max_steps * top_k - hot_size.",
        solutions=(
            "Leave scratch_rows unset: it is sized to max(0, max_steps * top_k - hot_size).",
            "Raise hot_size or lower max_steps.",
        ),
        example_fix="# before\n--kv-cache-option scratch_rows=0 --kv-cache-option max_steps=4\n# after\n--kv-cache-option max_steps=4   # scratch sized automatically",
    ),
    ErrorEntry(
        code="SR404",
        title="Invalid HiSparse layout option value",
        meaning=(
            "A HiSparse layout option is not a positive integer (req_slots, top_k, hot_size, page_size, max_steps, row_bytes, max_seq_len, layers), or is outside the supported range (hot_size <= 2**20)."
        ),
        when="Resolving a config or calling compute_layout with zero, negative, boolean or non-numeric option values.",
        solutions=(
            "Pass a positive integer, e.g. --hisparse-config '{\"req_slots\": 64}' (or --kv-cache-option req_slots=64).",
            "Unset the option to use its default.",
        ),
        example_fix="# before\n--kv-cache-option req_slots=0\n# after\n--kv-cache-option req_slots=64",
    ),
    ErrorEntry(
        code="SR405",
        title="HiSparse device pool smaller than the layout",
        meaning=(
            "Each request slot owns hot_size + page_size + scratch_rows device rows, so the device pool needs at least req_slots times that many rows."
        ),
        when="An explicit device_rows option below req_slots * buffer_size.",
        solutions=(
            "Leave device_rows unset (it is derived).",
            "Lower req_slots or hot_size, or raise device_rows.",
        ),
        example_fix="# before\n--kv-cache-option device_rows=1000\n# after\n(unset device_rows)",
    ),
    ErrorEntry(
        code="SR406",
        title="Unknown HiSparse replacement policy",
        meaning=(
            "HiSparse implements one replacement policy, 'lru' (least recently used, ties broken by slot index)."
        ),
        when="Resolving a config whose policy option is anything else.",
        solutions=("Use --kv-cache-option policy=lru, or leave it unset.",),
        example_fix="# before\n--kv-cache-option policy=clock\n# after\n--kv-cache-option policy=lru",
    ),
    ErrorEntry(
        code="SR407",
        title="HiSparse miss plan given in part",
        meaning=(
            "A miss plan is three tensors recorded together: miss_src (host rows), miss_dst (device rows) and miss_count. A swap or replay needs all three, or none; plan buffers also require record_plan=True."
        ),
        when="swap(..., record_plan=True, miss_src=...) without miss_dst or miss_count, plan buffers passed with record_plan=False, or copy_cache_planned with a tensor missing.",
        solutions=(
            "Pass miss_src, miss_dst and miss_count together, or none of them (the swapper then allocates its own and exposes them as swapper.last_plan).",
        ),
        example_fix="# before\nswapper.swap(..., record_plan=True, miss_src=src)\n# after\nswapper.swap(..., record_plan=True, miss_src=src, miss_dst=dst, miss_count=count)",
    ),
    ErrorEntry(
        code="SR408",
        title="HiSparse miss plan row strides differ",
        meaning=(
            "miss_src and miss_dst are read with one row stride, so their stride(0) must be equal and their last dimension contiguous."
        ),
        when="A plan whose miss_src and miss_dst come from differently shaped or non-contiguous buffers.",
        solutions=("Allocate both with the same shape [bs, capacity] and contiguous rows.",),
        example_fix="# before\nmiss_dst = torch.empty(bs, cap + 8, dtype=torch.int32)\n# after\nmiss_dst = torch.empty(bs, cap, dtype=torch.int32)",
    ),
    ErrorEntry(
        code="SR409",
        title="HiSparse token has no host copy",
        meaning=(
            "A selected token is neither in the tail, nor in the hot buffer, nor on the host (host_cache_locs is negative), so no valid device row can be returned for it. The torch path raises this error; the GPU path returns -1 for it and counts it in swapper.error_count, which swapper.check_errors() turns into this error."
        ),
        when="The serving loop did not back up a token to the host before it left the tail, or the request was reset without its KV being rewritten.",
        solutions=(
            "Write every new token with write_tail(...) (it registers the host row), or call set_host_locs(...) after copying KV to the host yourself.",
            "Check that seq_lens do not run ahead of the tokens actually written.",
        ),
        example_fix="# before\nswapper.assign_tail(req, pos)   # device only\n# after\nswapper.write_tail(req, pos, kv, host_cache=h, device_buffer=d)",
    ),
    ErrorEntry(
        code="SR410",
        title="HiSparse request slot used twice in one call",
        meaning=(
            "Each real batch row owns its request slot's buffer for the call; two rows naming the same slot would race on its state."
        ),
        when="req_pool_indices holding a slot twice among the first num_real_reqs rows.",
        solutions=(
            "Give every running request its own slot; padding rows past num_real_reqs may repeat slots.",
        ),
        example_fix="# before\nreq_pool_indices = torch.tensor([3, 3])\n# after\nreq_pool_indices = torch.tensor([3, 4])",
    ),
    ErrorEntry(
        code="SR411",
        title="HiSparse row size mismatch",
        meaning=(
            "The host cache and the device buffer must hold rows of the layout's row_bytes (stride(0) * element_size), and have contiguous rows."
        ),
        when="Passing buffers of another dtype or width than the layout, or a host cache and device buffer that differ.",
        solutions=(
            "Allocate them with swapper.new_host_cache(...) / swapper.new_device_buffer(...), or set --kv-cache-option row_bytes=N to the real row size.",
        ),
        example_fix="# before\nrow_bytes=576 with 656-byte rows\n# after\n--kv-cache-option row_bytes=656",
    ),
    ErrorEntry(
        code="SR412",
        title="HiSparse top-k wider than the layout",
        meaning=(
            "The layout reserved capacity for top_k selected tokens per step; a call selecting more cannot be guaranteed to fit."
        ),
        when="A swap call whose top_k_tokens last dimension exceeds the configured top_k.",
        solutions=("Set top_k to the indexer's selection size: --hisparse-config '{\"top_k\": N}', or --kv-cache-option top_k=N.",),
        example_fix="# before\n--kv-cache-option top_k=1024   # indexer selects 2048\n# after\n--kv-cache-option top_k=2048",
    ),
)
