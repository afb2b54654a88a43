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
    ErrorEntry(
        code="SR301",
        title="Draft checkpoint config field is invalid",
        meaning=(
            "A field of the DSpark/DFlash draft config.json has the wrong type or lies outside its "
            "range: layer counts and block sizes are integers >= 1, token ids integers >= 0, "
            "target_layer_ids a non-empty list of ids, mask_token a non-empty string, layout keys "
            "booleans. Every invalid field is reported, each naming where it was read."
        ),
        when=(
            "DSparkDraftConfig.from_hf_config / DFlashDraftConfig.from_hf_config, `specreg check` "
            "or registry.resolve with --speculative-draft-model-path."
        ),
        solutions=(
            "Correct the field the message names (the key path says which of dspark_config, "
            "text_config, the top level or a dspark_* key it came from).",
            "Make sure the file is the draft checkpoint's config.json, not the target's.",
        ),
        example_fix='# before\n"dspark_config": {"markov_rank": "256"}\n# after\n"dspark_config": {"markov_rank": 256}',
    ),
    ErrorEntry(
        code="SR302",
        title="DSpark Markov head type missing or unsupported",
        meaning=(
            "DSpark's Markov head comes in three variants: vanilla, gated and rnn. A checkpoint "
            "with markov_rank > 0 must say which one it trained (bundled heads, marked by "
            "dspark_* keys, are vanilla)."
        ),
        when="Parsing a draft config whose markov_head_type is unknown, or absent while markov_rank > 0.",
        solutions=(
            "Set markov_head_type to vanilla, gated or rnn, as the checkpoint was trained.",
        ),
        example_fix='# before\n"markov_rank": 256\n# after\n"markov_rank": 256, "markov_head_type": "vanilla"',
    ),
    ErrorEntry(
        code="SR303",
        title="DSpark draft has no Markov head",
        meaning=(
            "DSpark corrects every draft slot with a Markov head of rank markov_rank; a draft "
            "config with markov_rank 0 (or none) is a plain DFlash draft."
        ),
        when="Resolving --speculative-algorithm dspark with a draft config without markov_rank > 0.",
        solutions=(
            "Use the DSpark checkpoint (its config has markov_rank and markov_head_type).",
            "Run the checkpoint as --speculative-algorithm dflash instead.",
        ),
        example_fix="# before\n--speculative-algorithm dspark   # DFlash checkpoint\n# after\n--speculative-algorithm dflash",
    ),
    ErrorEntry(
        code="SR304",
        title="Mask token id missing or outside the vocabulary",
        meaning=(
            "The draft block is [anchor, MASK, MASK, ...]; the mask token id must be set and be "
            "a valid id of the target vocabulary. The vocab size is read from target_vocab_size, "
            "else vocab_size, of the draft config."
        ),
        when="Resolving dspark or dflash with a draft config lacking mask_token_id, or with an id >= the vocab size.",
        solutions=(
            "Add mask_token_id (dspark_config.mask_token_id, or dspark_noise_token_id for a "
            "bundled head) to the draft config.",
            "Correct vocab_size / target_vocab_size if the id is right.",
        ),
        example_fix='# before\n"vocab_size": 1000, "mask_token_id": 1000\n# after\n"vocab_size": 1000, "mask_token_id": 999',
    ),
    ErrorEntry(
        code="SR305",
        title="DSpark gamma from the command line disagrees with the checkpoint",
        meaning=(
            "The draft checkpoint was trained for a fixed gamma (its block size); "
            "--speculative-num-draft-tokens n means gamma = n - 1. When both are given and "
            "differ, silently choosing one misreads every draft slot, so specreg refuses."
        ),
        when="--speculative-num-draft-tokens n with a draft config whose block size is not n - 1 (dense) or n (bonus-anchor).",
        solutions=(
            "Set --speculative-num-draft-tokens to the checkpoint's gamma + 1 (the message names it).",
            "Leave --speculative-num-draft-tokens unset; gamma then comes from the checkpoint.",
        ),
        example_fix="# checkpoint block_size 5 (gamma 5)\n# before\n--speculative-num-draft-tokens 8\n# after\n--speculative-num-draft-tokens 6",
    ),
    ErrorEntry(
        code="SR306",
        title="DSpark anchor layout contradicts the block size",
        meaning=(
            "Dense (sample-from-anchor) checkpoints have block_size = gamma; speculators "
            "bonus-anchor (1+N) checkpoints have block_size = gamma + 1. The config's layout "
            "keys and its block_size / speculative_tokens disagree, so either reading would "
            "misread every draft slot."
        ),
        when="A draft config with sample_from_anchor / dspark_bonus_anchor / speculators_model_type contradicting block_size and speculative_tokens, or with both layout keys contradicting each other.",
        solutions=(
            "Set sample_from_anchor to the layout the checkpoint was trained with "
            "(true = dense, false = bonus-anchor).",
            "Fix block_size or speculators_config speculative_tokens so they agree.",
        ),
        example_fix='# before (bonus-anchor, gamma 7)\n"sample_from_anchor": true, "block_size": 8, speculative_tokens 7\n# after\n"sample_from_anchor": false',
    ),
    ErrorEntry(
        code="SR307",
        title="Target layer id out of range",
        meaning=(
            "target_layer_ids names the target layers whose hidden states feed the draft; each "
            "must be below num_target_layers."
        ),
        when="Parsing a draft config whose target_layer_ids has an id >= num_target_layers.",
        solutions=("Correct target_layer_ids or num_target_layers in the draft config.",),
        example_fix='# before\n"num_target_layers": 32, "target_layer_ids": [1, 16, 32]\n# after\n"num_target_layers": 32, "target_layer_ids": [1, 16, 31]',
    ),
    ErrorEntry(
        code="SR308",
        title="No draft checkpoint config given (notice)",
        meaning=(
            "Without the draft config.json specreg resolves dspark/dflash from the command line "
            "or the defaults (gamma 7, block 16, dense layout) and cannot check the mask token, "
            "the Markov head or the anchor layout. A warning, not an error."
        ),
        when="Resolving or checking dspark/dflash without --speculative-draft-model-path.",
        solutions=("Pass --speculative-draft-model-path FOLDER, the draft checkpoint folder holding config.json.",),
        example_fix="# before\nspecreg check --speculative-algorithm dspark\n# after\nspecreg check --speculative-algorithm dspark --speculative-draft-model-path ckpt/",
    ),
    ErrorEntry(
        code="SR309",
        title="DSpark gamma defaulted to 7 (notice)",
        meaning=(
            "Neither --speculative-num-draft-tokens nor the draft config's block size set gamma, "
            "so the default gamma 7 (8 verify tokens) is used. A warning, not an error."
        ),
        when="A draft config without block_size / dspark_block_size / speculative_tokens, and no --speculative-num-draft-tokens.",
        solutions=(
            "Set --speculative-num-draft-tokens to gamma + 1.",
            "Add the trained block_size to the draft config.",
        ),
        example_fix="# after\n--speculative-num-draft-tokens 8",
    ),
    ErrorEntry(
        code="SR310",
        title="DFlash verify width exceeds the draft block",
        meaning=(
            "DFlash drafts a whole block in one forward and the target verifies its first n "
            "positions; n may be narrower than the block, never wider."
        ),
        when="--speculative-algorithm dflash with --speculative-num-draft-tokens above the checkpoint's block_size.",
        solutions=(
            "Set --speculative-num-draft-tokens to at most the block size.",
            "Leave it unset to verify the whole block.",
        ),
        example_fix="# block_size 16\n# before\n--speculative-num-draft-tokens 20\n# after\n--speculative-num-draft-tokens 16",
    ),
    ErrorEntry(
        code="SR311",
        title="Ragged verify needs DSpark",
        meaning=(
            "Per-request verify lengths (verify_lens) are a DSpark capability "
            "(supports_ragged_verify); DFlash verifies every request over the full width."
        ),
        when="Calling the dflash verifier with verify_lens.",
        solutions=(
            "Drop verify_lens for dflash.",
            "Use --speculative-algorithm dspark when requests need different verify lengths.",
        ),
        example_fix="# before\nplan.verifier.verify_greedy(c, logits, verify_lens=lens)   # dflash\n# after\nplan.verifier.verify_greedy(c, logits)",
    ),
    ErrorEntry(
        code="SR312",
        title="An adaptive candidate needs more drafts than one draft block holds",
        meaning=(
            "DSpark and DFlash draft a whole block in one forward; an adaptive candidate step s "
            "verifies the first s drafts of that block. DSpark's block holds gamma drafts "
            "(gamma from --speculative-num-draft-tokens or the checkpoint), DFlash's block "
            "size - 1. A larger candidate cannot be drafted."
        ),
        when="registry.check or registry.resolve of a dspark/dflash config with candidate steps.",
        solutions=(
            "Remove the candidate step the message names from --speculative-candidate-steps.",
            "Raise --speculative-num-draft-tokens (and use a checkpoint with that block size).",
        ),
        example_fix=(
            "# before\n--speculative-algorithm dspark --speculative-num-draft-tokens 4 "
            "--speculative-candidate-steps 1,3,5\n"
            "# after\n--speculative-algorithm dspark --speculative-num-draft-tokens 4 "
            "--speculative-candidate-steps 1,3"
        ),
    ),
    ErrorEntry(
        code="SR313",
        title="A block proposal asks for a gamma the plan does not serve",
        meaning=(
            "BlockDrafter.propose(..., gamma=g) proposes the first g drafts of the block; g must "
            "be the main config's gamma or one adaptive candidate's, the widths the verifier "
            "accepts."
        ),
        when="plan.drafter.propose at run time.",
        solutions=("Pass gamma=candidate.gamma for a candidate of plan.candidates, or omit it.",),
        example_fix="drafts, q = plan.drafter.propose(logits, anchor, head=head, gamma=3)",
    ),
    ErrorEntry(
        code="SR314",
        title="A draft config block_size that SGLang does not read",
        meaning=(
            "SGLang 0.5.23 takes DSpark's block (gamma) from dspark_block_size, else from the "
            "DFlash parse: dflash_config.block_size, else a top-level block_size. specreg reads it "
            "in the same order, so a block_size under dspark_config or text_config changes "
            "nothing; when it disagrees with the block used, this notice says so."
        ),
        when="--speculative-algorithm dspark with a draft config.json holding dspark_config.block_size (or text_config.block_size) unequal to the block read.",
        solutions=(
            "Move the block size to dflash_config.block_size (or dspark_block_size for a bundled head).",
            "Set --speculative-num-draft-tokens to the block the head was trained for, plus one.",
        ),
        example_fix='# before\n"dspark_config": {"block_size": 5, "markov_rank": 8}\n# after\n"dflash_config": {"block_size": 5}, "dspark_config": {"markov_rank": 8}',
    ),
)
