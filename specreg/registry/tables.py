"""The tables a registry answers from: every plugin's specs, settled by name, and its catalog.

`collect_tables` asks every registered plugin for its error entries, runtime substitutions,
algorithms and caches, refuses (and unregisters) a plugin whose registration fails a check,
settles each spec name between the plugins that claim it (an override wins; two plain claims
are a conflict) and returns one immutable `Tables` snapshot: plain data, so nothing a serving
loop (or a framework's process) reads from it goes through pluggy again.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Any

import attrs
import pluggy

from specreg import hookspecs
from specreg.catalog import Catalog, ErrorEntry
from specreg.contract.substitutions import Substitution, substitution_refusal
from specreg.errors import PluginError, Problem, SpecRegError
from specreg.registry.default_plugin import PLUGIN_NAME as DEFAULT_PLUGIN_NAME
from specreg.registry.plugin_info import PluginInfo
from specreg.registry.loading import Fail, own_version
from specreg.registry.registration_checks import (
    catalog_refused,
    hook_raised,
    name_conflict,
    substitutions_refused,
    wrong_spec_type,
)
from specreg.contract.specs import AlgorithmSpec, CacheSpec, Origin


@attrs.frozen
class Claim:
    """One plugin's claim on a spec name."""

    spec: Any
    plugin: str
    override: bool


@attrs.frozen
class Tables:
    """An immutable snapshot of what the loaded plugins registered."""

    algorithms: Mapping[str, AlgorithmSpec]  # by name and alias
    caches: Mapping[str, CacheSpec]
    shadowed: Mapping[str, frozenset[str]]  # spec name -> plugins whose claim was overridden
    conflicts: Mapping[str, Problem]  # names nobody may use until the conflict is resolved
    owned: Mapping[str, frozenset[str]] = attrs.field(factory=dict)  # plugin -> spec names
    plugin_infos: tuple[PluginInfo, ...] = ()  # what plugins() reports, built once per rebuild
    catalog: Catalog = attrs.field(factory=Catalog)  # the core's and these plugins' entries
    #: runtime substitution name -> what its plugin registered (`specreg.contract.substitutions`)
    substitutions: Mapping[str, Substitution] = attrs.field(factory=dict)


EMPTY_TABLES = Tables({}, {}, {}, {})


@attrs.define
class _Collection:
    """One rebuild's inputs: the plugin manager, where each plugin came from, how to fail."""

    pm: pluggy.PluginManager
    origins: dict[str, Origin]
    fail: Fail
    refused: list[str] = attrs.field(factory=list)

    def refuse(self, plugin: str, prob: Problem, detail: str = "") -> None:
        """Unregister `plugin`, drop its origin and record why (raises when strict)."""
        origin = self.origins.pop(plugin, None)
        self.pm.unregister(name=plugin)
        self.refused.append(plugin)
        self.fail(plugin, origin.distribution if origin else None, prob, detail=detail)


def hook_impls(pm: pluggy.PluginManager, hook_name: str, skip: frozenset[str] = frozenset()) -> list[Any]:
    """Hook implementations in pluggy's call order, minus the plugins in `skip`."""
    caller = getattr(pm.hook, hook_name)
    return [i for i in reversed(caller.get_hookimpls()) if i.plugin_name not in skip]


