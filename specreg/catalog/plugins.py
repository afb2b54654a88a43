"""Catalog entries of plugins (SR109-SR115, SR118, SR119, SR123-SR129).

Loading, registering, answering hooks, and the plan those answers build: objects that keep the
per-step contract and agree with the plan's sizes.
"""

from specreg.catalog.entry import ErrorEntry

ENTRIES = (
    ErrorEntry(
        code="SR109",
        title="Shared registry is read-only",
        meaning=(
            "Registry.load() returns one registry to every caller that passes the same "
            "arguments (it is cached). Adding or removing a plugin on it would change what "
            "every other caller resolves, so register_plugin, unregister_plugin and "
            "load_entrypoints refuse it."
        ),
        when="register_plugin, unregister_plugin or load_entrypoints on a registry from "
        "Registry.load() without fresh=True.",
        solutions=(
            "Build a registry of your own with Registry.load(fresh=True) and change that one.",
            "Start from Registry() (only the default rules) and register the plugins you need.",
        ),
        example_fix=(
            "registry = Registry.load(fresh=True)\n"
            "registry.register_plugin(my_plugin, 'mine')"
        ),
    ),
    ErrorEntry(
        code="SR110",
        title="Plugin failed to import",
        meaning=(
            "Importing a plugin's entry point raised. The plugin is skipped and recorded in "
            "registry.failures; the other plugins still load."
        ),
        when="Registry.load() imports each entry point of group 'specreg'.",
        solutions=(
            "Run `specreg list` to see the traceback summary of the failure.",
            "Reinstall the plugin distribution, or remove it.",
            "Exclude it with SPECREG_PLUGINS=<the names you want>.",
            "Use Registry.load(strict=True) in tests so a broken plugin fails loudly.",
        ),
        example_fix="# exclude the broken plugin\nSPECREG_PLUGINS=eagle,dspark,hisparse specreg list",
    ),
    ErrorEntry(
        code="SR111",
        title="Plugin hook implementation does not match its specification",
        meaning=(
            "A plugin implements a hook with an argument the hook does not have, or implements a "
            "hook that does not exist (often a misspelt name). pluggy refuses it; the plugin is "
            "skipped."
        ),
        when="Registry.load() registers each plugin with the plugin manager.",
        solutions=(
            "Read the message: it names the hook (or the hook's argument) closest to the "
            "misspelt name, and the fix renames it.",
            "Compare the plugin's hookimpl with `specreg.hookspecs` (docs: Hook reference).",
            "Use only argument names the hook specification declares; fewer is fine.",
        ),
        example_fix=(
            "# before\n@specreg.hookimpl\ndef specreg_resolve_gama(config, algo): ...\n"
            "# after\n@specreg.hookimpl\ndef specreg_resolve_gamma(config, algorithm): ..."
        ),
    ),
    ErrorEntry(
        code="SR112",
        title="Two plugins registered the same name",
        meaning=(
            "Algorithm and cache names (and aliases) are unique. Two distributions claimed one "
            "name and neither declared an override, so the name is unavailable until one goes."
        ),
        when="Registry.load() with two plugins that register the same algorithm or cache name.",
        solutions=(
            "Uninstall one of the two distributions named in the message.",
            "Restrict loading with SPECREG_PLUGINS.",
            "If one plugin is meant to replace the other, register with override=True.",
        ),
        example_fix=(
            "# in the replacing plugin\n"
            "register(AlgorithmSpec(name='eagle', ...), override=True)"
        ),
    ),
    ErrorEntry(
        code="SR113",
        title="Plugin registered an invalid spec",
        meaning=(
            "register() was called with something that is not a valid AlgorithmSpec/CacheSpec, "
            "or with ranges and defaults that contradict each other."
        ),
        when="A plugin's specreg_register_algorithms or specreg_register_caches hook runs.",
        solutions=(
            "Pass a specreg.AlgorithmSpec (or CacheSpec) instance.",
            "Make each default lie inside its declared range.",
        ),
        example_fix=(
            "# before\nregister({'name': 'mine'})\n"
            "# after\nregister(AlgorithmSpec(name='mine', drafting='chain', ...))"
        ),
    ),
    ErrorEntry(
        code="SR114",
        title="Plugin hook raised an exception",
        meaning=(
            "A hook implementation raised something other than a specreg error. During loading "
            "the plugin is skipped; during resolve the error is reported with the plugin's name."
        ),
        when="Any hook call made by the registry while loading or resolving.",
        solutions=(
            "Report the bug to the plugin's authors; the message names the plugin and hook.",
            "Exclude the plugin with SPECREG_PLUGINS until it is fixed.",
        ),
        example_fix="SPECREG_PLUGINS=eagle,dspark,hisparse  # leave the failing plugin out",
    ),
    ErrorEntry(
        code="SR115",
        title="No plugin answered a required hook",
        meaning=(
            "Resolving a plan needs a gamma and a width for every phase; every implementation "
            "of a firstresult hook returned None, or returned a value that is not a "
            "non-negative integer."
        ),
        when="registry.resolve(config) with a plugin that shadows the defaults but returns nothing.",
        solutions=(
            "Return an int from the plugin's hook, or return None only for algorithms it does "
            "not own so the default plugin answers.",
        ),
        example_fix=(
            "@specreg.hookimpl\ndef specreg_resolve_gamma(config, algorithm):\n"
            "    if algorithm.name != 'mine':\n        return None\n"
            "    return config.num_draft_tokens - 1"
        ),
    ),
    ErrorEntry(
        code="SR118",
        title="Plugin import timed out",
        meaning=(
            "Importing a plugin's entry point did not finish within the import timeout. The "
            "plugin is skipped and the others load; its import keeps running in a background "
            "thread, since Python cannot stop it."
        ),
        when=(
            "Registry.load() with a plugin whose import blocks (a network call, a lock, a "
            "device initialisation) or is very slow."
        ),
        solutions=(
            "Find what the plugin's import waits on; plugins should import heavy modules lazily.",
            "Raise SPECREG_PLUGIN_IMPORT_TIMEOUT (seconds, default 60).",
            "Leave the plugin out with SPECREG_PLUGINS.",
        ),
        example_fix="SPECREG_PLUGIN_IMPORT_TIMEOUT=180 specreg list",
    ),
    ErrorEntry(
        code="SR119",
        title="Plugin error code invalid or taken",
        meaning=(
            "Third-party plugins register their own catalog entries with codes SR500-SR899. A "
            "code outside that range, a code another plugin registered, or something that is "
            "not an ErrorEntry is refused, and the plugin is skipped."
        ),
        when="Registry.load() calls each plugin's specreg_register_errors hook.",
        solutions=(
            "Use codes in SR500-SR899 for a plugin's own errors.",
            "Pick codes no other installed plugin uses (`specreg explain` lists every code).",
        ),
        example_fix=(
            "register(ErrorEntry(code='SR512', title='...', meaning='...', when='...',\n"
            "                    solutions=['...'], example_fix='...'))"
        ),
    ),
    ErrorEntry(
        code="SR129",
        title="Plugin runtime substitution malformed or taken",
        meaning=(
            "A runtime substitution is a framework seam (a class, a function, a kernel) where a "
            "plugin's code runs in place of the framework's own, installed inside the "
            "framework's process when SPECREG_SGLANG_SUBSTITUTE / SPECREG_VLLM_SUBSTITUTE names "
            "it (a config's substitutions field names those it expects). Plugins register "
            "them through specreg_register_substitutions, and a name belongs to the first "
            "plugin that "
            "registers it (specreg's own, tree_verify and rejection_sampler, come first). The "
            "plugin named in the message registered something that is not a Substitution, one "
            "with a bad name, framework, summary or installer, or a name another plugin has; "
            "the plugin is skipped with all it registers. Cause: the plugin."
        ),
        when="Registry.load() (and `specreg list`, every command, a framework adapter's start) "
        "calls each plugin's specreg_register_substitutions hook.",
        solutions=(
            "Plugin authors: register specreg.contract.substitutions.Substitution(name, "
            "framework, summary, installer) with a lower-case name (letters, digits, '_'; not "
            "all, off or none), framework 'sglang' or 'vllm', a summary of what changes, and "
            "an installer that is a callable or a 'module:function' string.",
            "Plugin authors: pick a name no other installed plugin registers (the message "
            "names the plugin that has it).",
            "Users: leave one of the two plugins out with SPECREG_PLUGINS, and report it to "
            "the plugin's authors.",
        ),
        example_fix=(
            "# before\nregister(Substitution('tree_verify', 'sglang', 'mine', install))"
            "   # specreg's name\n"
            "# after\nregister(Substitution('mykernel_verify', 'sglang',\n"
            "                      \"SGLang's verify runs mykernel\", install))"
        ),
    ),
    ErrorEntry(
        code="SR123",
        title="A plugin's verifier, drafter or cache swapper breaks the per-step contract",
        meaning=(
            "Every object a plan holds is driven through a typing.Protocol in specreg.contract.protocols: "
            "ChainVerifierProtocol or TreeVerifierProtocol for plan.verifier, ChainDrafter-, "
            "TreeDrafter- or BlockDrafterProtocol for plan.drafter (by the algorithm's drafting "
            "style) and CacheSwapperProtocol for plan.cache_swapper. The plugin named in the "
            "message returned an object that lacks a member, or whose method does not take the "
            "protocol's arguments, so a serving loop would fail at its first step."
        ),
        when="registry.resolve(config) (and `specreg check`, `plan`, `demo`, the kit), right "
        "after the plugin's specreg_make_* hook returned; `specreg check` builds objects that "
        "need torch in a child process to report it.",
        solutions=(
            "Plugin authors: when the message says the hook returned a class, return an "
            "instance instead, e.g. `MyDrafter(...)`, from the specreg_make_* hook it names.",
            "Plugin authors: add the missing members; the conformance kit "
            "(specreg.testing.check_algorithm) lists every clause.",
            "Users: report it to the plugin's authors, or use another algorithm or cache.",
        ),
        example_fix=(
            "class MyVerifier:\n    rules = ('greedy',)\n    num_draft_tokens = 4\n"
            "    widths = (4,)\n    def verify_greedy(self, candidates, target_logits, *, "
            "verify_lens=None): ...\n    def verify_sampling(self, candidates, target_probs, "
            "draft_probs, **kw): ..."
        ),
    ),
    ErrorEntry(
        code="SR124",
        title="No plugin built an object the plan needs",
        meaning=(
            "Every plan verifies drafts with plan.verifier. specreg's default plugin builds one "
            "(ChainVerifier) for chain and block drafting only: a tree algorithm gets its "
            "verifier from its own plugin's specreg_make_verifier. No plugin returned one for "
            "this algorithm, so a serving loop would have nothing to verify with. Cause: the "
            "plugin. The conformance kit reports a tree or block plan without a drafter, and a "
            "cache plan without a swapper, under this code too."
        ),
        when=(
            "registry.check/resolve, `specreg check`, `plan` and `demo` of a tree algorithm whose "
            "plugin implements no specreg_make_verifier (or whose hook returned None for it); the "
            "conformance kit."
        ),
        solutions=(
            "Plugin authors: implement specreg_make_verifier for the algorithm, returning an "
            "object of specreg.contract.protocols.TreeVerifierProtocol (the tree contract in the hook "
            "reference), or return the core's TreeVerifier (specreg.step.tree_verifier) as "
            "Medusa does.",
            "Plugin authors of an algorithm that drafts one chain per request: declare "
            "drafting='chain' in its AlgorithmSpec, and specreg's ChainVerifier verifies it.",
            "Users: report it to the plugin's authors, and use another algorithm meanwhile.",
        ),
        example_fix=(
            "@hookimpl\n"
            "def specreg_make_verifier(config, algorithm, resolution):\n"
            "    if algorithm.name != 'mytree':\n"
            "        return None                      # not ours: the next plugin answers\n"
            "    from specreg.step.tree_verifier import TreeVerifier\n"
            "    return TreeVerifier(num_steps=config.num_steps, topk=config.topk,\n"
            "                        num_draft_tokens=config.num_draft_tokens)"
        ),
    ),
    ErrorEntry(
        code="SR125",
        title="The plugin's sizes contradict each other",
        meaning=(
            "A verify scores the root (the last committed token) and the drafts after it, so "
            "the target_verify width is gamma + 1 for a chain, and above gamma for any drafting "
            "style: 0 <= gamma < target_verify width (gamma 0 only at width 1), and every width "
            "is at least 1. The sizes the plugin's specreg_resolve_sizes (or specreg_resolve_gamma / "
            "specreg_num_tokens_per_req) answered break that, so the plan's buffers and its "
            "verifier would disagree at the first step. Cause: the plugin."
        ),
        when=(
            "registry.check/resolve, `specreg check`, `plan`, `demo` and the conformance kit, "
            "for the main config and every adaptive candidate."
        ),
        solutions=(
            "Plugin authors: return gamma = num_draft_tokens - 1 for a chain or block (the "
            "number of draft nodes for a tree), and widths of at least 1; the default "
            "specreg_resolve_sizes does so, so drop the override unless the algorithm differs.",
            "Users: report it to the plugin's authors; the message names the plugin and hook.",
        ),
        example_fix=(
            "# before\nSizes.same_on_both(gamma=n, widths={...: n})      # gamma == width\n"
            "# after\nSizes.same_on_both(gamma=n - 1, widths={...: n})"
        ),
    ),
    ErrorEntry(
        code="SR126",
        title="A plan object disagrees with the plan's sizes",
        meaning=(
            "The drafter drafts plan.gamma tokens per request and the verifier verifies "
            "plan.num_tokens_per_req(TARGET_VERIFY) of them (the largest over adaptive "
            "candidates, whose every width it accepts). The object the plugin's specreg_make_* "
            "hook returned was built for other numbers, so proposals or verifies would not fit "
            "the plan's buffers. Cause: the plugin."
        ),
        when="registry.resolve(config) (and `specreg check`, `plan`, `demo`, the kit), right "
        "after the hook returned the object; `specreg check` builds objects that need torch in "
        "a child process to report it.",
        solutions=(
            "Plugin authors: build the drafter with gamma = resolution.gamma (the plan's gamma, "
            "the maxima over candidates) rather than a number of your own.",
            "Plugin authors: build the verifier for resolution.target[Phase.TARGET_VERIFY] and "
            "every candidate's width (resolution.configs()).",
            "Users: report it to the plugin's authors.",
        ),
        example_fix=(
            "@hookimpl\ndef specreg_make_drafter(config, algorithm, resolution):\n"
            "    if algorithm.name != 'mine':\n        return None\n"
            "    # before: MyDrafter(gamma=4)\n"
            "    return MyDrafter(gamma=resolution.gamma)"
        ),
    ),
    ErrorEntry(
        code="SR127",
        title="A chain plan's num_steps is not its gamma",
        meaning=(
            "A chain drafts one token per step, so num_steps drafts are verified with "
            "num_draft_tokens = num_steps + 1 (gamma = num_steps). A plan holding other numbers "
            "silently ignores one of them: num_steps 6 with gamma 3 drafts 3 tokens where 6 were "
            "asked. specreg's default resolution infers the missing one (num_draft_tokens = "
            "num_steps + 1, or num_steps = num_draft_tokens - 1), as its adaptive candidates "
            "do. Cause: the input when both numbers were given and disagree; the plugin's "
            "specreg_resolve_config when only one was."
        ),
        when=(
            "registry.check/resolve (`specreg check`, `plan`, `demo`, the kit) of a chain "
            "algorithm, e.g. --speculative-num-steps 6 --speculative-num-draft-tokens 4, or "
            "--speculative-num-steps 6 alone with a plugin whose resolution keeps its default "
            "num_draft_tokens."
        ),
        solutions=(
            "Users: give num_draft_tokens = num_steps + 1, or only one of the two flags.",
            "Plugin authors: in specreg_resolve_config infer num_draft_tokens = num_steps + 1 "
            "when only num_steps is set (or leave the hook to the default, which does), and "
            "report given numbers that disagree from specreg_validate_config.",
        ),
        example_fix=(
            "# before\n--speculative-num-steps 6 --speculative-num-draft-tokens 4\n"
            "# after\n--speculative-num-steps 6 --speculative-num-draft-tokens 7"
        ),
    ),
    ErrorEntry(
        code="SR128",
        title="A validate hook returned something other than a list of problems",
        meaning=(
            "specreg_validate_config returns a list of specreg.Problem (empty when the config is "
            "sound), which specreg merges with every other plugin's. The plugin returned "
            "another type (one Problem, a string, a dict, ...), so what it meant to report is "
            "lost, and the config is refused rather than passed unchecked. Cause: the plugin."
        ),
        when="registry.check/resolve (`specreg check`, `plan`, `demo`, the kit).",
        solutions=(
            "Plugin authors: return [problem(...)], a list, even for one problem; [] when "
            "there is none or the algorithm is not the plugin's.",
            "Users: report it to the plugin's authors.",
        ),
        example_fix=(
            "# before\nreturn problem('SR501', 'num_steps is odd', fix=..., field='num_steps')\n"
            "# after\nreturn [problem('SR501', 'num_steps is odd', fix=..., field='num_steps')]"
        ),
    ),
)
