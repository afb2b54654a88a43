"""Catalog entries SR470-SR479: the standalone draft-model plugin (`draft_model`)."""

from specreg.catalog import ErrorEntry

VOCAB_MISMATCH = ErrorEntry(
    code="SR470",
    title="The draft model's vocabulary differs from the target's",
    meaning=(
        "A standalone draft model proposes token ids that the target verifies, so both must "
        "share one vocabulary: the same vocab_size in their config.json files. A draft with "
        "another vocabulary would propose ids the target reads as other tokens (or none at "
        "all); vLLM and SGLang fail only after loading both models."
    ),
    when=(
        "--speculative-algorithm STANDALONE (vLLM method draft_model) with "
        "--speculative-draft-model-path and --model-path whose config.json vocab_size differ."
    ),
    solutions=(
        "Pick a draft model of the target's family, trained with the target's tokenizer.",
        "Point --speculative-draft-model-path (vLLM: the speculative config's 'model') at the "
        "draft checkpoint, not at another model's folder.",
    ),
    example_fix=(
        "# before\n--model-path llama-3-8b --speculative-algorithm STANDALONE "
        "--speculative-draft-model-path qwen-0.5b\n"
        "# after\n--model-path llama-3-8b --speculative-algorithm STANDALONE "
        "--speculative-draft-model-path llama-3.2-1b"
    ),
)
BAD_DRAFT_CONFIG = ErrorEntry(
    code="SR471",
    title="The draft model's config.json lacks a usable vocab_size",
    meaning=(
        "specreg reads the draft checkpoint's vocab_size (top level, or text_config for "
        "multimodal checkpoints) to check it against the target's before any model loads. "
        "It must be a positive integer."
    ),
    when="A draft_model config whose draft checkpoint config.json has no vocab_size, or a bad one.",
    solutions=(
        "Point --speculative-draft-model-path at the folder holding the draft's own config.json.",
        "Fix vocab_size in that config.json.",
    ),
    example_fix='# before\n{"architectures": ["LlamaForCausalLM"]}\n'
    '# after\n{"architectures": ["LlamaForCausalLM"], "vocab_size": 128256}',
)
CHAIN_MISMATCH = ErrorEntry(
    code="SR472",
    title="draft_model: num_draft_tokens must be num_steps + 1",
    meaning=(
        "The draft model drafts one chain of num_steps tokens, verified with num_draft_tokens = "
        "num_steps + 1 tokens (the drafts plus the anchor). Other values would size the verify "
        "buffers for tokens that are never drafted."
    ),
    when="--speculative-num-steps and --speculative-num-draft-tokens both set, inconsistently.",
    solutions=(
        "Set only one of the two flags; the other is inferred (vLLM: num_speculative_tokens).",
        "Set num_draft_tokens to num_steps + 1.",
    ),
    example_fix=(
        "# before\n--speculative-num-steps 3 --speculative-num-draft-tokens 6\n"
        "# after\n--speculative-num-steps 3"
    ),
)
DRAFT_INPUTS = ErrorEntry(
    code="SR473",
    title="Draft-model drafting inputs are inconsistent",
    meaning=(
        "DraftModelDrafter.draft runs the framework's draft model: it needs the model, the "
        "committed history [b, L] with lengths [b] in [1, L], the draft KV lengths [b] (how many "
        "leading positions of each request's draft cache hold committed tokens, at most its "
        "length), and a gamma the plan serves. The draft model must return [b, V] logits "
        "over the plan's vocabulary."
    ),
    when="DraftModelDrafter.draft / propose / rollback at run time.",
    solutions=(
        "Pass the draft model runner: drafter.draft(model, history, lengths, cache_lens).",
        "Keep cache_lens from the previous step's drafter.rollback(...), or zeros for new requests.",
        "Draft the main config's gamma or one adaptive candidate's.",
    ),
    example_fix=(
        "draft = plan.drafter.draft(runner, history, lengths, cache_lens)\n"
        "out = plan.verifier.verify_greedy(draft.candidates(history, lengths), logits)\n"
        "cache_lens = plan.drafter.rollback(lengths, out.num_accepted, draft.gamma)"
    ),
)

ENTRIES: tuple[ErrorEntry, ...] = (VOCAB_MISMATCH, BAD_DRAFT_CONFIG, CHAIN_MISMATCH, DRAFT_INPUTS)
