"""Catalog entries SR200–SR299: the EAGLE plugin (tree drafting and verification)."""

from specreg.catalog import ErrorEntry

ENTRIES: tuple[ErrorEntry, ...] = (
    ErrorEntry(
        code="SR200",
        title="EAGLE num_draft_tokens exceeds the tree the draft can produce",
        meaning=(
            "The verify width num_draft_tokens counts the root plus the drafts kept from the tree. "
            "num_steps draft steps with topk branches produce at most "
            "1 + topk + (num_steps - 1) * topk**2 nodes, so a larger width cannot be filled."
        ),
        when="Resolving or checking an eagle/eagle3 config with a large num_draft_tokens.",
        solutions=(
            "Lower --speculative-num-draft-tokens to at most the node count the message gives.",
            "Raise --speculative-num-steps or --speculative-eagle-topk to grow the tree.",
            "Leave num_draft_tokens unset to infer min(tree nodes, 1 + num_steps * topk).",
        ),
        example_fix=(
            "# before\n--speculative-num-steps 1 --speculative-eagle-topk 2 "
            "--speculative-num-draft-tokens 8\n"
            "# after\n--speculative-num-steps 1 --speculative-eagle-topk 2 "
            "--speculative-num-draft-tokens 3"
        ),
    ),
    ErrorEntry(
        code="SR201",
        title="EAGLE chain (topk 1) needs num_draft_tokens = num_steps + 1",
        meaning=(
            "With topk 1 the draft tree is a chain of num_steps tokens, so the verify width is "
            "exactly num_steps + 1 (the root plus every draft). SGLang silently rewrites the value; "
            "specreg reports it so the buffers you size match the plan."
        ),
        when="An eagle/eagle3 config sets topk 1 and a num_draft_tokens other than num_steps + 1.",
        solutions=(
            "Set --speculative-num-draft-tokens to num_steps + 1, or leave it unset to infer it.",
            "Raise --speculative-eagle-topk above 1 to draft a tree of that width.",
        ),
        example_fix=(
            "# before\n--speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 6\n"
            "# after\n--speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 4"
        ),
    ),
    ErrorEntry(
        code="SR210",
        title="Invalid EAGLE draft tree",
        meaning=(
            "A selected draft's parent is not among the selected drafts of the same request, or "
            "walking up from a draft does not reach the root within `depth` steps. The tree "
            "cannot be built; nothing was written. SGLang prints 'invalid eagle tree' and "
            "continues with a broken mask; specreg refuses. On the GPU path the kernel never walks "
            "outside the request's row: it sets the request's entry of `invalid` instead."
        ),
        when=(
            "build_tree(...) with a top_scores_index that dropped a parent (NaN draft scores, or "
            "ties between a parent and its child), a parent_list from another batch, or a depth "
            "smaller than the tree's."
        ),
        solutions=(
            "Check the draft log-probabilities for NaN; organize_draft_results keeps parents when "
            "the scores are finite products of probabilities.",
            "Pass the parent_list and top_scores_index of the same draft step and batch.",
            "Pass depth = num_steps of the draft loop.",
        ),
        example_fix=(
            "# before\nbuild_tree(..., depth=2)  # the draft ran 3 steps\n"
            "# after\nbuild_tree(..., depth=3)"
        ),
    ),
    ErrorEntry(
        code="SR211",
        title="Unknown EAGLE tree mask mode",
        meaning="The tree mask mode is not one of full, qlen_only, qlen_only_bitpacking.",
        when="build_tree(..., mask_mode=...) or TreeVerifier / EagleVerifier(mask_mode=...).",
        solutions=(
            "Use 'full' (prefix columns included), 'qlen_only' (an N x N block per request) or "
            "'qlen_only_bitpacking' (one packed integer row per node).",
        ),
        example_fix="# before\nmask_mode='bitpack'\n# after\nmask_mode='qlen_only_bitpacking'",
    ),
    ErrorEntry(
        code="SR212",
        title="Bit-packed tree mask needs at most 32 tree nodes",
        meaning=(
            "qlen_only_bitpacking stores each node's row as one uint8/int16/int32 word, so the "
            "verify width num_draft_tokens must be at most 32."
        ),
        when="build_tree(..., mask_mode='qlen_only_bitpacking') with num_verify_tokens > 32.",
        solutions=(
            "Use mask_mode='qlen_only' or 'full' for wider trees.",
            "Lower --speculative-num-draft-tokens to 32 or fewer.",
        ),
        example_fix=(
            "# before\nbuild_tree(..., num_verify_tokens=48, mask_mode='qlen_only_bitpacking')\n"
            "# after\nbuild_tree(..., num_verify_tokens=48, mask_mode='qlen_only')"
        ),
    ),
    ErrorEntry(
        code="SR213",
        title="EAGLE draft results are inconsistent",
        meaning=(
            "The per-step draft outputs (score_list, token_list, parents_list) must have one "
            "entry per draft step with the shapes the EAGLE draft loop produces, and the number "
            "of drafts kept (num_draft_tokens - 1) cannot exceed the number of drafted tokens."
        ),
        when="organize_draft_results(...) or EagleVerifier.build_tree(score_list=...).",
        solutions=(
            "Pass the lists exactly as select_top_k_tokens returns them, one entry per step.",
            "Check num_draft_tokens against 1 + topk + (num_steps - 1) * topk**2.",
        ),
        example_fix=(
            "# before\norganize_draft_results(scores[:1], tokens, parents, 8)\n"
            "# after\norganize_draft_results(scores, tokens, parents, 8)"
        ),
    ),
    ErrorEntry(
        code="SR214",
        title="An EAGLE draft has a step count the plan does not serve",
        meaning=(
            "The plan's drafter and verifier serve the main config's num_steps and every "
            "adaptive candidate's; each step count has its own verify width. A draft with "
            "another number of steps (or one step past the largest) has no width to build "
            "its tree with."
        ),
        when="EagleDrafter.step / tree, or EagleVerifier.build_tree, at run time.",
        solutions=(
            "Run exactly the main config's num_steps draft steps, or one candidate's.",
            "Add the step count to --speculative-candidate-steps and resolve again.",
        ),
        example_fix=(
            "draft = plan.drafter.start(logits, hidden)\n"
            "for _ in range(candidate.steps - 1):\n"
            "    draft = plan.drafter.step(draft, *draft_model(draft.input_ids, draft.hidden))\n"
            "tree = plan.drafter.tree(draft, bonus_tokens, seq_lens)"
        ),
    ),
    ErrorEntry(
        code="SR315",
        title="Typical or synthetic acceptance on an EAGLE tree (topk > 1)",
        meaning=(
            "The tree sampling kernel (specreg.kernels.tree_verify_sampling) implements SGLang's "
            "relaxed thresholds "
            "(--speculative-accept-threshold-single / -acc) on every tree; typical acceptance "
            "and synthetic acceptance are chain rules (specreg.kernels.relaxed), which an EAGLE "
            "plan runs when topk is 1 (the tree is a chain). On a wider tree they would have to "
            "choose among siblings, which neither rule defines."
        ),
        when=(
            "Resolving an eagle/eagle3 config with --speculative-eagle-topk above 1 and "
            "typical_acceptance_sampler_* or synthetic_acceptance_* (acceptance={...}) set."
        ),
        solutions=(
            "Use --speculative-eagle-topk 1 with typical or synthetic acceptance.",
            "Or use the relaxed thresholds, which the tree kernel takes.",
        ),
        example_fix=(
            "# before\n--speculative-eagle-topk 4 + synthetic_acceptance_length 3\n"
            "# after\n--speculative-eagle-topk 1 --speculative-num-steps 3 + "
            "synthetic_acceptance_length 3"
        ),
    ),
    ErrorEntry(
        code="SR316",
        title="Typical or synthetic acceptance with per-request sampling parameters (EAGLE)",
        meaning=(
            "An EAGLE plan with typical or synthetic acceptance verifies through the chain rule "
            "on probabilities the caller filtered; the per-request parameter path "
            "(params=, verify_from_logits) filters inside the tree kernel, which applies only "
            "the relaxed thresholds. Verifying losslessly there would be a silent fallback, so "
            "the call is refused."
        ),
        when=(
            "TreeVerifier.verify_sampling(..., params=...) or verify_from_logits on such a plan "
            "(EAGLE's EagleVerifier, Medusa's TreeVerifier)."
        ),
        solutions=(
            "Filter the probabilities per request and call verify_sampling without params=.",
            "Or use the relaxed thresholds, which the parameter path applies.",
        ),
        example_fix=(
            "# before\nplan.verifier.verify_from_logits(tree, logits, params=params)\n"
            "# after\nplan.verifier.verify_sampling(tree, filtered_probs)"
        ),
    ),
)
