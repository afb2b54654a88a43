"""The checks on what a plugin registers, and the coded problem each refusal reports.

A plugin's hooks must match specreg's specifications (SR111, naming the closest hook or
argument to a misspelt one) under a free name (SR112), its
specs must be specreg's types (SR113) under names no other plugin claims without an override
(SR112), its error entries must use free plugin codes (SR119), its runtime substitutions must be
well formed under free names (SR129), and a hook that raises is named (SR114). A registry
that a `RegistryCache` shares refuses every change (SR109).
"""

from __future__ import annotations

import pluggy

from specreg._suggest import closest
from specreg.errors import Problem, problem
from specreg.registry.loading import ALLOWLIST_ENV


def register_checked(
    pm: pluggy.PluginManager, plugin: object, name: str, hook_names: list[str]
) -> Problem | None:
    """Register `plugin` under `name`; on refusal unregister it again and return the problem
    (SR111: a hook that matches no specification, or a wrapper; SR112: the name is taken)."""
    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        if pm.has_plugin(name):  # pluggy keeps a half-registered plugin
            pm.unregister(name=name)
        return problem(
            "SR111",
            f"plugin {name!r} has a hook implementation that does not match its "
            f"specification: {exc}.{_argument_hints(pm, plugin)}",
            accepted="hookimpls named and shaped as in specreg.hookspecs",
            fix="compare the plugin's hookimpls with the hook reference",
        )
    except ValueError as exc:  # already registered under this name
        return problem(
            "SR112",
            f"a plugin named {name!r} is already registered: {exc}",
            fix="give the plugin another entry-point name",
        )
    bad = _unknown_or_wrapper_hooks(pm, name)
    if bad:
        pm.unregister(name=name)
        return _not_hooks(name, bad, hook_names)
    return None


def _not_hooks(name: str, bad: list[str], hook_names: list[str]) -> Problem:
    """SR111 for functions marked as hookimpls that are no specreg hook (or are wrappers),
    each with the hook its name is closest to."""
    renames = {b: match for b in bad if (match := closest(b, hook_names)) and match != b}
    hint = f" Did you mean {', '.join(renames.values())}?" if renames else ""
    return problem(
        "SR111",
        f"plugin {name!r} implements {', '.join(bad)}, which specreg does not call: not a "
        f"specreg hook (or a wrapper).{hint}",
        accepted=", ".join(hook_names),
        fix="rename " + "; ".join(f"{b} to {m}" for b, m in renames.items()) if renames else
        "rename the function to a hook in specreg.hookspecs (the hook reference lists them)",
    )


def _argument_hints(pm: pluggy.PluginManager, plugin: object) -> str:
    """' Did you mean ...?' naming the closest argument of its hook for each hookimpl argument
    the hook does not pass, or ''."""
    hints = []
    for attr in dir(plugin):
        spec = getattr(getattr(pm.hook, attr, None), "spec", None)
        if spec is None or pm.parse_hookimpl_opts(plugin, attr) is None:
            continue
        function = getattr(plugin, attr)
        code = getattr(getattr(function, "__func__", function), "__code__", None)
        if code is None:
            continue
        names = code.co_varnames[: code.co_argcount]
        for arg in names:
            if arg not in ("self", *spec.argnames):
                match = closest(arg, spec.argnames)
                if match:
                    hints.append(f"{match!r} (for {arg!r} in {attr})")
    return f" Did you mean {', '.join(hints)}?" if hints else ""


def _unknown_or_wrapper_hooks(pm: pluggy.PluginManager, name: str) -> list[str]:
    bad = []
    for caller in pm.get_hookcallers(pm.get_plugin(name)) or []:
        for impl in caller.get_hookimpls():
            if impl.plugin_name != name:
                continue
            if caller.spec is None or impl.hookwrapper or impl.wrapper:
                bad.append(caller.name)
    return bad


def wrong_spec_type(plugin: str, registered: object, kind: str, expected: type) -> Problem:
    """SR113: a plugin registered something other than the spec type of `kind`."""
    return problem(
        "SR113",
        f"plugin {plugin!r} registered {type(registered).__name__} as a {kind}",
        accepted=f"a specreg.{expected.__name__}",
        fix=f"call register({expected.__name__}(...))",
    )


def hook_raised(plugin: str, hook_name: str, exc: BaseException) -> Problem:
    """SR114: a plugin's hook raised something other than a coded specreg error."""
    return problem(
        "SR114",
        f"plugin {plugin!r} raised in {hook_name}: {type(exc).__name__}: {exc}",
        fix=f"report it to the plugin's authors, or leave the plugin out of {ALLOWLIST_ENV}",
    )


def catalog_refused(plugin: str, reasons: list[str]) -> Problem:
    """SR119: a plugin's error entries were refused (every one of them is dropped)."""
    return problem(
        "SR119",
        f"plugin {plugin!r} could not register its error codes: " + "; ".join(reasons),
        accepted="ErrorEntry objects with codes SR500-SR899 not used by another plugin",
        fix="pick free codes in SR500-SR899 for the plugin's catalog entries",
    )


def substitutions_refused(plugin: str, reasons: list[str]) -> Problem:
    """SR129: a plugin's runtime substitutions were refused (the plugin is skipped)."""
    return problem(
        "SR129",
        f"plugin {plugin!r} could not register its runtime substitutions: " + "; ".join(reasons),
        accepted="specreg.contract.substitutions.Substitution objects: a lower-case name no "
        "other plugin registered, framework 'sglang' or 'vllm', a summary, and an installer "
        "(a callable or 'module:function')",
        fix="give the substitution a free name, or correct the field the message names",
        field="substitutions",
    )


def name_conflict(kind: str, name: str, claimants: list[str]) -> Problem:
    """SR112: two plugins claim one spec name and neither overrides the other alone."""
    return problem(
        "SR112",
        f"the {kind} name {name!r} is registered by both {' and '.join(claimants)}",
        fix=f"uninstall one of them, restrict loading with {ALLOWLIST_ENV}, or register the "
        "replacement with override=True",
        field=kind,
    )


def shared_registry_change(method: str) -> Problem:
    """SR109: a change to a registry that a `RegistryCache` shares."""
    return problem(
        "SR109",
        f"{method} on a registry from Registry.load(), which every caller with the "
        "same load arguments shares",
        accepted="changes to a registry of the caller's own",
        fix="build one with Registry.load(fresh=True) (or Registry()) and add the plugin to it",
    )
