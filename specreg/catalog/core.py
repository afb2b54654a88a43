"""Catalog entries of configs and plans (SR100-SR108, SR116, SR117, SR120-SR122).

Phases, config fields, names, ranges, kernel backends, cache fit and ranks.
"""

from specreg.catalog.entry import ErrorEntry

ENTRIES = (
    ErrorEntry(
        code="SR100",
        title="Unknown speculative phase",
        seed=True,
        meaning=(
            "Token widths are defined per speculative phase, and specreg knows exactly three: "
            "draft_decode, draft_extend and target_verify. The phase given is none of them, even "
            "after ignoring case and reading '-' as '_'."
        ),
        when=(
            "Calling plan.num_tokens_per_req(...), specreg.resolve_num_tokens_per_req(phase=...) "
            "or Phase.parse(...) with a misspelt phase ('target-verfy'), a phase from another "
            "framework ('decode', 'verify'), or a value that is not a string."
        ),
        solutions=(
            "Pass one of the three phases, preferably as the enum: specreg.Phase.TARGET_VERIFY.",
            "For plain (non-speculative) decode the width is 1 and needs no phase lookup; the "
            "speculative decode forward uses target_verify.",
            "Read the suggestion in the message: it names the closest valid phase.",
        ),
        example_fix=(
            "# before\n"
            "n = plan.num_tokens_per_req('target-verfy')\n"
            "# after\n"
            "n = plan.num_tokens_per_req(specreg.Phase.TARGET_VERIFY)"
        ),
    ),
    ErrorEntry(
        code="SR101",
        title="Unknown speculative algorithm",
        meaning="No loaded plugin registered an algorithm (or alias) with this name.",
        when=(
            "Resolving a config, or running `specreg check/plan`, with a misspelt algorithm name, "
            "or with the plugin that provides it not installed, filtered out by SPECREG_PLUGINS, "
            "or failed to load."
        ),
        solutions=(
            "Use a name listed by `specreg list`; the message names the closest one.",
            "Install the plugin distribution that provides the algorithm.",
            "If SPECREG_PLUGINS is set, add the plugin's entry-point name to it.",
            "Check `specreg list` for load failures of the plugin.",
        ),
        example_fix="# before\n--speculative-algorithm eaglee\n# after\n--speculative-algorithm eagle",
    ),
    ErrorEntry(
        code="SR102",
        title="Unknown KV-cache backend",
        meaning="No loaded plugin registered a KV-cache backend with this name.",
        when=(
            "Passing --kv-cache NAME (specreg's alias; SGLang's own flag is --enable-hisparse) "
            "or SpecConfig(cache=...) with a name no plugin registered."
        ),
        solutions=(
            "Use a cache listed by `specreg list`; the message names the closest one.",
            "Leave the cache unset to use the serving framework's own KV cache.",
            "For HiSparse, pass SGLang's --enable-hisparse --disable-radix-cache instead of the alias.",
        ),
        example_fix="# before\n--kv-cache hisparce\n# after\n--enable-hisparse --disable-radix-cache",
    ),
    ErrorEntry(
        code="SR103",
        title="Speculative parameter out of range",
        meaning=(
            "num_steps, topk or num_draft_tokens is outside the range the algorithm declares in "
            "its AlgorithmSpec."
        ),
        when="Resolving or checking a config whose value is below the minimum or above the maximum.",
        solutions=(
            "Set the value inside the range the message lists.",
            "Leave the value unset to use the algorithm's default.",
        ),
        example_fix="# before\n--speculative-num-steps 0\n# after\n--speculative-num-steps 3",
    ),
    ErrorEntry(
        code="SR104",
        title="Invalid config field",
        meaning=(
            "A config mapping has a key specreg does not know, or a value of the wrong type "
            "(for example a string where an integer is needed, or a boolean)."
        ),
        when="SpecConfig(...), SpecConfig.from_dict(...), config_from_flags(...), "
        "`specreg check --config FILE` or CLI flags.",
        solutions=(
            "Use the field names of SpecConfig (algorithm, num_steps, topk, num_draft_tokens, "
            "draft_config, cache, cache_options, candidate_steps) or SGLang's flag spellings.",
            "Pass integers for the integer fields.",
        ),
        example_fix=(
            '# before\n{"algorithm": "eagle", "num_step": "3"}\n'
            '# after\n{"algorithm": "eagle", "num_steps": 3}'
        ),
    ),
    ErrorEntry(
        code="SR105",
        title="Invalid adaptive candidate steps",
        meaning=(
            "candidate_steps must be a non-empty list of distinct non-negative integers; buffers "
            "are sized for the widest candidate."
        ),
        when="A config sets candidate_steps to an empty list, negative values or non-integers.",
        solutions=(
            "Pass a non-empty list such as [1, 3, 5].",
            "Remove candidate_steps to resolve one static width.",
        ),
        example_fix='# before\n"candidate_steps": []\n# after\n"candidate_steps": [1, 3, 5]',
    ),
    ErrorEntry(
        code="SR106",
        title="Draft config file cannot be read",
        meaning="The draft checkpoint config (config.json) could not be opened or is not a JSON object.",
        when=(
            "--config FILE, or specreg's alias --speculative-draft-config PATH, names a missing or "
            "malformed file."
        ),
        solutions=(
            "Pass the draft checkpoint with SGLang's --speculative-draft-model-path FOLDER (the "
            "folder holding its config.json).",
            "Check the file is valid JSON whose top level is an object.",
        ),
        example_fix=(
            "# before\n--speculative-draft-config ckpt/\n"
            "# after\n--speculative-draft-model-path ckpt/"
        ),
    ),
    ErrorEntry(
        code="SR107",
        title="Speculative parameter does not apply to this algorithm",
        meaning=(
            "The algorithm fixes this parameter (for example block drafters always use topk 1 and "
            "one step); the value given is ignored. This is a warning, not an error."
        ),
        when="Setting --speculative-eagle-topk or --speculative-num-steps for a block drafter.",
        solutions=("Remove the flag; the algorithm's fixed value is used.",),
        example_fix=(
            "# before\n--speculative-algorithm dspark --speculative-eagle-topk 4\n"
            "# after\n--speculative-algorithm dspark"
        ),
    ),
    ErrorEntry(
        code="SR108",
        title="Cache options invalid",
        meaning="An option given for the KV-cache backend is unknown or has the wrong type.",
        when="SpecConfig(cache=..., cache_options={...}) or --kv-cache-option KEY=VALUE.",
        solutions=(
            "Use the options the cache lists in `specreg list --json` (caches[].options).",
            "Pass integers for integer options.",
        ),
        example_fix="# before\n--kv-cache-option hot=4096\n# after\n--kv-cache-option hot_size=4096",
    ),
    ErrorEntry(
        code="SR116",
        title="Kernel backend cannot be used",
        meaning=(
            "SPECREG_KERNEL_BACKEND, or a kernel's backend= argument, asks for a backend that is "
            "unknown or cannot run the given tensors (Triton needs CUDA tensors, or "
            "TRITON_INTERPRET=1 on the CPU)."
        ),
        when="Any kernel wrapper choosing between its torch and Triton implementations.",
        solutions=(
            "Set SPECREG_KERNEL_BACKEND to auto, torch or triton.",
            "Install the triton extra: pip install 'specreg[triton]'.",
            "Unset the variable to dispatch automatically.",
        ),
        example_fix="# before\nSPECREG_KERNEL_BACKEND=cuda\n# after\nSPECREG_KERNEL_BACKEND=triton",
    ),
    ErrorEntry(
        code="SR117",
        title="Cache does not fit the algorithm",
        meaning=(
            "The KV-cache backend's configuration contradicts the resolved plan, for example "
            "its step count is not the plan's target_verify width."
        ),
        when="registry.resolve(config) with a cache whose options disagree with the algorithm.",
        solutions=(
            "Leave the cache's step option unset so it follows the plan.",
            "Change the algorithm's num_draft_tokens or the cache option so they agree.",
        ),
        example_fix=(
            "# before\n--speculative-num-draft-tokens 4 --enable-hisparse --disable-radix-cache "
            "--kv-cache-option steps=3\n"
            "# after\n--speculative-num-draft-tokens 4 --enable-hisparse --disable-radix-cache"
        ),
    ),
    ErrorEntry(
        code="SR120",
        title="Ranks resolved different plans",
        meaning=(
            "Every rank of one serving job must run the same plugins, widths, gamma and kernel "
            "backends; check_consistent found a rank whose plan fingerprint differs."
        ),
        when="specreg.registry.distributed.check_consistent(plan) after each rank resolved its plan.",
        solutions=(
            "Install the same plugin versions on every node.",
            "Set SPECREG_PLUGINS and SPECREG_KERNEL_BACKEND identically on every rank.",
            "Pass the same speculative flags to every rank.",
        ),
        example_fix="# the message names the rank and field, e.g.\nrank 1 field plugins: ...",
    ),
    ErrorEntry(
        code="SR121",
        title="Ranks cannot be compared: torch.distributed is not initialised",
        meaning=(
            "WORLD_SIZE says the job has several processes, but no process group exists, so "
            "check_consistent cannot gather the other ranks' plans. Skipping silently would hide "
            "the mismatch the check exists for."
        ),
        when="specreg.registry.distributed.check_consistent(plan) before init_process_group in a multi-rank job.",
        solutions=(
            "Call torch.distributed.init_process_group(...) before check_consistent.",
            "In a single-process job, leave WORLD_SIZE unset or 1.",
        ),
        example_fix=(
            "torch.distributed.init_process_group('nccl')\n"
            "specreg.registry.distributed.check_consistent(plan)"
        ),
    ),
    ErrorEntry(
        code="SR122",
        title="An adaptive candidate step is one the algorithm cannot serve",
        meaning=(
            "With candidate_steps, the algorithm's plugin derives a config for every candidate "
            "step count, and the plan sizes its buffers, verifier and drafter for all of them. "
            "A candidate whose derived num_steps, topk or num_draft_tokens lies outside the "
            "ranges the algorithm declares, or that its drafter cannot produce, cannot be served."
        ),
        when="registry.check or registry.resolve of a config with --speculative-candidate-steps.",
        solutions=(
            "Remove the candidate step the message names from --speculative-candidate-steps.",
            "Pick candidate steps within the algorithm's num_steps range (specreg list --json).",
        ),
        example_fix=(
            "# before\n--speculative-algorithm eagle --speculative-candidate-steps 1,3,40\n"
            "# after\n--speculative-algorithm eagle --speculative-candidate-steps 1,3,5"
        ),
    ),
    ErrorEntry(
        code="SR130",
        title="Unknown filter order",
        meaning=(
            "The order in which top-k, top-p and min-p combine (`filter_order`) is not one of "
            "specreg's three: 'specreg' (the default: top-p over the top-k survivors, then "
            "min-p), 'vllm' (min-p, then top-k and top-p, as vLLM's sampler) or 'sglang' (top-p "
            "over the whole distribution, as SGLang's torch sampler). See the Kernels page."
        ),
        when=(
            "Building a SpecConfig with filter_order=..., or calling verify_chain_with_params / "
            "verify_tree_with_params (or a verifier) with filter_order=..."
        ),
        solutions=(
            "Leave filter_order unset for specreg's order; the SGLang and vLLM adapters set "
            "their framework's order themselves.",
            "Pass one of specreg, vllm, sglang (lower case).",
        ),
        example_fix=(
            "# before\nSpecConfig(algorithm='eagle', filter_order='vLLM-v1')\n"
            "# after\nSpecConfig(algorithm='eagle', filter_order='vllm')"
        ),
    ),
    ErrorEntry(
        code="SR133",
        title="Unknown or contradictory verify mode",
        meaning=(
            "`verify_mode` says how sampled chains are verified: 'standard' (the default, "
            "rejection sampling, which maximises acceptance) or 'invariant' (a draft is accepted "
            "only when it equals the target's own draw on the random stream, so the tokens equal "
            "plain sampling with the same keys whatever the drafter). Any other value is refused, "
            "and so is the invariant mode beside a lossy acceptance rule, which would contradict "
            "it."
        ),
        when="Building a SpecConfig (or `specreg check` / `plan`) with verify_mode=...",
        solutions=(
            "Leave verify_mode unset for rejection sampling.",
            "Pass verify_mode='invariant' (--speculative-verify-mode invariant) for tokens equal "
            "to plain sampling, and drop any lossy acceptance setting.",
        ),
        example_fix="# before\nverify_mode='exact'\n# after\nverify_mode='invariant'",
    ),
    ErrorEntry(
        code="SR131",
        title="Prometheus export without prometheus_client",
        meaning=(
            "Acceptance statistics are exported in Prometheus' text format through the "
            "prometheus_client library, an optional extra that is not installed here. The "
            "statistics themselves (AcceptanceStats.snapshot()) need nothing extra."
        ),
        when="specreg.step.acceptance_export.prometheus_text or AcceptanceCollector.collect, or "
        "specreg demo --metrics, without prometheus_client installed.",
        solutions=("Install the metrics extra: pip install 'specreg[metrics]'.",
                   "Read AcceptanceStats.snapshot().to_dict() instead."),
        example_fix="pip install 'specreg[metrics]'",
    ),
    ErrorEntry(
        code="SR132",
        title="Acceptance statistics given a result they cannot count",
        meaning=(
            "AcceptanceStats.record counts each request's accepted drafts against the drafts it "
            "proposed; the counts must be one per request row, whole numbers, and an accepted "
            "count can never exceed the drafts proposed."
        ),
        when="record(result, num_drafts=...) with num_drafts of another length than the batch, "
        "negative, or smaller than a row's accepted count; request_ids of another length.",
        solutions=("Pass num_drafts as the drafts each row proposed (int, or int [b]).",
                   "Pass one request id per row, or none."),
        example_fix="# before\nstats.record(result, num_drafts=torch.tensor([3]))  # b = 2\n"
        "# after\nstats.record(result, num_drafts=torch.tensor([3, 1]))",
    ),
)
