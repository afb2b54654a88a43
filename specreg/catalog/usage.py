"""Catalog entries SR140–SR159: command-line usage, plugin loading seen by a user, memory budgets,
the conformance kit's findings (SR147-SR151, SR154-SR156) and check's child build (SR157)."""

from specreg.catalog.entry import ErrorEntry

ENTRIES = (
    ErrorEntry(
        code="SR140",
        title="Unknown name while plugins failed to load",
        meaning=(
            "No loaded plugin registered this algorithm or cache, and at least one installed "
            "plugin failed to load. The failed plugin most likely provides the name, so the "
            "load failure, not the spelling, is the cause to fix first."
        ),
        when=(
            "Resolving a config or running `specreg check/plan/demo` with a name no loaded "
            "plugin registered, while `specreg list` shows load failures (SR110, SR111, SR114, "
            "SR118, SR119)."
        ),
        solutions=(
            "Run `specreg list`: it names each failed plugin, its code and the cause.",
            "Fix or reinstall the failed plugin's distribution (a missing dependency, a hook "
            "whose arguments do not match the hook reference).",
            "If the name was misspelt after all, use a name `specreg list` shows.",
        ),
        example_fix=(
            "# before: the medusa plugin failed to import (SR110)\n"
            "specreg check --speculative-algorithm medusa\n"
            "# after\n"
            "pip install <the missing dependency> && specreg check --speculative-algorithm medusa"
        ),
    ),
    ErrorEntry(
        code="SR141",
        title="SPECREG_PLUGINS names no installed plugin",
        meaning=(
            "A name in the SPECREG_PLUGINS allowlist matches no entry point of the 'specreg' "
            "group, so nothing was loaded for it."
        ),
        when="SPECREG_PLUGINS=eagle,bogus (a typo, or a plugin that is not installed).",
        solutions=(
            "Use the entry-point names `specreg list` shows under Plugins.",
            "Install the distribution that provides the plugin.",
            "Remove the name from SPECREG_PLUGINS.",
        ),
        example_fix="# before\nSPECREG_PLUGINS=eagle,bogus\n# after\nSPECREG_PLUGINS=eagle",
    ),
    ErrorEntry(
        code="SR142",
        title="Unknown command-line flag",
        meaning="The command does not have this flag; the message names the closest one.",
        when="A misspelt flag, such as --speculative-eagle-top-k for --speculative-eagle-topk.",
        solutions=(
            "Use the flag the message suggests.",
            "Run `specreg COMMAND --help` for the command's flags.",
        ),
        example_fix=(
            "# before\n--speculative-eagle-top-k 4\n# after\n--speculative-eagle-topk 4"
        ),
    ),
    ErrorEntry(
        code="SR143",
        title="Flag value is not valid",
        meaning=(
            "A command-line flag got a value of the wrong kind or outside its range, such as "
            "a fraction where a whole number is needed."
        ),
        when=(
            "--speculative-num-steps 3.5, --memory-budget lots, or `specreg demo --steps 0` "
            "(and other demo flags out of range)."
        ),
        solutions=(
            "Pass a value of the kind the message lists.",
            "Leave the flag out to use its default.",
        ),
        example_fix="# before\n--speculative-num-steps 3.5\n# after\n--speculative-num-steps 3",
    ),
    ErrorEntry(
        code="SR144",
        title="Output file cannot be written",
        meaning=(
            "A file a command should write (such as the demo's --plot image) cannot be "
            "created: its folder is missing or not writable, its extension names no image "
            "format the plotting library writes, or that library (matplotlib) is not "
            "installed. It is checked before the run, so no work is lost. (--metrics without "
            "prometheus_client is SR131.)"
        ),
        when="specreg demo --plot missing_dir/x.png, --plot out.txt, or --plot without "
        "matplotlib installed.",
        solutions=(
            "Create the folder first, or point the flag at an existing writable folder.",
            "Name the image with an extension matplotlib writes: .png, .pdf, .svg, .jpg, ...",
            "Install the plotting extra: pip install 'specreg[plot]'.",
        ),
        example_fix="# before\n--plot missing_dir/x.png\n# after\nmkdir -p missing_dir && specreg demo --plot missing_dir/x.png",
    ),
    ErrorEntry(
        code="SR145",
        title="Plan exceeds the memory budget",
        meaning=(
            "The buffers the plan implies (device or host bytes, as `specreg plan` lists under "
            "memory) add up to more than the budget given with --memory-budget."
        ),
        when=(
            "specreg check/plan --memory-budget 16GiB with a config whose cache or draft "
            "widths need more, such as specreg's HiSparse swapper (--kv-cache hisparse) with 1024 "
            "draft tokens."
        ),
        solutions=(
            "Lower the widths (--speculative-num-draft-tokens, --speculative-num-steps, "
            "--speculative-eagle-topk).",
            "Shrink the cache (--hisparse-config '{\"req_slots\": ..., \"hot_size\": ...}', "
            "or --kv-cache-option max_seq_len=...).",
            "Raise the budget if the machine has the memory.",
        ),
        example_fix=(
            "# before\n--speculative-num-draft-tokens 1024 --memory-budget 16GiB\n"
            "# after\n--speculative-num-draft-tokens 8 --memory-budget 16GiB"
        ),
    ),
    ErrorEntry(
        code="SR146",
        title="Name is of the other kind, or means 'off'",
        meaning=(
            "The name given as an algorithm is a KV-cache backend (or the reverse), or it is "
            "SGLang's 'NONE', which turns speculative decoding off."
        ),
        when=(
            "--speculative-algorithm hisparse (a cache), --kv-cache eagle (an algorithm; --kv-cache is "
            "specreg's alias), or "
            "--speculative-algorithm NONE."
        ),
        solutions=(
            "Pass HiSparse with --enable-hisparse --disable-radix-cache (another plugin's cache with --kv-cache NAME) and an "
            "algorithm with --speculative-algorithm.",
            "For NONE: drop --speculative-algorithm and the other speculative flags; without "
            "speculative decoding there is nothing for specreg to resolve.",
        ),
        example_fix=(
            "# before\n--speculative-algorithm hisparse\n"
            "# after\n--speculative-algorithm eagle --enable-hisparse --disable-radix-cache"
        ),
    ),
    ErrorEntry(
        code="SR147",
        title="Drafter proposals have the wrong shape",
        meaning=(
            "The drafter a plugin returns from specreg_make_drafter answered "
            "propose(history, lengths) with a tensor that is not [batch, gamma] of integer "
            "token ids."
        ),
        when="The conformance kit, the demo or the reference loop calls plan.drafter.propose.",
        solutions=(
            "Return exactly plan.gamma draft tokens per request: a [batch, gamma] int64 tensor.",
            "Read gamma from the config the hook received (num_draft_tokens - 1).",
        ),
        example_fix=(
            "# before\nreturn torch.stack(tokens)        # [gamma, batch]\n"
            "# after\nreturn torch.stack(tokens, dim=1)  # [batch, gamma]"
        ),
    ),
    ErrorEntry(
        code="SR148",
        title="Drafter proposed tokens outside the vocabulary",
        meaning=(
            "The drafter's propose(history, lengths) returned token ids below 0 or at least "
            "the vocabulary size, which no model can score."
        ),
        when="The conformance kit, the demo or the reference loop calls plan.drafter.propose.",
        solutions=(
            "Propose only ids in [0, vocab_size); fill requests without a proposal with a real "
            "token (for example the last token), not -1 or a sentinel.",
        ),
        example_fix="# before\ndrafts.fill_(-1)\n# after\ndrafts.copy_(history.gather(1, last))",
    ),
    ErrorEntry(
        code="SR149",
        title="resolve_config changed a value the user gave",
        meaning=(
            "A plugin's specreg_resolve_config overwrote a parameter the user set. The user's "
            "value is lost silently, and an out-of-range value is never reported."
        ),
        when="The conformance kit resolves configs with every parameter set.",
        solutions=(
            "In specreg_resolve_config fill only the fields that are None.",
            "Report a value the algorithm cannot take from specreg_validate_config, with a code "
            "and a fix (or SR107 as a warning when the algorithm fixes the parameter).",
        ),
        example_fix=(
            "# before\nreturn config.evolve(topk=1)\n"
            "# after\nreturn config.evolve(topk=1) if config.topk is None else config"
        ),
    ),
    ErrorEntry(
        code="SR150",
        title="Out-of-range value reported by nobody",
        meaning=(
            "A config with a value outside the range the algorithm declares passed "
            "registry.check() with no problem, so a user would learn of it only at run time."
        ),
        when="The conformance kit checks one value just outside each declared bound.",
        solutions=(
            "Declare the real range in the AlgorithmSpec (ParamRange minimum/maximum): the "
            "default plugin then reports SR103.",
            "Return a coded Problem from specreg_validate_config for the value.",
        ),
        example_fix=(
            "# before\ntopk=ParamRange(minimum=1)\n# after\ntopk=ParamRange(minimum=1, maximum=8)"
        ),
    ),
    ErrorEntry(
        code="SR151",
        title="The plugin has no drafting code",
        meaning=(
            "The algorithm's plan has no drafter (specreg_make_drafter returned nothing) and "
            "its verifier is specreg's own (ChainVerifier, which the default plugin builds for "
            "chain and block drafting), so the demo and the conformance kit drafted with "
            "specreg's toy draft model. Their results then measure the toy model, not the "
            "plugin. This is a notice, not an error. (A tree algorithm has no such stand-in: "
            "without its own verifier it is SR124.)"
        ),
        when="`specreg demo` rows and conformance reports of a chain or block algorithm that "
        "only registers a spec.",
        solutions=(
            "Chain algorithms: implement specreg_make_drafter returning an object of "
            "specreg.contract.protocols.ChainDrafterProtocol (gamma, propose(history, lengths)), for your "
            "algorithm only: return None for every other algorithm, or your drafter replaces "
            "theirs.",
            "Block algorithms: return a BlockDrafterProtocol object; tree algorithms a "
            "TreeDrafterProtocol one (start, step, tree), with a TreeVerifierProtocol verifier: "
            "the hook reference's per-step contract lists each.",
            "If the algorithm drafts with a model the serving framework runs, say so in its "
            "description; the toy model standing in for it is then the intended test.",
        ),
        example_fix=(
            "@hookimpl\ndef specreg_make_drafter(config, algorithm, resolution):\n"
            "    if algorithm.name != 'mine':\n"
            "        return None                       # another plugin's algorithm\n"
            "    return MyDrafter(gamma=resolution.gamma)"
        ),
    ),
    ErrorEntry(
        code="SR152",
        title="Command line cannot be parsed",
        meaning=(
            "argparse could not read the command line: no subcommand or an unknown one, a flag "
            "without its value, or a word the command does not take. The command never ran. This "
            "is a usage error: exit status 2 (a coded problem in what was asked is exit status 1)."
        ),
        when=(
            "`specreg` with no subcommand, `specreg chek`, `specreg check --speculative-algorithm` "
            "(no value), `specreg list extra`."
        ),
        solutions=(
            "Read the message: it names the closest subcommand, or what argparse expected (a "
            "choice list, a value).",
            "Run `specreg --help` or `specreg COMMAND --help` for the usage.",
        ),
        example_fix="# before\nspecreg chek --speculative-algorithm eagle\n"
        "# after\nspecreg check --speculative-algorithm eagle",
    ),
    ErrorEntry(
        code="SR153",
        title="Unknown error code",
        meaning=(
            "`specreg explain` knows the core's codes and those the loaded plugins registered; "
            "the code given is none of them."
        ),
        when="`specreg explain SR999`, a typo such as `specreg explain SR1O1`, or a code of a "
        "plugin that is not installed or failed to load (`specreg list` shows load failures).",
        solutions=(
            "Run `specreg explain` without a code to list every code.",
            "For a plugin's code, install the plugin (or fix its load failure) first.",
        ),
        example_fix="# before\nspecreg explain SR1O1\n# after\nspecreg explain SR101",
    ),
    ErrorEntry(
        code="SR154",
        title="Generation through the plan is not lossless",
        meaning=(
            "The conformance kit generates with the plan on specreg's toy models and compares "
            "with plain decoding: greedy output must equal plain greedy decoding token for "
            "token, sampled tokens must follow the target's distribution (chi-square test), and "
            "a cache swapper must lose no KV row. One of these failed, so the plugin's verifier, "
            "drafter or swapper changes what the model generates. Cause: the plugin."
        ),
        when="specreg.testing.check_algorithm / check_cache (the conformance kit).",
        solutions=(
            "Plugin authors: compare the verifier with specreg's reference rules (the Kernels "
            "page); accept a draft only where plain decoding would emit it (greedy) or with "
            "min(1, p/q) (sampling), and emit the bonus from the target.",
            "Plugin authors: run the loop of specreg.testing (SpeculativeLoop) on the failing "
            "config; the clause names the first mismatching column.",
        ),
        example_fix=(
            "# before: accepts every draft\nnum_accepted = torch.full((b,), n - 1)\n"
            "# after: the leading match with the target's argmax\n"
            "return specreg.ChainVerifier(...).verify_greedy(candidates, target_logits)"
        ),
    ),
    ErrorEntry(
        code="SR155",
        title="A plan object raised while generating",
        meaning=(
            "Generating through the plan, the plugin's verifier, drafter or swapper raised an "
            "exception that carries no specreg code (a shape that disagrees with the plan's "
            "widths, a crash in a kernel), so a serving loop would fail at that step. Cause: "
            "the plugin."
        ),
        when="specreg.testing.check_algorithm / check_cache (the conformance kit) and "
        "`specreg demo` rows.",
        solutions=(
            "Plugin authors: the clause names the exception and the config; size every tensor "
            "from the plan (plan.gamma, plan.num_tokens_per_req(phase)).",
            "Plugin authors: raise a coded error (specreg.problem with a catalog code) for "
            "inputs the object refuses.",
        ),
        example_fix=(
            "# before\nreturn drafts[:, :4]            # a fixed gamma\n"
            "# after\nreturn drafts[:, :self.gamma]   # the plan's gamma"
        ),
    ),
    ErrorEntry(
        code="SR156",
        title="A plugin's problem has no registered code or no fix",
        meaning=(
            "Every problem a user sees names a code `specreg explain` knows and the fix. The "
            "plugin reported a problem whose code no catalog entry defines (a plugin code it "
            "never registered through specreg_register_errors) or whose fix is empty. Cause: "
            "the plugin."
        ),
        when="specreg.testing.check_algorithm (the conformance kit) checks the problems a "
        "plugin reports for values outside the declared ranges.",
        solutions=(
            "Plugin authors: register the plugin's codes (SR500-SR899) with "
            "specreg_register_errors, or reuse the core code that fits (SR103 for ranges).",
            "Plugin authors: pass fix=... to every problem(...).",
        ),
        example_fix=(
            "# before\nproblem('SR512', 'topk too large')\n"
            "# after\nproblem('SR103', 'topk=9 is out of range', accepted='topk in [1, 8]',\n"
            "        fix='set --speculative-eagle-topk within [1, 8]', field='topk')"
        ),
    ),
    ErrorEntry(
        code="SR157",
        title="`specreg check` could not build the plan's objects in a child process",
        meaning=(
            "`specreg check` imports neither torch nor triton, yet reports what building the "
            "plan's verifier, drafter and cache swapper finds (SR123, SR126, SR145), as "
            "`specreg plan` does. Where those objects need torch or triton it builds them in a "
            "child Python process (the same interpreter, plugins and config). That process "
            "ended without an answer: it crashed or was killed, or an object raised an "
            "exception that is not a coded specreg error. The message quotes its exit status "
            "and the last line of its error output, so the config was not fully checked."
        ),
        when="`specreg check` of a config whose plan objects need torch or triton (most do), "
        "without --no-torch-build.",
        solutions=(
            "Run `specreg plan` with the same flags: it builds the objects in its own process "
            "and shows the whole error.",
            "If the child was killed (out of memory, a signal), rerun where it has room, or "
            "pass --no-torch-build to check the config without building those objects (check "
            "then says they were not checked).",
            "Plugin authors: make the specreg_make_* hooks and each object's memory() raise "
            "specreg's coded errors (specreg.problem) instead of bare exceptions.",
        ),
        example_fix=(
            "specreg plan --speculative-algorithm mine     # shows the traceback\n"
            "specreg check --speculative-algorithm mine --no-torch-build   # skips the build"
        ),
    ),
)
