"""Catalog entries SR191-SR199: the opt-in, lossy acceptance rules (`specreg.contract.acceptance_rules`)."""

from specreg.catalog.entry import ErrorEntry

_FLAGS = (
    "SGLang: --speculative-accept-threshold-single / --speculative-accept-threshold-acc; vLLM "
    "speculative config: typical_acceptance_sampler_posterior_threshold / _alpha, "
    "synthetic_acceptance_rates / synthetic_acceptance_length; SpecConfig(acceptance={...})"
)

ENTRIES = (
    ErrorEntry(
        code="SR191",
        title="A lossy acceptance rule is in use (warning)",
        meaning=(
            "The config asks for relaxed thresholds, typical acceptance or synthetic acceptance. "
            "Under any of them the emitted tokens are NOT distributed as the target model's "
            "(relaxed and typical accept drafts the lossless rule would reject; synthetic "
            "acceptance ignores the drafts' quality entirely, for benchmarks). The plan reports "
            "it as plan.lossy and in `specreg plan` / `specreg check`; it is never on by "
            "default."
        ),
        when=f"Resolving or checking a config that sets one of: {_FLAGS}.",
        solutions=(
            "For production outputs drop the setting: the defaults are the lossless rule.",
            "Keep it knowingly for throughput at a quality cost, or for benchmarks that measure "
            "kernel and loop speed apart from draft quality (synthetic).",
        ),
        example_fix=(
            "# before\n--speculative-accept-threshold-acc 0.5\n"
            "# after (lossless)\n# (no --speculative-accept-threshold-* flags)"
        ),
    ),
    ErrorEntry(
        code="SR192",
        title="Acceptance threshold out of range",
        meaning=(
            "SGLang's relaxed acceptance accepts draft x when coin * q(x) * threshold_acc < p(x) "
            "or p(x) >= threshold_single. threshold_single must lie in [0, 1] and threshold_acc "
            "in (0, 1]; 1.0 for both is the lossless rule."
        ),
        when=(
            "--speculative-accept-threshold-single or --speculative-accept-threshold-acc (or "
            "acceptance={'threshold_single'|'threshold_acc': ...}) outside its range."
        ),
        solutions=(
            "Set the threshold within its range; the message names the flag.",
            "Leave both at 1.0 (or unset) for lossless verification.",
        ),
        example_fix=(
            "# before\n--speculative-accept-threshold-acc 0\n"
            "# after\n--speculative-accept-threshold-acc 0.5"
        ),
    ),
    ErrorEntry(
        code="SR193",
        title="Typical-acceptance parameter out of range",
        meaning=(
            "Typical acceptance (Medusa, vLLM's TypicalAcceptanceSampler) accepts x when "
            "p(x) > min(posterior_threshold, posterior_alpha * exp(-H(p))). posterior_threshold "
            "must lie in (0, 1], posterior_alpha in [0, inf); vLLM's defaults are 0.09 and 0.3."
        ),
        when=(
            "typical_acceptance_sampler_posterior_threshold / _alpha in a vLLM speculative config "
            "(or acceptance={'posterior_threshold'|'posterior_alpha': ...}) outside its range."
        ),
        solutions=("Set the value within its range, or drop it to take vLLM's default.",),
        example_fix=(
            "# before\n{\"typical_acceptance_sampler_posterior_threshold\": 1.5}\n"
            "# after\n{\"typical_acceptance_sampler_posterior_threshold\": 0.09}"
        ),
    ),
    ErrorEntry(
        code="SR194",
        title="Synthetic acceptance values invalid",
        meaning=(
            "Synthetic acceptance fixes what verification accepts, for benchmarks. Give exactly "
            "one of: synthetic_acceptance_rates, one rate in [0, 1] per draft position "
            "(gamma of them), non-increasing (rate i is the chance of accepting more than i "
            "drafts); or synthetic_acceptance_length in [1, gamma + 1], the tokens emitted per "
            "step with the bonus (vLLM's rules), with synthetic_method 'match-expected' "
            "(default: floor or ceil) or 'multinomial' (round(Normal(length, 1)), clamped), "
            "SGLang's SGLANG_SIMULATE_ACC_METHOD values."
        ),
        when=(
            "A vLLM speculative config (or acceptance={...}) with both, with rates of the wrong "
            "count, outside [0, 1] or increasing, a length outside [1, gamma + 1], or an unknown "
            "synthetic_method (or one without a length)."
        ),
        solutions=(
            "Give one rate per draft position, non-increasing, each in [0, 1].",
            "Or give one length in [1, num_speculative_tokens + 1].",
        ),
        example_fix=(
            "# before (num_speculative_tokens 3)\n{\"synthetic_acceptance_rates\": [0.5, 0.8]}\n"
            "# after\n{\"synthetic_acceptance_rates\": [0.8, 0.6, 0.4]}"
        ),
    ),
    ErrorEntry(
        code="SR195",
        title="More than one lossy acceptance rule",
        meaning=(
            "Relaxed thresholds, typical acceptance and synthetic acceptance are alternative "
            "rules; a plan applies one at a time, so asking for two has no meaning."
        ),
        when=f"A config that sets the parameters of two of the rules ({_FLAGS}).",
        solutions=("Keep the settings of one rule and drop the others'.",),
        example_fix=(
            "# before\n--speculative-accept-threshold-acc 0.5 plus synthetic_acceptance_length 3\n"
            "# after\n--speculative-accept-threshold-acc 0.5"
        ),
    ),
    ErrorEntry(
        code="SR196",
        title="The acceptance rule does not reach this verify call",
        meaning=(
            "The plan's lossy acceptance rule is implemented for every chain and block verify "
            "call: probabilities or logits, with or without per-request sampling parameters "
            "(params=), and greedy verification (thresholds and typical leave greedy exact; "
            "synthetic takes its count); in EAGLE, by the tree kernel's thresholds. Two paths "
            "have no lossy variant: the ngram / lookup tree verifiers (verify_tree_sampling "
            "under any lossy rule, verify_tree_greedy under synthetic acceptance) and "
            "verify_greedy_from_predict under synthetic acceptance (it sees only argmax ids). "
            "Verifying there losslessly would be a silent fallback, so the call is refused."
        ),
        when=(
            "A lookup (ngram) tree verify, or verify_greedy_from_predict, on a plan with a lossy "
            "acceptance rule the call cannot apply."
        ),
        solutions=(
            "Verify chains (verify_sampling, verify_target_only, verify_from_logits, "
            "verify_greedy; params= included), which apply the rule.",
            "For synthetic greedy runs pass the target logits to verify_greedy instead of the "
            "argmax ids.",
            "Or resolve the plan without the lossy acceptance setting.",
        ),
        example_fix=(
            "# before\nverifier.verify_greedy_from_predict(c, argmax_ids)  # synthetic plan\n"
            "# after\nverifier.verify_greedy(c, target_logits)"
        ),
    ),
    ErrorEntry(
        code="SR197",
        title="Acceptance rule value of the wrong type",
        meaning=(
            "SpecConfig.acceptance is a mapping of rule fields (threshold_single, threshold_acc, "
            "posterior_threshold, posterior_alpha, synthetic_rates, synthetic_length; the "
            "framework spellings too) whose values are finite numbers (synthetic_rates a list)."
        ),
        when="acceptance is not a mapping, has an unknown key, or a value is not a number.",
        solutions=("Pass a dict of the known fields with numeric values.",),
        example_fix=(
            "# before\nSpecConfig(algorithm='eagle', acceptance={'threshold': 'low'})\n"
            "# after\nSpecConfig(algorithm='eagle', acceptance={'threshold_acc': 0.5})"
        ),
    ),
    ErrorEntry(
        code="SR198",
        title="Typical or synthetic acceptance on a tree of topk > 1",
        meaning=(
            "Typical and synthetic acceptance are chain rules (specreg.kernels.relaxed): a tree "
            "drafter runs them when topk is 1, its tree then being a chain. On a wider tree they "
            "would have to choose among siblings, which neither rule defines; the relaxed "
            "thresholds are the tree kernel's own and work on any tree. (EAGLE reports its own "
            "SR315 for the same cause.)"
        ),
        when=(
            "Resolving or checking a tree algorithm (EAGLE, Medusa) with topk above 1 and typical "
            "or synthetic acceptance set."
        ),
        solutions=(
            "Draft a chain: topk 1 (--speculative-eagle-topk 1).",
            "Or use the relaxed thresholds, which every tree verifier takes.",
        ),
        example_fix=(
            "# before\n{\"algorithm\": \"medusa\", \"acceptance\": {\"posterior_threshold\": 0.1}}\n"
            "# after\n{\"algorithm\": \"medusa\", \"topk\": 1, \"acceptance\": "
            "{\"posterior_threshold\": 0.1}}"
        ),
    ),
    ErrorEntry(
        code="SR199",
        title="Processed logprobs of a lossy verify result",
        meaning=(
            "emitted_logprobs reports, for a sampled request, the log-probability under the "
            "filtered target (temperature, top-k, top-p, min-p), the distribution a lossless "
            "verify draws from. Under a lossy acceptance rule (relaxed thresholds, typical, "
            "synthetic: VerifyResult.acceptance) the sampled tokens are drawn from no such "
            "distribution, so those values would misstate them; the call is refused instead of "
            "returning them."
        ),
        when=(
            "emitted_logprobs(result, target, params=...) without raw=True, where result comes "
            "from a lossy plan's verifier and params holds a request with temperature > 0."
        ),
        solutions=(
            "Ask for raw logprobs (the target's unprocessed log-softmax): raw=True; vLLM "
            "--logprobs-mode raw_logprobs.",
            "Or resolve the plan without the lossy acceptance setting for requests that need "
            "processed logprobs.",
        ),
        example_fix=(
            "# before\nemitted_logprobs(result, logits, params=params)  # lossy plan\n"
            "# after\nemitted_logprobs(result, logits, params=params, raw=True)"
        ),
    ),
)
