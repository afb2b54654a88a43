"""Catalog entries SR480-SR489: the Medusa plugin (heads, static tree, checkpoint)."""

from specreg.catalog import ErrorEntry

BAD_HEADS = ErrorEntry(
    code="SR480",
    title="The Medusa checkpoint's head count is not a positive integer",
    meaning=(
        "Medusa drafts one tree level per head, so the heads' config.json must declare at "
        "least one head (medusa_num_heads, or vLLM's num_heads). A count of 0 leaves nothing "
        "to draft; vLLM would build an empty head list and fail at the first step."
    ),
    when="--speculative-algorithm medusa with a draft checkpoint whose medusa_num_heads / "
    "num_heads is 0, negative or not an integer (or medusa_num_layers / num_hidden_layers "
    "below 0).",
    solutions=(
        "Point --speculative-draft-model-path (vLLM: the speculative config's 'model') at the "
        "Medusa heads' checkpoint folder.",
        "Fix medusa_num_heads in its config.json (Medusa checkpoints ship 3-5 heads).",
    ),
    example_fix='# before\n{"medusa_num_heads": 0}\n# after\n{"medusa_num_heads": 4}',
)
TOO_MANY_STEPS = ErrorEntry(
    code="SR481",
    title="Medusa num_steps exceeds the checkpoint's heads",
    meaning=(
        "Each draft level is one Medusa head, so num_steps (the tree depth; vLLM's "
        "num_speculative_tokens) can use at most the heads the checkpoint has."
    ),
    when="A medusa config whose num_steps (or an adaptive candidate's) is above the heads' count.",
    solutions=(
        "Lower --speculative-num-steps (vLLM: num_speculative_tokens) to the head count, or leave "
        "it unset to use every head.",
        "Use a checkpoint with more heads.",
    ),
    example_fix="# before (4 heads)\n--speculative-num-steps 5\n# after\n--speculative-num-steps 4",
)
BAD_TREE = ErrorEntry(
    code="SR482",
    title="Medusa num_draft_tokens does not fit the static tree",
    meaning=(
        "The static tree keeps num_draft_tokens - 1 nodes: the top-1 chain through all "
        "num_steps heads first (so at least num_steps + 1 tokens), then the likeliest other "
        "choices, at most every path of topk choices per head "
        "(1 + topk + ... + topk**num_steps nodes). With topk 1 the tree is a chain of exactly "
        "num_steps + 1 tokens."
    ),
    when="A medusa config whose num_draft_tokens lies outside [num_steps + 1, tree nodes].",
    solutions=(
        "Leave --speculative-num-draft-tokens unset to infer min(tree nodes, "
        "1 + num_steps * topk).",
        "Raise --speculative-eagle-topk for a wider tree, or lower --speculative-num-steps.",
    ),
    example_fix=(
        "# before\n--speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 8\n"
        "# after\n--speculative-num-steps 3 --speculative-eagle-topk 2 "
        "--speculative-num-draft-tokens 8"
    ),
)
VOCAB_MISMATCH = ErrorEntry(
    code="SR483",
    title="The Medusa heads' vocabulary differs from the target's",
    meaning=(
        "Medusa heads output logits over the target's vocabulary, so the heads' config.json "
        "vocab_size must equal the target's (--model-path config.json)."
    ),
    when="A medusa config whose heads checkpoint and target declare different vocab_size.",
    solutions=("Use the Medusa heads trained for this target model.",),
    example_fix=(
        "# before\n--model-path vicuna-7b --speculative-draft-model-path medusa-llama3-8b\n"
        "# after\n--model-path vicuna-7b --speculative-draft-model-path medusa-vicuna-7b"
    ),
)
BAD_VOCAB = ErrorEntry(
    code="SR484",
    title="The Medusa heads' config.json has no usable vocab_size",
    meaning="vocab_size of the heads' config.json must be a positive integer when present.",
    when="A medusa heads checkpoint whose vocab_size is 0, negative or not an integer.",
    solutions=("Fix vocab_size in the heads' config.json, or remove it (the target's is used).",),
    example_fix='# before\n{"medusa_num_heads": 4, "vocab_size": "32k"}\n'
    '# after\n{"medusa_num_heads": 4, "vocab_size": 32000}',
)
HEAD_INPUTS = ErrorEntry(
    code="SR485",
    title="Medusa head outputs are inconsistent",
    meaning=(
        "MedusaDrafter builds the static tree from one logits row per head: head_logits "
        "[b, num_steps, V] (or start/step with [b, V] per head), with V >= topk, and a head "
        "count the plan serves (the main config's num_steps or an adaptive candidate's)."
    ),
    when="MedusaDrafter.start / step / tree / tree_from_heads at run time.",
    solutions=(
        "Pass every head's logits for the same requests, in head order.",
        "Use as many heads as the main config's num_steps, or one candidate's.",
    ),
    example_fix=(
        "head_logits = heads(last_hidden)  # [b, num_steps, V]\n"
        "tree = plan.drafter.tree_from_heads(head_logits, bonus_tokens, seq_lens)"
    ),
)

ENTRIES: tuple[ErrorEntry, ...] = (
    BAD_HEADS, TOO_MANY_STEPS, BAD_TREE, VOCAB_MISMATCH, BAD_VOCAB, HEAD_INPUTS,
)
