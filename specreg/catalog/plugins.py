"""Catalog entries of plugins (SR109-SR115, SR118, SR119, SR123).

Loading, registering, answering hooks and keeping the per-step contract.
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
        code="SR123",
        title="A plugin's verifier, drafter or cache swapper breaks the per-step contract",
        meaning=(
            "Every object a plan holds is driven through a typing.Protocol in specreg.protocols: "
            "ChainVerifierProtocol or TreeVerifierProtocol for plan.verifier, ChainDrafter-, "
            "TreeDrafter- or BlockDrafterProtocol for plan.drafter (by the algorithm's drafting "
            "style) and CacheSwapperProtocol for plan.cache_swapper. The plugin named in the "
            "message returned an object that lacks a member, or whose method does not take the "
            "protocol's arguments, so a serving loop would fail at its first step."
        ),
        when="registry.resolve(config), right after the plugin's specreg_make_* hook returned.",
        solutions=(
            "Users: report it to the plugin's authors, or use another algorithm or cache.",
            "Plugin authors: add the missing members; the conformance kit "
            "(specreg.testing.check_algorithm) lists every clause.",
        ),
        example_fix=(
            "class MyVerifier:\n    rules = ('greedy',)\n    num_draft_tokens = 4\n"
            "    widths = (4,)\n    def verify_greedy(self, candidates, target_logits, *, "
            "verify_lens=None): ...\n    def verify_sampling(self, candidates, target_probs, "
            "draft_probs, **kw): ..."
        ),
    ),
)