def collect_tables(
    pm: pluggy.PluginManager,
    origins: dict[str, Origin],
    load_seconds: Mapping[str, float],
    fail: Fail,
    *,
    strict: bool,
) -> Tables:
    """Ask every plugin to register its specs and build the lookup tables."""
    run = _Collection(pm, origins, fail)
    catalog = _error_entries(run)
    substitutions = _substitutions(run)
    claims: dict[str, dict[str, list[Claim]]] = {"algorithm": {}, "cache": {}}
    for hook_name, kind, spec_type in (
        ("specreg_register_algorithms", "algorithm", AlgorithmSpec),
        ("specreg_register_caches", "cache", CacheSpec),
    ):
        for impl in hook_impls(pm, hook_name):
            if impl.plugin_name in run.refused:
                continue
            for claim in _claims_of(run, impl, hook_name, kind, spec_type):
                for name in claim.spec.names:
                    claims[kind].setdefault(name, []).append(claim)
    for plugin in run.refused:  # drop everything the refused plugins claimed
        substitutions = {n: (s, p) for n, (s, p) in substitutions.items() if p != plugin}
        for table in claims.values():
            for name in list(table):
                table[name] = [c for c in table[name] if c.plugin != plugin]
                if not table[name]:
                    del table[name]
    algorithms, alg_shadowed, alg_conflicts = _settle(claims["algorithm"], "algorithm", origins)
    caches, cache_shadowed, cache_conflicts = _settle(claims["cache"], "cache", origins)
    if strict and (alg_conflicts or cache_conflicts):
        raise PluginError([*alg_conflicts.values(), *cache_conflicts.values()])
    owned: dict[str, set[str]] = {}
    for table in claims.values():
        for found in table.values():
            for claim in found:
                owned.setdefault(claim.plugin, set()).add(claim.spec.name)
    return Tables(
        algorithms=algorithms,
        caches=caches,
        shadowed={**alg_shadowed, **cache_shadowed},
        conflicts={**alg_conflicts, **cache_conflicts},
        owned={plugin: frozenset(names) for plugin, names in owned.items()},
        plugin_infos=tuple(_plugin_infos(pm, origins, load_seconds)),
        catalog=catalog,
        substitutions=MappingProxyType({n: s for n, (s, _) in sorted(substitutions.items())}),
    )


def _claims_of(
    run: _Collection, impl: Any, hook_name: str, kind: str, spec_type: type
) -> list[Claim]:
    """What one plugin's register hook claims; [] (and the plugin refused) when it fails."""
    plugin = impl.plugin_name
    pending: list[Claim] = []

    def register(spec: Any, *, override: bool = False) -> None:
        if not isinstance(spec, spec_type):
            raise PluginError(wrong_spec_type(plugin, spec, kind, spec_type))
        pending.append(Claim(spec, plugin, bool(override)))

    try:
        impl.function(register=register)
    except Exception as exc:  # noqa: BLE001 - a plugin must never take others down
        prob = exc.problems[0] if isinstance(exc, SpecRegError) else hook_raised(plugin, hook_name, exc)
        run.refuse(plugin, prob, traceback.format_exc(limit=5))
        return []
    return pending


def _error_entries(run: _Collection) -> Catalog:
    """Run every plugin's specreg_register_errors, in registration order (a code belongs to
    the first plugin that registers it), into a new catalog; a plugin refused (SR119) keeps
    none of its entries."""
    catalog = Catalog()
    for impl in run.pm.hook.specreg_register_errors.get_hookimpls():  # registration order
        plugin = impl.plugin_name
        package = _top_package(impl.plugin)
        reasons: list[str] = []
        accepted: list[ErrorEntry] = []

        def register(
            entry: Any, _p: str = plugin, _pkg: str = package,
            _out: list[str] = reasons, _ok: list[ErrorEntry] = accepted,
        ) -> None:
            if not isinstance(entry, ErrorEntry):
                _out.append(f"registered {type(entry).__name__}, not a specreg ErrorEntry")
                return
            reason = catalog.refusal(entry, _p, package=_pkg)
            if reason is None and any(e.code == entry.code and e != entry for e in _ok):
                reason = f"code {entry.code} is registered twice with different entries"
            if reason is not None:
                _out.append(reason)
            else:
                _ok.append(entry)

        try:
            impl.function(register=register)
        except Exception as exc:  # noqa: BLE001 - a plugin must never take others down
            reasons.append(f"raised {type(exc).__name__}: {exc}")
        if not reasons:
            for entry in accepted:
                catalog.add(entry, plugin, package=package)
        else:
            run.refuse(plugin, catalog_refused(plugin, reasons))
    return catalog


