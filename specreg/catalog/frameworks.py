"""Catalog entries SR160–SR194: serving-framework flags, model-dependent defaults and the adapters."""

from specreg.catalog.entry import ErrorEntry


def _entry(code: str, title: str, meaning: str, when: str, solutions: tuple[str, ...], fix: str) -> ErrorEntry:
    return ErrorEntry(
        code=code, title=title, meaning=meaning, when=when, solutions=solutions, example_fix=fix
    )


ENTRIES: tuple[ErrorEntry, ...] = (
    _entry(
        "SR160", "Model path without a config.json",
        "SGLang and vLLM read a model's config.json to pick defaults and to parse draft checkpoints; "
        "specreg reads the same file, and there is none at the given path.",
        "--model-path, --speculative-draft-model-path or vLLM's speculative 'model' names a folder "
        "(or file) where no readable config.json is.",
        ("Point the flag at the checkpoint folder that holds config.json.",
         "Download the checkpoint first; specreg never fetches from a hub."),
        "# before\n--model-path /models/llama   # folder is empty\n# after\n--model-path /models/llama-3-8b",
    ),
    _entry(
        "SR161", "Flag that SGLang does not have (specreg alias)",
        "An older specreg spelling that no serving framework accepts. It still works as an alias, "
        "and the notice names the real flag so the same line works in SGLang. One deliberate "
        "difference: --kv-cache hisparse (like SpecConfig(cache='hisparse') in Python) "
        "configures specreg's HiSparse swapper alone, which takes any topk and number of draft "
        "tokens, while SGLang's --enable-hisparse runs SGLang's HiSparse runtime, whose own "
        "rules (SR167-SR173) `specreg check` and `plan` then apply. So one config can be sound "
        "with --kv-cache hisparse and refused with --enable-hisparse.",
        "--speculative-draft-config or --kv-cache (or their key spellings) in a config.",
        ("Use --speculative-draft-model-path FOLDER instead of --speculative-draft-config FILE.",
         "Use --enable-hisparse --disable-radix-cache (and --hisparse-config JSON) instead of "
         "--kv-cache hisparse to check the config as SGLang runs it.",
         "Keep --kv-cache hisparse to check the config for specreg's swapper used outside "
         "SGLang's HiSparse runtime."),
        "# before\n--kv-cache hisparse\n# after\n--enable-hisparse",
    ),
    _entry(
        "SR162", "Draft tokens rewritten to steps + 1 (topk 1)",
        "With --speculative-eagle-topk 1 the draft is a chain of num_steps tokens, so SGLang "
        "silently sets --speculative-num-draft-tokens to steps + 1. specreg adopts the same value "
        "and says so.",
        "SGLang-spelled flags with topk 1 and a draft-token count other than steps + 1.",
        ("Drop --speculative-num-draft-tokens, or set it to steps + 1.",),
        "# before\n--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 8\n"
        "# after\n--speculative-num-steps 3 --speculative-eagle-topk 1",
    ),
    _entry(
        "SR163", "Framework version other than the tested one",
        "The adapter was tested against one release of the framework; its config code changes "
        "between releases, so the adapter may resolve differently from it.",
        "specreg.adapters.sglang or specreg.adapters.vllm loaded into another release.",
        ("Install the tested release (named in the message).",
         "Or run with SPECREG_SGLANG=shadow / SPECREG_VLLM=shadow and read the disagreements it logs."),
        "pip install sglang==0.5.23",
    ),
    _entry(
        "SR164", "Framework hook missing",
        "The adapter plugs into a named function or registry of the framework, and this "
        "installation does not have it, so the adapter cannot work.",
        "Loading an adapter (SPECREG_SGLANG or SPECREG_VLLM on) into a framework without the hook.",
        ("Install the tested framework release.", "Or turn the adapter off (unset the variable)."),
        "unset SPECREG_SGLANG",
    ),
    _entry(
        "SR165", "Scheduler or worker resolved another plan",
        "Each SGLang scheduler and worker process resolves the plan again from the arguments it "
        "received and compares its fingerprint with the launcher's; they differ, so the processes "
        "would size buffers differently.",
        "A child process with other plugins, other SPECREG_PLUGINS or other arguments than the launcher.",
        ("Give every process the same specreg plugins and environment.",),
        "SPECREG_PLUGINS=eagle,dspark  # the same value for every process",
    ),
    _entry(
        "SR166", "Framework and specreg disagree (shadow mode)",
        "In shadow mode the framework decides; specreg resolved the same flags and got another "
        "value. The message names the field and both values.",
        "SPECREG_SGLANG=shadow or SPECREG_VLLM=shadow, once per disagreement.",
        ("Read the deviation table in the docs: most disagreements are documented there.",
         "Switch to enforce mode to use specreg's values."),
        "SPECREG_SGLANG=enforce",
    ),
    _entry(
        "SR167", "HiSparse: SGLang's swap manager needs 2-4 draft tokens",
        "SGLang's own HiSparse speculative swap manager refuses other draft-token counts when it is "
        "built, after the model weights have loaded. specreg reports it at config time. The "
        "limit is the swap manager's: the hisparse_swap substitution, which runs specreg's "
        "swapper in its place, lifts it (specreg's own limits, SR183 and SR184, then apply). "
        "--kv-cache hisparse (specreg's swapper alone, SR161) is not held to it.",
        "--enable-hisparse with a verify width outside 2..4, without the hisparse_swap "
        "substitution.",
        ("Set --speculative-num-draft-tokens (or steps + 1) between 2 and 4.",
         "Or run SGLang with SPECREG_SGLANG=enforce SPECREG_SGLANG_SUBSTITUTE=hisparse_swap "
         "(`specreg check --substitute hisparse_swap` checks that config): specreg's swapper "
         "takes any number of draft tokens."),
        "--speculative-num-steps 3 --speculative-eagle-topk 1   # 4 draft tokens",
    ),
    _entry(
        "SR168", "HiSparse: draft tokens x index top_k above 8192",
        "SGLang's HiSparse swap workspace holds at most 8192 occurrences (draft tokens times the "
        "sparse-attention index top_k) and requires top_k >= 1024. The limit is the swap "
        "manager's: the hisparse_swap substitution lifts it (SR183 and SR184 then apply).",
        "--enable-hisparse with draft tokens x top_k > 8192, or top_k < 1024, without the "
        "hisparse_swap substitution.",
        ("Lower --speculative-num-draft-tokens.", "Lower top_k in --hisparse-config.",
         "Or run SGLang with SPECREG_SGLANG_SUBSTITUTE=hisparse_swap (`--substitute "
         "hisparse_swap` in check and plan)."),
        "--speculative-num-draft-tokens 4 --hisparse-config '{\"top_k\": 2048}'",
    ),
    _entry(
        "SR169", "HiSparse: target is not a DSA model",
        "HiSparse swaps the KV of DeepSeek sparse attention (DSA); SGLang only enables it for DSA "
        "targets (DeepSeek V3.2, GLM-5), DeepSeek V4 and MiniMax M3.",
        "--enable-hisparse with a --model-path whose config.json names another architecture.",
        ("Use a DSA target model, or drop --enable-hisparse.",),
        "--model-path /models/DeepSeek-V3.2 --enable-hisparse",
    ),
    _entry(
        "SR170", "HiSparse: radix cache must be disabled",
        "SGLang's HiSparse cannot share prefixes through the radix cache.",
        "--enable-hisparse without --disable-radix-cache.",
        ("Add --disable-radix-cache.",),
        "--enable-hisparse --disable-radix-cache",
    ),
    _entry(
        "SR171", "HiSparse: speculation must be linear (topk 1)",
        "SGLang's HiSparse speculative integration supports chain drafting only (no "
        "substitution lifts it). --kv-cache hisparse configures specreg's swapper alone, which "
        "takes trees, and is not held to it (SR161).",
        "--enable-hisparse with --speculative-eagle-topk above 1.",
        ("Set --speculative-eagle-topk 1.",),
        "--speculative-eagle-topk 1",
    ),
    _entry(
        "SR172", "HiSparse: no adaptive speculation",
        "SGLang sizes HiSparse swap state statically, so the step count cannot change at run time.",
        "--enable-hisparse with --speculative-adaptive (or candidate steps).",
        ("Drop --speculative-adaptive.",),
        "# remove --speculative-adaptive",
    ),
    _entry(
        "SR173", "HiSparse: no mixed chunked prefill",
        "A mixed batch cannot merge SGLang's HiSparse decode batch.",
        "--enable-hisparse with --enable-mixed-chunk.",
        ("Drop --enable-mixed-chunk.",),
        "# remove --enable-mixed-chunk",
    ),
    _entry(
        "SR174", "vLLM speculative config not understood",
        "A vLLM speculative-config dict carries method, num_speculative_tokens and model; a value "
        "has the wrong type or names a method specreg has no algorithm for.",
        "specreg.config_from_flags (so registry.resolve) or the vLLM adapter given such a dict.",
        ("Use a method listed by `specreg list`, and an integer num_speculative_tokens >= 1.",),
        "--speculative-config '{\"method\": \"eagle\", \"num_speculative_tokens\": 3}'",
    ),
    _entry(
        "SR175", "specreg plugin has no drafter vLLM's custom_class can drive",
        "vLLM's custom_class proposer runs the drafter a specreg plugin builds "
        "(specreg_make_drafter). vLLM calls it with token ids only (propose(sampled_token_ids, "
        "num_tokens_no_spec, token_ids_cpu)); the algorithm's plugin builds no drafter, or one "
        "that needs more (target hidden states, base logits, an anchor).",
        "vLLM constructs the custom_class proposer for such an algorithm (DSpark, DFlash, EAGLE, "
        "or one without a drafter); refused at construction, before the first step.",
        ("Pick an algorithm whose drafter proposes from the token history (e.g. ngram).",
         "Run DSpark, DFlash or EAGLE through vLLM's own method with SPECREG_VLLM=enforce."),
        "# before\n{\"method\": \"custom_class\", \"model\": \"specreg.adapters.vllm_proposers.dflash\"}\n"
        "# after\n{\"method\": \"custom_class\", \"model\": \"specreg.adapters.vllm_proposers.ngram\", "
        "\"num_speculative_tokens\": 3}",
    ),
    _entry(
        "SR176", "Unknown adapter mode",
        "SPECREG_SGLANG and SPECREG_VLLM turn an adapter on; their only values are enforce and shadow "
        "(unset or off leaves the framework untouched).",
        "The variable holds another value.",
        ("Set it to enforce or shadow, or unset it.",),
        "export SPECREG_SGLANG=enforce",
    ),
    _entry(
        "SR180", "No published plan in an enforcing SGLang process",
        "With SPECREG_SGLANG=enforce the SGLang launcher resolves the plan and publishes its "
        "fingerprint in SPECREG_SGLANG_PLAN; every scheduler process it spawns resolves its own "
        "plan and must find the launcher's to compare with. None was published, so nothing "
        "proves the processes size their buffers alike (and enforcement may never have run).",
        "A scheduler or worker process started outside SGLang's launcher, or a process whose "
        "ServerArgs were built before `sglang.srt.plugins.load_plugins()` ran.",
        ("Start SGLang through its launcher with SPECREG_SGLANG=enforce in its environment.",
         "Building ServerArgs by hand: call sglang.srt.plugins.load_plugins() first, then read "
         "the resolved values through sglang.srt.arg_groups.overrides.resolved_view."),
        "from sglang.srt.plugins import load_plugins\nload_plugins()\n"
        "server_args = ServerArgs(model_path=..., speculative_algorithm=\"EAGLE\")",
    ),
    _entry(
        "SR181", "Runtime substitution switch not accepted",
        "SPECREG_SGLANG_SUBSTITUTE and SPECREG_VLLM_SUBSTITUTE (the CLI's --substitute, a config's "
        "substitutions) name the framework seams where specreg runs its own kernels: SGLang's "
        "hisparse_swap and tree_verify, vLLM's rejection_sampler. A mistyped name would leave the "
        "framework's own kernel running while the user believes specreg's runs, so it is an error. "
        "Substitutions change what the framework runs, so they need the adapter in enforce mode; "
        "shadow mode never changes it.",
        "A name that is not a substitution, a substitution of the other framework, or a "
        "substitution asked for with the adapter in shadow mode.",
        ("Use the listed names, comma-separated, or all; unset the variable to substitute nothing.",
         "Set SPECREG_SGLANG=enforce (or SPECREG_VLLM=enforce) to substitute."),
        "# before\nexport SPECREG_SGLANG_SUBSTITUTE=hisparse\n"
        "# after\nexport SPECREG_SGLANG_SUBSTITUTE=hisparse_swap",
    ),
    _entry(
        "SR182", "A runtime substitution did not take effect",
        "Each substitution patches named seams of the framework (a class, a function, a kernel "
        "name) and checks afterwards that the framework now reaches specreg's code there. A seam "
        "that is missing (the installed release moved or renamed it) or a hook the framework did "
        "not apply (SGLang's hook registry only logs failures) stops the process at start-up "
        "instead of running the framework's own kernel silently.",
        "A framework release other than the tested one, or another plugin patching the same seam.",
        ("Install the framework release the adapter was tested with (see SR163).",
         "Unset the substitution named in the message to run the framework's own kernel."),
        "# before\nSPECREG_SGLANG_SUBSTITUTE=tree_verify  # with a moved eagle_sample\n"
        "# after\npip install sglang==0.5.23   # or: unset SPECREG_SGLANG_SUBSTITUTE",
    ),
    _entry(
        "SR183", "HiSparse top_k above the device buffer (substituted swap)",
        "With SPECREG_SGLANG_SUBSTITUTE=hisparse_swap, specreg's swapper serves SGLang's HiSparse "
        "speculative swap for any number of draft tokens. Every token one step selects must be "
        "resident in the request's device buffer at once, so the buffer (device_buffer_size) "
        "must hold at least top_k tokens; the misses of all steps beyond it go to scratch rows "
        "sized automatically. SGLang takes top_k from the model's index_topk when it has one, "
        "which can exceed the --hisparse-config buffer.",
        "Resolving an SGLang config, or SGLang's coordinator building its swap manager, with "
        "top_k (index_topk, else --hisparse-config top_k) above device_buffer_size.",
        ("Raise device_buffer_size in --hisparse-config to top_k or more (4096 is usual).",
         "Lower top_k in --hisparse-config when the model has no index_topk."),
        "# before\n--hisparse-config '{\"top_k\": 2048, \"device_buffer_size\": 1024}'\n"
        "# after\n--hisparse-config '{\"top_k\": 2048, \"device_buffer_size\": 4096}'",
    ),
    _entry(
        "SR184", "Draft tokens do not fit HiSparse's extra page (substituted swap)",
        "SGLang's HiSparse keeps the newest token and every token of a verify in one extra "
        "page of the request's device buffer (a DSA page: 64 tokens), so a verify of N draft "
        "tokens needs N + 1 <= page_size. SGLang's own prepare_verify refuses the same at the "
        "first verify; with hisparse_swap specreg reports it when the config resolves and when "
        "the swap manager is built, before any weights load.",
        "--speculative-num-draft-tokens of page_size or more with --enable-hisparse and "
        "SPECREG_SGLANG_SUBSTITUTE=hisparse_swap.",
        ("Set --speculative-num-draft-tokens to page_size - 1 (63 on DSA) or fewer.",),
        "# before\n--speculative-num-draft-tokens 64\n# after\n--speculative-num-draft-tokens 16",
    ),
    _entry(
        "SR177", "Block size and draft tokens disagree",
        "DSpark verifies block_size + 1 tokens (gamma = block size) and DFlash block_size tokens; "
        "a --speculative-num-draft-tokens that says otherwise contradicts the block-size flag.",
        "--speculative-dspark-block-size or --speculative-dflash-block-size together with a "
        "different --speculative-num-draft-tokens.",
        ("Drop --speculative-num-draft-tokens; the block size determines it.",),
        "# before\n--speculative-dspark-block-size 7 --speculative-num-draft-tokens 4\n"
        "# after\n--speculative-dspark-block-size 7",
    ),
    _entry(
        "SR178", "DSpark or DFlash without a draft checkpoint",
        "DSpark and DFlash draft with a separate draft model, so SGLang refuses to start without "
        "one (\"requires setting --speculative-draft-model-path\"); vLLM needs the speculative "
        "config's 'model'. SGLang finds a DSpark draft on its own only when the target checkpoint "
        "bundles it (dspark_* keys in its config.json) or holds it in a dspark/ subfolder; specreg "
        "does the same and names the flag otherwise, whatever else is set.",
        "--speculative-algorithm dspark or dflash (vLLM: method dspark or dflash) without "
        "--speculative-draft-model-path (vLLM: 'model'), and no draft found in --model-path.",
        ("Pass --speculative-draft-model-path FOLDER, the draft checkpoint holding config.json.",
         "With vLLM, set 'model' in the speculative config to the draft checkpoint."),
        "# before\n--speculative-algorithm dspark --model-path /models/llama\n"
        "# after\n--speculative-algorithm dspark --model-path /models/llama "
        "--speculative-draft-model-path /models/llama-dspark",
    ),
    _entry(
        "SR179", "--kv-cache and --enable-hisparse contradict each other",
        "--enable-hisparse turns SGLang's HiSparse cache on; --kv-cache (specreg's alias) names a "
        "cache too. Naming another one, or none, beside --enable-hisparse asks for two things, and "
        "specreg will not pick one silently.",
        "--kv-cache none (or any cache but hisparse) together with --enable-hisparse.",
        ("For HiSparse, pass --enable-hisparse --disable-radix-cache and no --kv-cache.",
         "For no cache, drop --enable-hisparse (--kv-cache none is then the default)."),
        "# before\n--kv-cache none --enable-hisparse\n# after\n--enable-hisparse --disable-radix-cache",
    ),
    _entry(
        "SR188", "vLLM configuration the rejection_sampler substitution does not cover",
        "With SPECREG_VLLM_SUBSTITUTE=rejection_sampler, vLLM's V1 model runner builds specreg's "
        "rejection sampler, which verifies vLLM's standard rejection rule with specreg's chain "
        "verifier (min_p and logit_bias included). vLLM's other verification modes, its V2 model "
        "runner (which builds its own sampler) and draft probabilities (which specreg's rule "
        "would filter a second time) are not covered; running vLLM's kernels there while the "
        "user asked for specreg's would be a silent fallback, so the sampler is refused when "
        "vLLM builds it.",
        "vLLM builds the rejection sampler with rejection_sample_method other than 'standard', "
        "draft_sample_method 'probabilistic', or under the V2 model runner.",
        ("Drop rejection_sample_method / draft_sample_method from the speculative config.",
         "Export VLLM_USE_V2_MODEL_RUNNER=0 so vLLM builds its V1 model runner.",
         "Unset SPECREG_VLLM_SUBSTITUTE to run vLLM's own rejection sampler."),
        "# before\nSPECREG_VLLM_SUBSTITUTE=rejection_sampler vllm serve ...  # V2 runner chosen\n"
        "# after\nVLLM_USE_V2_MODEL_RUNNER=0 SPECREG_VLLM_SUBSTITUTE=rejection_sampler vllm serve ...",
    ),
    _entry(
        "SR190", "Drafter does not declare what it drafts from",
        "A drafter declares what it needs as its `needs` attribute: 'token_history' (token ids "
        "alone), 'target_hidden_states' or 'draft_model' (specreg.contract.protocols.DRAFTER_NEEDS). vLLM's "
        "custom_class seam hands a proposer token ids only, so specreg's proposer runs a drafter "
        "there by that declaration; a drafter that declares nothing, an unknown value, or "
        "'token_history' while its AlgorithmSpec says uses_target_hidden_states cannot be "
        "judged, and the plugin must say.",
        "vLLM constructs specreg.adapters.vllm_proposers.NAME for an algorithm whose drafter "
        "declares no (or no known) needs.",
        ("In the plugin, set the drafter class's needs = \"token_history\" when propose(history, "
         "lengths) needs nothing else.",
         "Otherwise declare what it needs and run it through vLLM's own method for it."),
        "# before\nclass MyDrafter:\n    def propose(self, history, lengths): ...\n"
        "# after\nclass MyDrafter:\n    needs = \"token_history\"\n"
        "    def propose(self, history, lengths): ...",
    ),
    _entry(
        "SR185", "NGRAM numbers SGLang does not read",
        "SGLang's NGRAM verifies a breadth-first tree of --speculative-num-draft-tokens nodes (the "
        "root included; 12 by default) built from its trie. It overwrites "
        "--speculative-eagle-topk with --speculative-ngram-max-bfs-breadth and never reads "
        "--speculative-num-steps, so specreg ignores both too and says so.",
        "SGLang-spelled flags with --speculative-algorithm NGRAM and --speculative-num-steps or "
        "--speculative-eagle-topk given.",
        ("Drop --speculative-num-steps and --speculative-eagle-topk; size the tree with "
         "--speculative-num-draft-tokens and its breadth with --speculative-ngram-max-bfs-breadth.",),
        "# before\n--speculative-algorithm NGRAM --speculative-num-steps 3 --speculative-eagle-topk 4\n"
        "# after\n--speculative-algorithm NGRAM --speculative-num-draft-tokens 8",
    ),
)
