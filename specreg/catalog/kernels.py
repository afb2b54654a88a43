"""Catalog entries SR900–SR999: kernel inputs shared by every kernel family."""

from specreg.catalog.entry import ErrorEntry

ENTRIES = (
    ErrorEntry(
        code="SR900",
        title="Kernel input has the wrong shape",
        meaning="A tensor passed to a kernel does not have the shape its contract requires.",
        when="Any kernel wrapper, before launch: it checks every input's rank and sizes.",
        solutions=(
            "Compare the shapes in the message with the kernel's contract (docs: Kernels).",
            "Check that batch, width and vocab sizes agree across the inputs.",
        ),
        example_fix=(
            "# before\nverify(candidates[:, :-1], target_logits)\n"
            "# after\nverify(candidates, target_logits)  # [b, n] and [b, n, V]"
        ),
    ),
    ErrorEntry(
        code="SR901",
        title="Kernel input has the wrong dtype",
        meaning="A tensor passed to a kernel has a dtype its contract does not accept.",
        when="Any kernel wrapper, before launch.",
        solutions=(
            "Cast the tensor to one of the accepted dtypes the message lists.",
            "Index tensors are int64 (token ids, lengths; int32 is accepted too); "
            "probabilities are floating point.",
        ),
        example_fix="# before\ncandidates.float()\n# after\ncandidates.long()",
    ),
    ErrorEntry(
        code="SR902",
        title="Kernel inputs are on different devices",
        meaning="All tensors of one kernel call must live on one device.",
        when="Any kernel wrapper, before launch.",
        solutions=("Move every input to the same device (`.to(device)`).",),
        example_fix="# before\nverify(tokens.cpu(), logits.cuda())\n# after\nverify(tokens.cuda(), logits.cuda())",
    ),
    ErrorEntry(
        code="SR903",
        title="Kernel index out of range",
        meaning=(
            "An index tensor holds a value outside the range it indexes (a token id at or above "
            "the vocab size, a negative position, a request slot past the pool). specreg never "
            "reads or writes out of bounds: it raises this error instead."
        ),
        when="Kernel wrappers check index ranges before launch on the CPU path and on request on GPU.",
        solutions=(
            "Check the producer of the index tensor; the message names the tensor and the bad value.",
            "Token ids must be < vocab size; slots must be < the pool size.",
        ),
        example_fix="# before\ncandidates[0, 1] = vocab_size\n# after\ncandidates[0, 1] = vocab_size - 1",
    ),
    ErrorEntry(
        code="SR904",
        title="Kernel input holds invalid values",
        meaning=(
            "A probability tensor holds NaN, infinity or negative values, or a row that sums to "
            "zero where a distribution is needed; or a scalar argument is outside its range."
        ),
        when=(
            "Sampling and verification kernels checking their float inputs: every value before "
            "launch with check_values=True (and by default on the CPU path); by default on the "
            "CPU, chain sampling, target-only, the drafter-invariant rule and sample_tokens check "
            "only what the rule reads, as it reads it and before returning: the [b, n] inputs "
            "(verify_lens, positions, coins) in full, p(x) and q(x) of every verified draft, and "
            "each row a draw reads (the stopping row's p, the rejected row's q, a q row whose "
            "q(x) is 0), the message naming the row. Chain and EAGLE tree greedy check NaN "
            "only in the rows they reach, and verify_chain_with_params on logits (without a "
            "grammar mask or penalties) only the maxima of the rows it reads. Rows the rule does "
            "not read are checked only with check_values=True."
        ),
        solutions=(
            "Compute probabilities with softmax in float32.",
            "Check the temperature is positive and the logits are finite.",
        ),
        example_fix="# before\nprobs = logits / T\n# after\nprobs = torch.softmax(logits.float() / T, dim=-1)",
    ),
    ErrorEntry(
        code="SR910",
        title="Sampling parameters do not match the batch",
        meaning=(
            "The per-request sampling parameters (`SamplingParams`) are not one value per request "
            "of this batch: a field has another length or rank, or `params` is not a "
            "SamplingParams."
        ),
        when="Every verifier taking `params=`, before launch, on CPU and GPU.",
        solutions=(
            "Build the parameters for exactly the requests of the batch, in batch order: "
            "`SamplingParams.of(batch, temperature=..., ...)`.",
            "After reordering or filtering the batch, reorder the parameters the same way "
            "(`params.select(index)`).",
        ),
        example_fix=(
            "# before\nparams = SamplingParams.of(8, temperature=0.7)  # batch has 6 requests\n"
            "# after\nparams = SamplingParams.of(candidates.shape[0], temperature=0.7)"
        ),
    ),
    ErrorEntry(
        code="SR911",
        title="Invalid temperature",
        meaning=(
            "A request's temperature is negative, NaN or infinite. Temperature 0 means greedy; "
            "a positive temperature divides the logits before filtering."
        ),
        when=(
            "Verifiers with `params=` on the CPU path (and on GPU with check_values=True); on GPU "
            "otherwise the request is flagged in `result.param_error` and accepts nothing."
        ),
        solutions=(
            "Pass 0 for greedy requests and a finite positive value otherwise.",
            "Check the request's sampling options where the server parses them.",
        ),
        example_fix="# before\nSamplingParams.of(b, temperature=-1.0)\n# after\nSamplingParams.of(b, temperature=0.0)",
    ),
    ErrorEntry(
        code="SR912",
        title="Invalid top-k",
        meaning="A request's top_k is negative or larger than the vocabulary (0 disables top-k).",
        when=(
            "Verifiers with `params=` on the CPU path (and on GPU with check_values=True); on GPU "
            "otherwise the request is flagged in `result.param_error`."
        ),
        solutions=(
            "Pass top_k=0 (or the vocab size) to keep every token.",
            "Clamp a user's top_k to the vocab size before building the parameters.",
        ),
        example_fix="# before\nSamplingParams.of(b, temperature=1.0, top_k=-1)\n# after\nSamplingParams.of(b, temperature=1.0, top_k=0)",
    ),
    ErrorEntry(
        code="SR913",
        title="Invalid top-p",
        meaning="A request's top_p is outside (0, 1] or not finite (1 disables top-p).",
        when=(
            "Verifiers with `params=` on the CPU path (and on GPU with check_values=True); on GPU "
            "otherwise the request is flagged in `result.param_error`."
        ),
        solutions=("Pass top_p=1.0 to keep every token, or a value in (0, 1).",),
        example_fix="# before\nSamplingParams.of(b, temperature=1.0, top_p=0.0)\n# after\nSamplingParams.of(b, temperature=1.0, top_p=1.0)",
    ),
    ErrorEntry(
        code="SR914",
        title="Invalid min-p",
        meaning="A request's min_p is outside [0, 1] or not finite (0 disables min-p).",
        when=(
            "Verifiers with `params=` on the CPU path (and on GPU with check_values=True); on GPU "
            "otherwise the request is flagged in `result.param_error`."
        ),
        solutions=("Pass min_p=0.0 to keep every token, or a value in (0, 1].",),
        example_fix="# before\nSamplingParams.of(b, temperature=1.0, min_p=1.5)\n# after\nSamplingParams.of(b, temperature=1.0, min_p=0.05)",
    ),
    ErrorEntry(
        code="SR915",
        title="Invalid per-request seed",
        meaning=(
            "A request's seed is below -1. Seeds >= 0 make a request's coins a hash of "
            "(seed, offset, column); -1 draws them from the caller's generator."
        ),
        when=(
            "Verifiers with `params=` on the CPU path (and on GPU with check_values=True); on GPU "
            "otherwise the request is flagged in `result.param_error`."
        ),
        solutions=("Pass a seed >= 0, or -1 (or leave seed out) for an unseeded request.",),
        example_fix="# before\nSamplingParams.of(b, temperature=1.0, seed=-5)\n# after\nSamplingParams.of(b, temperature=1.0, seed=5)",
    ),
    ErrorEntry(
        code="SR916",
        title="Log-probabilities asked for inputs that do not match",
        meaning=(
            "emitted_logprobs reads, for every token a verify step emitted, the target row it was "
            "drawn from: it needs the verifier's result and the same target scores the step "
            "verified ([b, W, V] or [b * W, V]), on one device, and at most V alternatives."
        ),
        when="top_n below 0 or above the vocabulary; target scores of another batch, shape or "
        "device than the result; an object that is not a verify result.",
        solutions=("Pass the result and the target scores of the same verify call.",
                   "Ask for 0 <= top_n <= V alternatives."),
        example_fix="# before\nemitted_logprobs(result, logits, top_n=10**6)\n"
        "# after\nemitted_logprobs(result, logits, top_n=5)",
    ),
    ErrorEntry(
        code="SR917",
        title="Grammar bitmask does not fit the scores",
        meaning=(
            "A token bitmask (token_bitmask=, apply_token_bitmask_) holds int32 words, "
            "ceil(V / 32) per verified row, in the layout of xgrammar's allocate_token_bitmask "
            "and llguidance: one row per request and position of the scores it masks, on their "
            "device."
        ),
        when="A bitmask of another dtype, shape or device than the target scores need.",
        solutions=("Allocate it with xgrammar.allocate_token_bitmask(b * n, V) (view [b, n, W]) "
                   "and fill one row per verified position.",),
        example_fix="# before\ntoken_bitmask=torch.ones(b, n, V, dtype=torch.bool)\n"
        "# after\ntoken_bitmask=xgrammar.allocate_token_bitmask(b * n, V).view(b, n, -1)",
    ),
    ErrorEntry(
        code="SR918",
        title="Grammar bitmask allows no token",
        meaning=(
            "Verification masks p and q with the grammar's bitmask and renormalises them; a row "
            "with no allowed token has no distribution to sample or verify from. A grammar that "
            "has finished allows only its stop tokens, so an all-zero row means the request "
            "went on past its end or the mask was not filled."
        ),
        when="token_bitmask with an all-zero row among the verified positions (checked on the "
        "CPU path, and on an accelerator with check_values=True).",
        solutions=("Fill every verified row with the matcher's mask "
                   "(matcher.fill_next_token_bitmask).",
                   "Stop the request once the matcher is terminated, or cap verify_lens."),
        example_fix="# before\nbitmask = torch.zeros(b, n, W, dtype=torch.int32)\n"
        "# after\nmatcher.fill_next_token_bitmask(bitmask.view(b * n, W), row)",
    ),
    ErrorEntry(
        code="SR919",
        title="Penalty value out of range",
        meaning=(
            "Penalties follow vLLM's ranges: repetition_penalty > 0 (1 = off), "
            "frequency_penalty and presence_penalty in [-2, 2] (0 = off), logit biases finite."
        ),
        when="Penalties with such a value, checked on the CPU path (and on an accelerator with "
        "check_values=True) before any launch.",
        solutions=("Pass the request's own sampling parameters: repetition 1.0, frequency and "
                   "presence 0.0 to switch them off.",),
        example_fix="# before\nPenalties.of(b, repetition=0.0)\n# after\nPenalties.of(b, repetition=1.0)",
    ),
    ErrorEntry(
        code="SR920",
        title="Penalty inputs do not fit the batch",
        meaning=(
            "Penalties hold per-request values (float32 [b]), the history as int64 token ids "
            "([b, P] prompt, [b, L] output, -1 padded) and the logit bias ([b, K] distinct ids "
            "with [b, K] values), on the logits' device; the context is [b, n, D] draft tokens."
        ),
        when="Another shape, dtype or device; ids outside [-1, V); a bias id repeated within a "
        "request.",
        solutions=("Build them with Penalties.of(batch, ..., device=logits.device).",),
        example_fix="# before\nPenalties.of(b, logit_bias=[{5: 1.0}])  # b = 2\n"
        "# after\nPenalties.of(b, logit_bias=[{5: 1.0}, {}])",
    ),
    ErrorEntry(
        code="SR921",
        title="Draft length above the plan's maximum",
        meaning=(
            "Per-request draft lengths (draft_lengths=, one int per request; 0 = no "
            "speculation for that request) cap how many drafts each request verifies in a step. "
            "Buffers and widths are the plan's maxima, so no request can ask for more drafts "
            "than the call verifies: a chain's n - 1 drafts, a tree's depth (num_steps). Each "
            "request outside [0, maximum] is its own problem, all reported at once."
        ),
        when="A drafter's or verifier's draft_lengths= with a negative length or one above the "
        "maximum, checked before any launch (host lists always; tensors on the CPU path, and "
        "on an accelerator with check_values=True; unchecked accelerator values are clamped).",
        solutions=("Cap each request's draft length at the plan's maximum "
                   "(min(length, plan.gamma) for chains, num_steps for trees).",
                   "Serve a plan with a larger maximum: --speculative-num-steps / "
                   "--speculative-num-draft-tokens (SGLang, specreg CLI), num_speculative_tokens "
                   "(vLLM --speculative-config)."),
        example_fix="# before\nverifier.verify_greedy(candidates, logits, draft_lengths=[0, 7])"
        "  # gamma 4\n# after\nverifier.verify_greedy(candidates, logits, draft_lengths=[0, 4])",
    ),
    ErrorEntry(
        code="SR922",
        title="Draft lengths do not fit the batch",
        meaning=(
            "draft_lengths states one draft length per request: a sequence of b ints, or an "
            "int32/int64 tensor [b] on the verified tensors' device. It replaces the chain "
            "kernels' verify_lens (verify_lens = draft_lengths + 1), so the two are not given "
            "together."
        ),
        when="draft_lengths of another length, a float or bool dtype, another device, "
        "non-integer entries, or draft_lengths together with verify_lens.",
        solutions=("Pass torch.tensor(lengths, dtype=torch.int64, device=logits.device), or a "
                   "list of b ints.",
                   "Pass draft_lengths alone, not with verify_lens."),
        example_fix="# before\nverify_greedy(c, logits, draft_lengths=[2, 0], verify_lens=v)\n"
        "# after\nverify_greedy(c, logits, draft_lengths=[2, 0])",
    ),
    ErrorEntry(
        code="SR926",
        title="Too many children to draw without replacement",
        meaning=(
            "A tree drafter sampling with per-request parameters draws each branch's k children "
            "from the filtered draft distribution q without replacement (Gumbel-top-k), so k "
            "distinct tokens must exist: k is at most the vocabulary size. Children beyond q's "
            "support are drawn last and carry no mass; the verifier rejects them."
        ),
        when="specreg.step.draft_sampling.sample_children (EAGLE's drafter started with params=) "
        "with k outside [1, V], checked before any draw.",
        solutions=("Use a topk no larger than the draft model's vocabulary "
                   "(--speculative-eagle-topk for SGLang and the specreg CLI).",),
        example_fix="# before\nsample_children(logits, params, 200)  # V = 96\n"
        "# after\nsample_children(logits, params, 4)",
    ),
    ErrorEntry(
        code="SR927",
        title="Both params= and temperature= given to a drafter",
        meaning=(
            "A drafter samples either with one temperature for the batch (temperature=) or with "
            "each request's own SamplingParams (params=: temperature, top-k, top-p, min-p, "
            "greedy requests at temperature 0), never both: the two would disagree on the q the "
            "verifier checks the drafts against."
        ),
        when="BlockDrafter.propose (dspark, dflash) with params= and a non-zero temperature=.",
        solutions=("Drop temperature= and put each request's temperature in "
                   "SamplingParams.of(batch, temperature=[...]).",),
        example_fix="# before\ndrafter.propose(logits, anchor, temperature=0.7, params=params)\n"
        "# after\ndrafter.propose(logits, anchor, params=params)",
    ),
    ErrorEntry(
        code="SR928",
        title="Draft logits asked of a deterministic tree draft",
        meaning=(
            "A tree drafter gives the verifier each node's draft logits (the q its children "
            "were drawn from) only when it drew the children from the requests' filtered q, "
            "i.e. when the draft was started with params=. A deterministic top-k draft has no "
            "such q: it is verified by the target-only rule, without draft logits."
        ),
        when="EagleDrafter.draft_logits(draft) or MedusaDrafter.draft_probs(draft) on a "
        "draft started without params=.",
        solutions=("Start the draft with drafter.start(logits, hidden, params=params, "
                   "generator=...).",
                   "Verify without draft_logits= (the target-only rule)."),
        example_fix="# before\ndraft = drafter.start(logits, hidden)\n"
        "# after\ndraft = drafter.start(logits, hidden, params=params, generator=g)",
    ),
    ErrorEntry(
        code="SR929",
        title="Two draft distributions given to one tree verification",
        meaning=(
            "The tree verifier's with-draft rule reads one q per node: either draft scores it "
            "filters by each request's parameters (draft_logits, EAGLE's) or the q the drafter "
            "already filtered and drew the children from (draft_probs / draft_q, Medusa's "
            "sampled trees), read as given. Both at once would name two q for one node."
        ),
        when="TreeVerifier.verify_from_logits (EAGLE's and Medusa's plan verifier) with "
        "draft_logits= and draft_probs=, or "
        "verify_tree_with_params with draft= and draft_q=.",
        solutions=("Pass the one the drafter returned: draft_probs= for a Medusa "
                   "SampledTree's draft_probs, draft_logits= for EagleDrafter.draft_logits.",),
        example_fix="# before\nverifier.verify_from_logits(tree, logits, params=params,\n"
        "    draft_logits=head_logits, draft_probs=sampled.draft_probs)\n"
        "# after\nverifier.verify_from_logits(tree, logits, params=params,\n"
        "    draft_probs=sampled.draft_probs)",
    ),
    ErrorEntry(
        code="SR930",
        title="Keyword a verifier or drafter method does not take",
        meaning=(
            "Every public method of a plan's verifier and drafter names the keywords it takes "
            "in its signature (help() and an IDE show them). A keyword it does not have, a "
            "misspelling such as seeds= for keys=, or one that does not apply to the call (a "
            "grammar's token_bitmask= or penalties= to a verify call without params=, seed= "
            "without params=) would otherwise be dropped or reach an internal function. The "
            "message names the method, the closest keyword it takes and all of them. The error "
            "is also a TypeError, as Python's own for an unexpected keyword."
        ),
        when="Any verify or draft call of ChainVerifier, the plugins' verifiers and drafters, "
        "before anything runs.",
        solutions=(
            "Rename the keyword to the one the message suggests, or pick one it lists "
            "(docs: Verifying your own tensors).",
            "A request's seed is its key: keys=[b] (or params.seed with params=).",
            "token_bitmask= and penalties= are applied with per-request parameters: pass "
            "params=SamplingParams.of(b, temperature=...).",
        ),
        example_fix="# before\nverifier.verify_sampling(candidates, p, q, seeds=seeds)\n"
        "# after\nverifier.verify_sampling(candidates, p, q, keys=seeds)",
    ),
)
