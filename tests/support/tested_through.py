"""The modules of specreg/ and plugins/ without a test module of their own, each with the test that
exercises it and why it is tested there (tests/house/test_every_module_tested.py checks that the
test reaches it)."""

from __future__ import annotations

#: module path -> (test path, why that test is where it is tested)
TESTED_THROUGH: dict[str, tuple[str, str]] = {
    'specreg/__init__.py': (
        'tests/house/test_public_face.py',
        "the package's face: its pinned names are imported and checked there",
    ),
    'specreg/__main__.py': (
        'tests/house/test_public_face.py',
        'what `python -m specreg` runs: the public-face test runs it',
    ),
    'specreg/adapters/common.py': (
        'tests/adapters/test_sglang_adapter.py',
        "framework glue that runs inside SGLang's or vLLM's process: the test drives it there, in the pinned framework environment",
    ),
    'specreg/adapters/sglang.py': (
        'tests/adapters/test_sglang_adapter.py',
        "framework glue that runs inside SGLang's or vLLM's process: the test drives it there, in the pinned framework environment",
    ),
    'specreg/adapters/sglang_rules.py': (
        'tests/adapters/test_sglang_adapter.py',
        "framework glue that runs inside SGLang's or vLLM's process: the test drives it there, in the pinned framework environment",
    ),
    'specreg/adapters/sglang_seeded_coins.py': (
        'tests/adapters/test_sglang_tree_verify.py',
        "framework glue that runs inside SGLang's or vLLM's process: the test drives it there, in the pinned framework environment",
    ),
    'specreg/adapters/substitution_runtime.py': (
        'tests/adapters/test_sglang_hisparse_swap.py',
        "framework glue that runs inside SGLang's or vLLM's process: the test drives it there, in the pinned framework environment",
    ),
    'specreg/adapters/vllm.py': (
        'tests/adapters/test_filter_parity.py',
        "framework glue that runs inside SGLang's or vLLM's process: the test drives it there, in the pinned framework environment",
    ),
    'specreg/adapters/vllm_batch.py': (
        'tests/adapters/test_vllm_rejection_seams.py',
        "framework glue that runs inside SGLang's or vLLM's process: the test drives it there, in the pinned framework environment",
    ),
    'specreg/adapters/vllm_proposers.py': (
        'tests/lookup/test_vllm.py',
        "framework glue that runs inside SGLang's or vLLM's process: the test drives it there, in the pinned framework environment",
    ),
    'specreg/adapters/vllm_rows.py': (
        'tests/lookup/test_vllm.py',
        "framework glue that runs inside SGLang's or vLLM's process: the test drives it there, in the pinned framework environment",
    ),
    'specreg/backend.py': (
        'tests/registry/test_plan.py',
        'ground the whole core stands on: the test exercises it through its callers',
    ),
    'specreg/catalog/__init__.py': (
        'tests/ground/test_catalog.py',
        "catalog entries are data: the catalog test checks every entry's code, message, cause and fix",
    ),
    'specreg/catalog/acceptance.py': (
        'tests/ground/test_catalog.py',
        "catalog entries are data: the catalog test checks every entry's code, message, cause and fix",
    ),
    'specreg/catalog/core.py': (
        'tests/ground/test_catalog.py',
        "catalog entries are data: the catalog test checks every entry's code, message, cause and fix",
    ),
    'specreg/catalog/entry.py': (
        'tests/ground/test_catalog.py',
        "catalog entries are data: the catalog test checks every entry's code, message, cause and fix",
    ),
    'specreg/catalog/frameworks.py': (
        'tests/ground/test_catalog.py',
        "catalog entries are data: the catalog test checks every entry's code, message, cause and fix",
    ),
    'specreg/catalog/kernels.py': (
        'tests/ground/test_catalog.py',
        "catalog entries are data: the catalog test checks every entry's code, message, cause and fix",
    ),
    'specreg/catalog/plugins.py': (
        'tests/ground/test_catalog.py',
        "catalog entries are data: the catalog test checks every entry's code, message, cause and fix",
    ),
    'specreg/catalog/usage.py': (
        'tests/ground/test_catalog.py',
        "catalog entries are data: the catalog test checks every entry's code, message, cause and fix",
    ),
    'specreg/cli/child_build.py': (
        'tests/registry/test_author_mistakes.py',
        "`specreg check`'s child build: the author mistakes that need torch are reported there by the real command",
    ),
    'specreg/cli/demo_output.py': (
        'tests/cli/test_demo_text.py',
        'a part of the command: the test runs it',
    ),
    'specreg/cli/framework_findings.py': (
        'tests/cli/test_verdict.py',
        'the framework findings `plan` and `check` share: the one-verdict test runs both commands on the configs that raise them',
    ),
    'specreg/contract/filter_order.py': (
        'tests/adapters/test_filter_parity.py',
        'a contract value type: the test builds it through the configs and plans that carry it',
    ),
    'specreg/contract/framework_flags.py': (
        'tests/contract/test_config.py',
        'a contract value type: the test builds it through the configs and plans that carry it',
    ),
    'specreg/contract/protocols.py': (
        'tests/docs/test_docs.py',
        'a contract value type: the test builds it through the configs and plans that carry it',
    ),
    'specreg/contract/resolution.py': (
        'tests/contract/test_phase.py',
        'a contract value type: the test builds it through the configs and plans that carry it',
    ),
    'specreg/contract/sampling_params.py': (
        'tests/kernels/test_sampling_params.py',
        'a contract value type: the test builds it through the configs and plans that carry it',
    ),
    'specreg/contract/specs.py': (
        'tests/eagle/test_plugin.py',
        'a contract value type: the test builds it through the configs and plans that carry it',
    ),
    'specreg/contract/tree_sizes.py': (
        'tests/kernels/test_tree_fuzz.py',
        'a contract value type: the test builds it through the configs and plans that carry it',
    ),
    'specreg/errors.py': (
        'tests/ground/test_catalog.py',
        'the exception classes and Problem records: the catalog test builds and renders every code through them',
    ),
    'specreg/framework_args/model_config.py': (
        'tests/framework_args/test_flags_and_rules.py',
        'framework spellings and rules as data: the test translates flags through them',
    ),
    'specreg/framework_args/rules.py': (
        'tests/framework_args/test_flags_and_rules.py',
        'framework spellings and rules as data: the test translates flags through them',
    ),
    'specreg/integers.py': (
        'tests/contract/test_fuzz_config.py',
        'the integer checks every config field goes through: the config fuzz feeds them every kind of bad integer',
    ),
    'specreg/kernels/block_race.py': (
        'tests/kernels/test_chain_race.py',
        "the verifiers' two-level race in torch, shared by the families that draw (no family's): the test draws through it against the independent race and the reference",
    ),
    'specreg/kernels/checks.py': (
        'tests/step/test_draft_lengths.py',
        'a building block every kernel family shares: the test runs the families through it',
    ),
    'specreg/kernels/exp_log.py': (
        'tests/kernels/test_sampling.py',
        "the one exp and log of the torch path, shared by the filtering and pivot families (no family's): the test pins exp_'s bits and its floor (tests/kernels/test_filtering_numbers.py pins log_)",
    ),
    'specreg/kernels/pivot/__init__.py': (
        'tests/kernels/test_filtering_pivot.py',
        'part of the pivot kernel family, whose tests are named after what they check: the test runs its search through the filter, which reaches it by this entry',
    ),
    'specreg/kernels/pivot/reference.py': (
        'tests/kernels/test_filtering_pivot.py',
        'part of the pivot kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'specreg/kernels/pivot/torch_impl.py': (
        'tests/kernels/test_filtering_pivot.py',
        'part of the pivot kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'specreg/kernels/race_tiles.py': (
        'tests/kernels/test_chain_triton.py',
        "the race's Triton tiles, shared by the chain and tree sampling kernels (no family's): the test runs the chain kernels that race with them under TRITON_INTERPRET=1, against torch",
    ),
    'specreg/kernels/numba_rows.py': (
        'tests/kernels/test_chain_numba.py',
        "the compiled paths' lazy import of their passes and their raw row views (no family's): the test runs the chain path through them, bit for bit against torch, and without numba in a subprocess",
    ),
    'specreg/kernels/race_numba.py': (
        'tests/kernels/test_tree_numba.py',
        "the stream's words and the two-level race compiled for the CPU, shared by the chain and tree sampling compiled paths (no family's): the test holds the tree path bit for bit to torch and the reference (test_chain_numba holds the chain path)",
    ),
    'specreg/kernels/row_chunks.py': (
        'tests/kernels/test_kernel_references.py',
        "the CPU row chunks every family loops in (no family's): the test runs the chunked CPU paths in small chunks, against the references",
    ),
    'specreg/kernels/token_mask/__init__.py': (
        'tests/kernels/test_grammar_masks.py',
        'part of the token_mask kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'specreg/kernels/token_mask/reference.py': (
        'tests/kernels/test_grammar_masks.py',
        'part of the token_mask kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'specreg/kernels/token_mask/torch_impl.py': (
        'tests/kernels/test_grammar_masks.py',
        'part of the token_mask kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'specreg/kernels/token_mask/triton_impl.py': (
        'tests/kernels/test_grammar_masks.py',
        'part of the token_mask kernel family, whose tests are named after what they check: the test runs its Triton path under TRITON_INTERPRET=1, against the reference',
    ),
    'specreg/kernels/tree_coins/__init__.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_coins kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'specreg/kernels/tree_coins/reference.py': (
        'tests/kernels/test_tree_references.py',
        'part of the tree_coins kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'specreg/kernels/tree_coins/torch_impl.py': (
        'tests/kernels/test_tree_references.py',
        'part of the tree_coins kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'specreg/kernels/tree_lengths/__init__.py': (
        'tests/kernels/test_tree_draft_lengths.py',
        'part of the tree_lengths kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'specreg/kernels/tree_lengths/reference.py': (
        'tests/kernels/test_tree_draft_lengths.py',
        'part of the tree_lengths kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'specreg/kernels/tree_lengths/torch_impl.py': (
        'tests/kernels/test_tree_draft_lengths.py',
        'part of the tree_lengths kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'specreg/kernels/tree_verify_greedy/__init__.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_greedy kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'specreg/kernels/tree_verify_greedy/checks.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_greedy kernel family, whose tests are named after what they check: the test runs its input checks and the codes they raise',
    ),
    'specreg/kernels/tree_verify_greedy/reference.py': (
        'tests/kernels/test_boundaries_tree.py',
        'part of the tree_verify_greedy kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'specreg/kernels/tree_verify_greedy/torch_impl.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_greedy kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'specreg/kernels/tree_verify_greedy/triton_impl.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_greedy kernel family, whose tests are named after what they check: the test runs its Triton path under TRITON_INTERPRET=1, against the reference',
    ),
    'specreg/kernels/tree_verify_greedy/types.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_greedy kernel family, whose tests are named after what they check: the test runs its value types',
    ),
    'specreg/kernels/tree_verify_params/__init__.py': (
        'tests/kernels/test_tree_params.py',
        'part of the tree_verify_params kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'specreg/kernels/tree_verify_params/checks.py': (
        'tests/kernels/test_tree_params.py',
        'part of the tree_verify_params kernel family, whose tests are named after what they check: the test runs its input checks and the codes they raise',
    ),
    'specreg/kernels/tree_verify_params/reference.py': (
        'tests/kernels/test_tree_penalties.py',
        'part of the tree_verify_params kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'specreg/kernels/tree_verify_params/torch_impl.py': (
        'tests/kernels/test_tree_params.py',
        'part of the tree_verify_params kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'specreg/kernels/tree_verify_sampling/__init__.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_sampling kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'specreg/kernels/tree_verify_sampling/checks.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_sampling kernel family, whose tests are named after what they check: the test runs its input checks and the codes they raise',
    ),
    'specreg/kernels/tree_verify_sampling/numba_impl.py': (
        'tests/kernels/test_tree_numba.py',
        'part of the tree_verify_sampling kernel family, whose tests are named after what they check: the test runs its compiled CPU path (numba), bit for bit against the torch path and the reference, its dispatch and its fallback without numba',
    ),
    'specreg/kernels/tree_verify_sampling/numba_kernels.py': (
        'tests/kernels/test_tree_numba.py',
        'part of the tree_verify_sampling kernel family, whose tests are named after what they check: the test runs its compiled passes through the compiled CPU path, bit for bit against the torch path',
    ),
    'specreg/kernels/tree_verify_sampling/reference.py': (
        'tests/kernels/test_boundaries_tree.py',
        'part of the tree_verify_sampling kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'specreg/kernels/tree_verify_sampling/torch_impl.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_sampling kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'specreg/kernels/tree_verify_sampling/triton_impl.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_sampling kernel family, whose tests are named after what they check: the test runs its Triton path under TRITON_INTERPRET=1, against the reference',
    ),
    'specreg/kernels/tree_verify_sampling/types.py': (
        'tests/kernels/test_tree_verify.py',
        'part of the tree_verify_sampling kernel family, whose tests are named after what they check: the test runs its value types',
    ),
    'specreg/kernels/triton_shim.py': (
        'tests/house/test_import_graph.py',
        'a building block every kernel family shares: the test runs the families through it',
    ),
    'specreg/registry/compat.py': (
        'tests/registry/test_plan.py',
        'a part of loading and resolving: the test resolves plans through it',
    ),
    'specreg/registry/default_plugin.py': (
        'tests/registry/test_plugin_failures.py',
        'a part of loading and resolving: the test resolves plans through it',
    ),
    'specreg/registry/plan_checks.py': (
        'tests/registry/test_plan.py',
        'a part of loading and resolving: the test resolves plans through it',
    ),
    'specreg/registry/plugin_info.py': (
        'tests/registry/test_plugin_failures.py',
        'a part of loading and resolving: the test resolves plans through it',
    ),
    'specreg/registry/tables.py': (
        'tests/registry/test_registration_checks.py',
        'a part of loading and resolving: the test resolves plans through it',
    ),
    'specreg/registry/translate.py': (
        'tests/contract/test_config.py',
        'a part of loading and resolving: the test resolves plans through it',
    ),
    'specreg/step/acceptance_export.py': (
        'tests/step/test_acceptance_stats.py',
        'a part of the per-step objects: the test runs them through resolved plans',
    ),
    'specreg/step/chain_verifier.py': (
        'tests/step/test_verify_modes.py',
        'a part of the per-step objects: the test runs them through resolved plans',
    ),
    'specreg/step/chain_verifier_checks.py': (
        'tests/step/test_verify_modes.py',
        'a part of the per-step objects: the test runs them through resolved plans',
    ),
    'specreg/step/tree_verifier.py': (
        'tests/eagle/test_verify.py',
        "EAGLE's verifier is the core TreeVerifier plus build_tree: the EAGLE verify tests run it",
    ),
    'specreg/step/tree_verifier_checks.py': (
        'tests/eagle/test_verify.py',
        "the TreeVerifier's refusals: the EAGLE verify tests meet them through EagleVerifier",
    ),
    'specreg/step/tree_verifier_results.py': (
        'tests/eagle/test_verify.py',
        "the TreeVerifier's result conversion: every EAGLE verify test reads its results",
    ),
    'specreg/testing/__init__.py': (
        'tests/testing/test_loop.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/conformance_cache.py': (
        'tests/testing/test_conformance.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/conformance_lossless.py': (
        'tests/testing/test_conformance.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/conformance_report.py': (
        'tests/testing/test_conformance.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/demo_params.py': (
        'tests/kernels/test_tree_params.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/draft_model_step.py': (
        'tests/draft_model/test_plugin.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/draft_rules.py': (
        'tests/testing/test_with_draft.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/heads_step.py': (
        'tests/testing/test_with_draft.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/history_tree_step.py': (
        'tests/testing/test_with_draft.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/invariant.py': (
        'tests/testing/test_invariant_mode.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/kv.py': (
        'tests/testing/test_loop.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/lossless.py': (
        'tests/testing/test_loop.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/replay.py': (
        'tests/lookup/test_plugin.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/step_parts.py': (
        'tests/testing/test_with_draft.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/toy_model.py': (
        'tests/testing/test_toy_copy_bonus.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/transformers_models.py': (
        'tests/models/test_transformers.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'specreg/testing/tree_step.py': (
        'tests/testing/test_with_draft.py',
        'a part of the testing kit: the test runs the kit through it',
    ),
    'plugins/specreg_draft_model/checkpoint.py': (
        'tests/draft_model/test_plugin.py',
        "specreg_draft_model's checkpoint: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_draft_model/drafter.py': (
        'tests/draft_model/test_plugin.py',
        "specreg_draft_model's drafter: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_draft_model/errors.py': (
        'tests/draft_model/test_plugin.py',
        "specreg_draft_model's errors: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_dspark/__init__.py': (
        'tests/dspark/test_config.py',
        "specreg_dspark's __init__: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_dspark/checkpoint.py': (
        'tests/dspark/test_fuzz_config.py',
        "specreg_dspark's checkpoint: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_dspark/checkpoint_layout.py': (
        'tests/dspark/test_config.py',
        "specreg_dspark's checkpoint_layout: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_dspark/checkpoint_reader.py': (
        'tests/dspark/test_config.py',
        "specreg_dspark's checkpoint_reader: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_dspark/drafter.py': (
        'tests/dspark/test_widths.py',
        "specreg_dspark's drafter: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_dspark/errors.py': (
        'tests/dspark/test_config.py',
        "specreg_dspark's errors: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_dspark/kernels/draft_block/__init__.py': (
        'tests/dspark/test_kernels.py',
        'part of the draft_block kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'plugins/specreg_dspark/kernels/draft_block/reference.py': (
        'tests/dspark/test_reference.py',
        'part of the draft_block kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'plugins/specreg_dspark/kernels/draft_block/torch_impl.py': (
        'tests/dspark/test_kernels.py',
        'part of the draft_block kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'plugins/specreg_dspark/kernels/draft_block/triton_impl.py': (
        'tests/dspark/test_kernels.py',
        'part of the draft_block kernel family, whose tests are named after what they check: the test runs its Triton path under TRITON_INTERPRET=1, against the reference',
    ),
    'plugins/specreg_dspark/kernels/markov_greedy/__init__.py': (
        'tests/dspark/test_kernels.py',
        'part of the markov_greedy kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'plugins/specreg_dspark/kernels/markov_greedy/reference.py': (
        'tests/dspark/test_reference.py',
        'part of the markov_greedy kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'plugins/specreg_dspark/kernels/markov_greedy/torch_impl.py': (
        'tests/dspark/test_pruned_step.py',
        'part of the markov_greedy kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'plugins/specreg_dspark/kernels/markov_greedy/triton_impl.py': (
        'tests/dspark/test_kernels.py',
        'part of the markov_greedy kernel family, whose tests are named after what they check: the test runs its Triton path under TRITON_INTERPRET=1, against the reference',
    ),
    'plugins/specreg_dspark/kernels/markov_head/__init__.py': (
        'tests/dspark/test_markov.py',
        'part of the markov_head kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'plugins/specreg_dspark/kernels/markov_head/checks.py': (
        'tests/dspark/test_markov.py',
        'part of the markov_head kernel family, whose tests are named after what they check: the test runs its input checks and the codes they raise',
    ),
    'plugins/specreg_dspark/kernels/markov_head/reference.py': (
        'tests/dspark/test_reference.py',
        'part of the markov_head kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'plugins/specreg_dspark/kernels/markov_head/torch_impl.py': (
        'tests/dspark/test_markov.py',
        'part of the markov_head kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'plugins/specreg_dspark/plugin.py': (
        'tests/dspark/test_widths.py',
        "specreg_dspark's plugin: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_dspark/sizes.py': (
        'tests/dspark/test_config.py',
        "specreg_dspark's sizes: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_dspark/verifier.py': (
        'tests/dspark/test_widths.py',
        "specreg_dspark's verifier: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_eagle/drafter.py': (
        'tests/eagle/test_draft_lengths.py',
        "specreg_eagle's drafter: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_eagle/errors.py': (
        'tests/eagle/test_fuzz.py',
        "specreg_eagle's errors: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_eagle/sizes.py': (
        'tests/eagle/test_draft_lengths.py',
        "specreg_eagle's sizes: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_eagle/verifier.py': (
        'tests/eagle/test_fuzz.py',
        "specreg_eagle's verifier: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_hisparse/errors.py': (
        'tests/hisparse/test_layout.py',
        "specreg_hisparse's errors: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_hisparse/kernels/planned_copy/__init__.py': (
        'tests/hisparse/test_triton.py',
        'part of the planned_copy kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'plugins/specreg_hisparse/kernels/planned_copy/checks.py': (
        'tests/hisparse/test_triton.py',
        'part of the planned_copy kernel family, whose tests are named after what they check: the test runs its input checks and the codes they raise',
    ),
    'plugins/specreg_hisparse/kernels/planned_copy/reference.py': (
        'tests/hisparse/test_reference.py',
        'part of the planned_copy kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'plugins/specreg_hisparse/kernels/planned_copy/torch_impl.py': (
        'tests/hisparse/test_reference.py',
        'part of the planned_copy kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'plugins/specreg_hisparse/kernels/planned_copy/triton_impl.py': (
        'tests/hisparse/test_triton.py',
        'part of the planned_copy kernel family, whose tests are named after what they check: the test runs its Triton path under TRITON_INTERPRET=1, against the reference',
    ),
    'plugins/specreg_hisparse/kernels/planned_copy/types.py': (
        'tests/hisparse/test_triton.py',
        'part of the planned_copy kernel family, whose tests are named after what they check: the test runs its value types',
    ),
    'plugins/specreg_hisparse/sglang_seam.py': (
        'tests/adapters/test_sglang_hisparse_swap.py',
        "specreg_hisparse's sglang_seam: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_hisparse/sizes.py': (
        'tests/hisparse/test_layout.py',
        "specreg_hisparse's sizes: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_hisparse/swapper.py': (
        'tests/hisparse/test_swap_rules.py',
        "specreg_hisparse's swapper: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_hisparse/swapper_checks.py': (
        'tests/hisparse/test_swap_rules.py',
        "specreg_hisparse's swapper_checks: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_hisparse/swapper_state.py': (
        'tests/hisparse/test_triton.py',
        "specreg_hisparse's swapper_state: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_lookup/drafter.py': (
        'tests/lookup/test_plugin.py',
        "specreg_lookup's drafter: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_lookup/errors.py': (
        'tests/lookup/test_plugin.py',
        "specreg_lookup's errors: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_lookup/kernels/match_tree/__init__.py': (
        'tests/lookup/test_kernels.py',
        'part of the match_tree kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'plugins/specreg_lookup/kernels/match_tree/reference.py': (
        'tests/lookup/test_kernels.py',
        'part of the match_tree kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'plugins/specreg_lookup/kernels/match_tree/torch_impl.py': (
        'tests/lookup/test_kernels.py',
        'part of the match_tree kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'plugins/specreg_lookup/kernels/match_tree/types.py': (
        'tests/lookup/test_kernels.py',
        'part of the match_tree kernel family, whose tests are named after what they check: the test runs its value types',
    ),
    'plugins/specreg_lookup/kernels/tree_verify/__init__.py': (
        'tests/lookup/test_kernels.py',
        'part of the tree_verify kernel family, whose tests are named after what they check: the test runs its public entry',
    ),
    'plugins/specreg_lookup/kernels/tree_verify/reference.py': (
        'tests/lookup/test_kernels.py',
        'part of the tree_verify kernel family, whose tests are named after what they check: the test runs its plain reference, the oracle there',
    ),
    'plugins/specreg_lookup/kernels/tree_verify/torch_impl.py': (
        'tests/lookup/test_kernels.py',
        'part of the tree_verify kernel family, whose tests are named after what they check: the test runs its CPU path, against the reference',
    ),
    'plugins/specreg_lookup/sizes.py': (
        'tests/lookup/test_plugin.py',
        "specreg_lookup's sizes: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_lookup/suffix_tree.py': (
        'tests/lookup/test_plugin.py',
        "specreg_lookup's suffix_tree: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_lookup/verifier.py': (
        'tests/lookup/test_plugin.py',
        "specreg_lookup's verifier: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_medusa/checkpoint.py': (
        'tests/medusa/test_plugin.py',
        "specreg_medusa's checkpoint: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_medusa/drafter.py': (
        'tests/medusa/test_sampling.py',
        "specreg_medusa's drafter: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_medusa/errors.py': (
        'tests/medusa/test_plugin.py',
        "specreg_medusa's errors: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_medusa/heads.py': (
        'tests/medusa/test_sampling.py',
        "specreg_medusa's heads: the test exercises it through the plugin's plan and objects",
    ),
    'plugins/specreg_medusa/sizes.py': (
        'tests/medusa/test_plugin.py',
        "specreg_medusa's sizes: the test exercises it through the plugin's plan and objects",
    ),
}