def _substitutions(run: _Collection) -> dict[str, tuple[Substitution, str]]:
    """Run every plugin's specreg_register_substitutions, in registration order (a name belongs
    to the first plugin that registers it: the default plugin's come first), into name ->
    (substitution, plugin); a plugin with a malformed substitution or a taken name is refused
    (SR129) and keeps none of them."""
    table: dict[str, tuple[Substitution, str]] = {}
    impls = run.pm.hook.specreg_register_substitutions.get_hookimpls()  # registration order
    for impl in sorted(impls, key=lambda i: i.plugin_name != DEFAULT_PLUGIN_NAME):
        plugin = impl.plugin_name
        reasons: list[str] = []
        accepted: dict[str, Substitution] = {}

        def register(
            substitution: Any, _p: str = plugin, _out: list[str] = reasons,
            _ok: dict[str, Substitution] = accepted,
        ) -> None:
            reason = substitution_refusal(substitution)
            if reason is None:
                name = substitution.name
                taken = table.get(name)
                if taken is not None and taken[0] != substitution:
                    reason = f"the name {name!r} is already registered by plugin {taken[1]!r}"
                elif _ok.get(name, substitution) != substitution:
                    reason = f"the name {name!r} is registered twice with different substitutions"
            if reason is not None:
                _out.append(reason)
            else:
                _ok[substitution.name] = substitution

        try:
            impl.function(register=register)
        except Exception as exc:  # noqa: BLE001 - a plugin must never take others down
            reasons.append(f"raised {type(exc).__name__}: {exc}")
        if reasons:
            run.refuse(plugin, substitutions_refused(plugin, reasons))
            continue
        for name, substitution in accepted.items():
            table.setdefault(name, (substitution, plugin))
    return table


def _settle(
    table: dict[str, list[Claim]], kind: str, origins: Mapping[str, Origin]
) -> tuple[dict[str, Any], dict[str, frozenset[str]], dict[str, Problem]]:
    chosen: dict[str, Any] = {}
    shadowed: dict[str, frozenset[str]] = {}
    conflicts: dict[str, Problem] = {}
    for name, found in table.items():
        overriders = [c for c in found if c.override]
        plain = [c for c in found if not c.override]
        contenders = overriders if len(overriders) == 1 else found
        if len(contenders) > 1:
            claimants = [f"{c.plugin!r} ({_dist_text(origins, c.plugin)})" for c in contenders]
            conflicts[name] = name_conflict(kind, name, claimants)
            continue
        winner = contenders[0]
        spec = attrs.evolve(winner.spec, origin=origins.get(winner.plugin))
        chosen[name] = spec
        losers = frozenset(c.plugin for c in plain if c.plugin != winner.plugin)
        if losers:
            shadowed[spec.name] = losers | shadowed.get(spec.name, frozenset())
    return chosen, shadowed, conflicts


def _dist_text(origins: Mapping[str, Origin], plugin: str) -> str:
    origin = origins.get(plugin)
    if origin is None or origin.distribution is None:
        return "in-process plugin"
    return f"{origin.distribution} {origin.version or ''}".strip()


def _plugin_infos(
    pm: pluggy.PluginManager, origins: Mapping[str, Origin], load_seconds: Mapping[str, float]
) -> list[PluginInfo]:
    out = []
    for name, plugin in pm.list_name_plugin():
        callers = pm.get_hookcallers(plugin) or []
        origin = origins.get(name)
        out.append(
            PluginInfo(
                name=name,
                distribution=origin.distribution if origin else "specreg",
                version=origin.version if origin else own_version(),
                hooks=tuple(sorted(c.name for c in callers)),
                load_seconds=load_seconds.get(name),
            )
        )
    return sorted(out, key=lambda p: p.name)


def own_names(table: Mapping[str, Any]) -> list[Any]:
    """The specs stored under their own name, sorted. An alias that still points at a spec
    whose name was overridden or is in conflict must not list that spec under the name."""
    return [table[name] for name in sorted(table) if table[name].name == name]


def hook_names() -> list[str]:
    """Every hook specreg specifies."""
    return sorted(n for n in dir(hookspecs) if n.startswith("specreg_"))


def _top_package(plugin: object) -> str:
    """The top-level package a plugin (module or object) is defined in."""
    module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
    return module.split(".")[0]
