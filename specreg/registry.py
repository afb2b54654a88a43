"""The plugin registry: discovers plugins, isolates their failures, collects their specs.

Hooks run only at load time (here) and resolve time (`specreg.resolver`).
`registry.resolve(config)` returns a `SpecPlan` of plain data and bound objects, which a serving
loop queries per step without pluggy. Everything a registry learns from its plugins (specs,
catalog entries, failures) lives on the instance. `Registry.load()` hands out registries from a
`RegistryCache` (by default `SHARED_REGISTRIES`); those are read-only, so no caller can change
another caller's registry.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

import attrs
import pluggy

from specreg import default_plugin, hookspecs
from specreg._suggest import unknown_name_problem, unmatched_allowlist_problem
from specreg.catalog import Catalog, ErrorEntry
from specreg.config import SpecConfig
from specreg.errors import (
    PluginError,
    Problem,
    SpecRegError,
    UnknownNameError,
    problem,
)
from specreg.plan import SpecPlan
from specreg.plugin_info import PluginInfo
from specreg.resolver import check_config, resolve_plan
from specreg.specs import AlgorithmSpec, CacheSpec, Origin

ENTRY_POINT_GROUP = "specreg"
ALLOWLIST_ENV = "SPECREG_PLUGINS"
IMPORT_TIMEOUT_ENV = "SPECREG_PLUGIN_IMPORT_TIMEOUT"
DEFAULT_IMPORT_TIMEOUT = 60.0


@attrs.frozen(kw_only=True)
class PluginFailure:
    """A plugin that was skipped, or a registration that was refused, and why."""

    plugin: str
    distribution: str | None
    problem: Problem
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "plugin": self.plugin,
            "distribution": self.distribution,
            "code": self.problem.code,
            "message": self.problem.render(),
            "detail": self.detail,
        }


@attrs.frozen
class _Claim:
    spec: Any
    plugin: str
    override: bool


@attrs.frozen
class _Tables:
    """An immutable snapshot of what the loaded plugins registered."""

    algorithms: Mapping[str, AlgorithmSpec]  # by name and alias
    caches: Mapping[str, CacheSpec]
    shadowed: Mapping[str, frozenset[str]]  # spec name -> plugins whose claim was overridden
    conflicts: Mapping[str, Problem]  # names nobody may use until the conflict is resolved
    owned: Mapping[str, frozenset[str]] = attrs.field(factory=dict)  # plugin -> spec names
    plugin_infos: tuple[PluginInfo, ...] = ()  # what plugins() reports, built once per rebuild
    catalog: Catalog = attrs.field(factory=Catalog)  # the core's and these plugins' entries


def parse_allowlist(value: str | None) -> frozenset[str] | None:
    """SPECREG_PLUGINS: unset -> None (load all); '' -> nothing; 'a,b' -> {a, b}."""
    if value is None:
        return None
    return frozenset(part.strip() for part in value.split(",") if part.strip())


class RegistryCache:
    """Loaded registries, one per set of `Registry.load()` arguments, shared by every caller who
    passes the same ones (thread-safe: one load per key, however many threads ask at once).

    The registries it holds are read-only (`register_plugin`, `unregister_plugin` and
    `load_entrypoints` raise SR109). `SHARED_REGISTRIES` is the cache `Registry.load()` uses
    unless given another; a caller that wants its own shared set creates a `RegistryCache` and
    passes it as `cache=`.
    """

    def __init__(self) -> None:
        self._registries: dict[tuple[Any, ...], Registry] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...], build: Callable[[], Registry]) -> Registry:
        """The registry cached under `key`, built (and sealed) by `build()` on first use."""
        with self._lock:
            found = self._registries.get(key)
            if found is None:
                found = build()
                found._sealed = True
                self._registries[key] = found
            return found

    def clear(self) -> None:
        """Forget every cached registry; later loads build new ones."""
        with self._lock:
            self._registries.clear()

    def __len__(self) -> int:
        return len(self._registries)


class Registry:
    """Algorithms and caches registered by plugins, and the resolver that turns configs into plans.

    Use `Registry.load()` in a serving framework; `Registry()` gives an empty registry (only the
    default rules) to which tests add plugins with `register_plugin`.
    """

    def __init__(self, *, strict: bool = False, import_timeout: float | None = None) -> None:
        self.strict = strict
        self.import_timeout = (
            import_timeout if import_timeout is not None else _timeout_from_env()
        )
        self._load_seconds: dict[str, float] = {}
        self._lock = threading.RLock()
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._pm.register(default_plugin, name=default_plugin.PLUGIN_NAME)
        self._origins: dict[str, Origin] = {}
        self._load_failures: list[PluginFailure] = []
        self._tables = _Tables({}, {}, {}, {})
        self._sealed = False  # set by the RegistryCache that shares this registry
        self._rebuild()

    # ------------------------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        *,
        strict: bool = False,
        group: str = ENTRY_POINT_GROUP,
        allowlist: Iterable[str] | None = None,
        fresh: bool = False,
        import_timeout: float | None = None,
        cache: RegistryCache | None = None,
    ) -> Registry:
        """Discover plugins through entry points in `group` and return the registry.

        `allowlist` (or the SPECREG_PLUGINS variable) restricts which entry-point names load.
        A plugin that fails to import or register is recorded in `failures` and skipped, unless
        `strict`, which raises `PluginError`. Repeated calls with the same arguments return the
        same read-only registry from `cache` (default `SHARED_REGISTRIES`; idempotent and
        thread-safe); `fresh=True` builds a new registry of the caller's own, to which
        `register_plugin` may add. A plugin whose import takes longer than `import_timeout`
        seconds (default: the SPECREG_PLUGIN_IMPORT_TIMEOUT variable, else 60) is skipped with
        SR118.
        """
        allowed = (
            frozenset(allowlist)
            if allowlist is not None
            else parse_allowlist(os.environ.get(ALLOWLIST_ENV))
        )

        def build() -> Registry:
            registry = cls(strict=strict, import_timeout=import_timeout)
            registry.load_entrypoints(group=group, allowlist=allowed)
            return registry

        if fresh:
            return build()
        key = (cls, group, allowed, strict, import_timeout)
        return (cache if cache is not None else SHARED_REGISTRIES).get(key, build)

    def load_entrypoints(
        self, *, group: str = ENTRY_POINT_GROUP, allowlist: frozenset[str] | None = None
    ) -> None:
        """Import and register every entry point of `group` (filtered by `allowlist`)."""
        self._check_writable("load_entrypoints")
        with self._lock:
            seen: set[str] = set()
            found = sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name)
            self._report_unmatched(allowlist, {ep.name for ep in found}, group)
            for ep in found:
                if allowlist is not None and ep.name not in allowlist:
                    continue
                if ep.name in seen or self._pm.has_plugin(ep.name):
                    continue  # the same name from two paths: the first one wins
                seen.add(ep.name)
                dist = getattr(ep, "dist", None)
                dist_name = dist.metadata["Name"] if dist is not None else None
                version = dist.version if dist is not None else None
                started = time.perf_counter()
                try:
                    plugin = _load_with_timeout(ep, self.import_timeout)
                except TimeoutError:
                    self._fail(
                        ep.name,
                        dist_name,
                        problem(
                            "SR118",
                            f"plugin {ep.name!r} ({dist_name or 'unknown distribution'}) did not "
                            f"finish importing within {self.import_timeout:g} s",
                            accepted=f"imports that finish within {IMPORT_TIMEOUT_ENV} seconds",
                            fix=f"find what the plugin's import waits on, raise "
                            f"{IMPORT_TIMEOUT_ENV}, or leave it out of {ALLOWLIST_ENV}",
                        ),
                    )
                    continue
                except BaseException as exc:  # noqa: BLE001 - isolate every plugin failure
                    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                        raise
                    self._fail(
                        ep.name,
                        dist_name,
                        problem(
                            "SR110",
                            f"plugin {ep.name!r} ({dist_name or 'unknown distribution'}) failed "
                            f"to import: {type(exc).__name__}: {exc}",
                            fix=f"reinstall or remove {dist_name or ep.value}, or leave it out "
                            f"of {ALLOWLIST_ENV}",
                        ),
                        detail=traceback.format_exc(limit=5),
                    )
                    continue
                self._load_seconds[ep.name] = time.perf_counter() - started
                self._register(plugin, ep.name, dist_name, version)
            self._rebuild()

    def _report_unmatched(
        self, allowlist: frozenset[str] | None, available: set[str], group: str
    ) -> None:
        """SR141 for every SPECREG_PLUGINS name that matches no installed entry point."""
        for name in sorted((allowlist or frozenset()) - available):
            self._fail(name, None, unmatched_allowlist_problem(name, available, group))

    def register_plugin(
        self,
        plugin: ModuleType | object,
        name: str | None = None,
        *,
        distribution: str | None = None,
        version: str | None = None,
    ) -> str | None:
        """Register an in-process plugin (a module or object with hookimpls). Returns its name,
        or None when it was refused (see `failures`)."""
        self._check_writable("register_plugin")
        plugin_name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        with self._lock:
            ok = self._register(plugin, plugin_name, distribution, version)
            self._rebuild()
        return plugin_name if ok and self._pm.has_plugin(plugin_name) else None

    def unregister_plugin(self, name: str) -> None:
        self._check_writable("unregister_plugin")
        with self._lock:
            if self._pm.has_plugin(name):
                self._pm.unregister(name=name)
            self._origins.pop(name, None)
            self._rebuild()

    def _check_writable(self, method: str) -> None:
        """SR109 for a change to a registry a `RegistryCache` shares."""
        if self._sealed:
            raise PluginError(
                problem(
                    "SR109",
                    f"{method} on a registry from Registry.load(), which every caller with the "
                    "same load arguments shares",
                    accepted="changes to a registry of the caller's own",
                    fix="build one with Registry.load(fresh=True) (or Registry()) and add the "
                    "plugin to it",
                )
            )

    def _register(
        self, plugin: object, name: str, dist: str | None, version: str | None
    ) -> bool:
        try:
            self._pm.register(plugin, name=name)
        except pluggy.PluginValidationError as exc:
            if self._pm.has_plugin(name):  # pluggy keeps a half-registered plugin
                self._pm.unregister(name=name)
            self._fail(
                name,
                dist,
                problem(
                    "SR111",
                    f"plugin {name!r} has a hook implementation that does not match its "
                    f"specification: {exc}",
                    accepted="hookimpls named and shaped as in specreg.hookspecs",
                    fix="compare the plugin's hookimpls with the hook reference",
                ),
            )
            return False
        except ValueError as exc:  # already registered under this name
            self._fail(
                name,
                dist,
                problem(
                    "SR112",
                    f"a plugin named {name!r} is already registered: {exc}",
                    fix="give the plugin another entry-point name",
                ),
            )
            return False
        bad = self._unknown_or_wrapper_hooks(name)
        if bad:
            self._pm.unregister(name=name)
            self._fail(
                name,
                dist,
                problem(
                    "SR111",
                    f"plugin {name!r} implements {', '.join(bad)}, which are not specreg hooks "
                    "(or are wrappers, which specreg does not call)",
                    accepted=", ".join(self.hook_names()),
                    fix="rename the function to a hook in specreg.hookspecs",
                ),
            )
            return False
        self._origins[name] = Origin(plugin=name, distribution=dist, version=version)
        return True

    def _unknown_or_wrapper_hooks(self, name: str) -> list[str]:
        bad = []
        for caller in self._pm.get_hookcallers(self._pm.get_plugin(name)) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin_name != name:
                    continue
                if caller.spec is None or impl.hookwrapper or impl.wrapper:
                    bad.append(caller.name)
        return bad

    def _fail(self, name: str, dist: str | None, prob: Problem, *, detail: str = "") -> None:
        failure = PluginFailure(plugin=name, distribution=dist, problem=prob, detail=detail)
        if self.strict:
            raise PluginError(prob)
        self._load_failures.append(failure)

    # ------------------------------------------------------------------------ spec collection
    def _rebuild(self) -> None:
        """Ask every plugin to register its specs and rebuild the lookup tables."""
        claims: dict[str, dict[str, list[_Claim]]] = {"algorithm": {}, "cache": {}}
        catalog, refused = self._register_error_entries()
        for hook_name, kind, spec_type in (
            ("specreg_register_algorithms", "algorithm", AlgorithmSpec),
            ("specreg_register_caches", "cache", CacheSpec),
        ):
            for impl in self._impls(hook_name):
                plugin = impl.plugin_name
                if plugin in refused:
                    continue
                pending: list[_Claim] = []

                def register(
                    spec: Any,
                    *,
                    override: bool = False,
                    _p: str = plugin,
                    _kind: str = kind,
                    _type: type = spec_type,
                    _out: list[_Claim] = pending,
                ) -> None:
                    if not isinstance(spec, _type):
                        raise PluginError(
                            problem(
                                "SR113",
                                f"plugin {_p!r} registered {type(spec).__name__} as a {_kind}",
                                accepted=f"a specreg.{_type.__name__}",
                                fix=f"call register({_type.__name__}(...))",
                            )
                        )
                    _out.append(_Claim(spec, _p, bool(override)))

                try:
                    impl.function(register=register)
                except Exception as exc:  # noqa: BLE001 - a plugin must never take others down
                    prob = (
                        exc.problems[0]
                        if isinstance(exc, SpecRegError)
                        else problem(
                            "SR114",
                            f"plugin {plugin!r} raised in {hook_name}: {type(exc).__name__}: {exc}",
                            fix="report it to the plugin's authors, or leave the plugin out of "
                            f"{ALLOWLIST_ENV}",
                        )
                    )
                    origin = self._origins.pop(plugin, None)
                    self._pm.unregister(name=plugin)
                    refused.append(plugin)
                    self._fail(
                        plugin,
                        origin.distribution if origin else None,
                        prob,
                        detail=traceback.format_exc(limit=5),
                    )
                    continue
                for claim in pending:
                    for name in claim.spec.names:
                        claims[kind].setdefault(name, []).append(claim)
        for plugin in refused:  # drop everything the refused plugins claimed
            for table in claims.values():
                for name in list(table):
                    table[name] = [c for c in table[name] if c.plugin != plugin]
                    if not table[name]:
                        del table[name]
        algorithms, alg_shadowed, alg_conflicts = self._settle(claims["algorithm"], "algorithm")
        caches, cache_shadowed, cache_conflicts = self._settle(claims["cache"], "cache")
        if self.strict and (alg_conflicts or cache_conflicts):
            raise PluginError([*alg_conflicts.values(), *cache_conflicts.values()])
        owned: dict[str, set[str]] = {}
        for table in claims.values():
            for found in table.values():
                for claim in found:
                    owned.setdefault(claim.plugin, set()).add(claim.spec.name)
        self._tables = _Tables(
            algorithms=algorithms,
            caches=caches,
            shadowed={**alg_shadowed, **cache_shadowed},
            conflicts={**alg_conflicts, **cache_conflicts},
            owned={plugin: frozenset(names) for plugin, names in owned.items()},
            plugin_infos=tuple(self._plugin_infos()),
            catalog=catalog,
        )

    def _register_error_entries(self) -> tuple[Catalog, list[str]]:
        """Run every plugin's specreg_register_errors, in registration order (a code belongs to
        the first plugin that registers it), into a new catalog; returns it and the plugins
        refused (SR119), none of whose entries it keeps."""
        catalog = Catalog()
        refused = []
        hook = self._pm.hook.specreg_register_errors
        for impl in hook.get_hookimpls():  # registration order, not call order
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
                origin = self._origins.pop(plugin, None)
                self._pm.unregister(name=plugin)
                refused.append(plugin)
                self._fail(
                    plugin,
                    origin.distribution if origin else None,
                    problem(
                        "SR119",
                        f"plugin {plugin!r} could not register its error codes: "
                        + "; ".join(reasons),
                        accepted="ErrorEntry objects with codes SR500-SR899 not used by "
                        "another plugin",
                        fix="pick free codes in SR500-SR899 for the plugin's catalog entries",
                    ),
                )
        return catalog, refused

    def _settle(
        self, table: dict[str, list[_Claim]], kind: str
    ) -> tuple[dict[str, Any], dict[str, frozenset[str]], dict[str, Problem]]:
        chosen: dict[str, Any] = {}
        shadowed: dict[str, frozenset[str]] = {}
        conflicts: dict[str, Problem] = {}
        for name, found in table.items():
            overriders = [c for c in found if c.override]
            plain = [c for c in found if not c.override]
            contenders = overriders if len(overriders) == 1 else found
            if len(contenders) > 1:
                dists = " and ".join(
                    f"{c.plugin!r} ({self._dist_text(c.plugin)})" for c in contenders
                )
                conflicts[name] = problem(
                    "SR112",
                    f"the {kind} name {name!r} is registered by both {dists}",
                    fix="uninstall one of them, restrict loading with "
                    f"{ALLOWLIST_ENV}, or register the replacement with override=True",
                    field=kind,
                )
                continue
            winner = contenders[0]
            spec = attrs.evolve(winner.spec, origin=self._origins.get(winner.plugin))
            chosen[name] = spec
            losers = frozenset(c.plugin for c in plain if c.plugin != winner.plugin)
            if losers:
                shadowed[spec.name] = losers | shadowed.get(spec.name, frozenset())
        return chosen, shadowed, conflicts

    def _dist_text(self, plugin: str) -> str:
        origin = self._origins.get(plugin)
        if origin is None or origin.distribution is None:
            return "in-process plugin"
        return f"{origin.distribution} {origin.version or ''}".strip()

    # ---------------------------------------------------------------------------- queries
    @property
    def catalog(self) -> Catalog:
        """The error entries this registry knows: the core's and those its plugins registered
        (what `specreg explain` prints)."""
        return self._tables.catalog

    @property
    def shared(self) -> bool:
        """Whether a `RegistryCache` shares this registry (then it is read-only)."""
        return self._sealed

    @property
    def failures(self) -> list[PluginFailure]:
        """Plugins skipped while loading and registrations refused (SR110-SR114)."""
        conflicts = [
            PluginFailure(plugin="", distribution=None, problem=p)
            for p in self._tables.conflicts.values()
        ]
        return [*self._load_failures, *conflicts]

    def algorithms(self) -> list[AlgorithmSpec]:
        """Every algorithm usable under its own name, once (aliases folded), sorted by name."""
        return _own_names(self._tables.algorithms)

    def caches(self) -> list[CacheSpec]:
        return _own_names(self._tables.caches)

    def plugins(self) -> list[PluginInfo]:
        """Loaded plugins (the default plugin included) with the hooks each implements."""
        return list(self._tables.plugin_infos)

    def _plugin_infos(self) -> list[PluginInfo]:
        out = []
        for name, plugin in self._pm.list_name_plugin():
            callers = self._pm.get_hookcallers(plugin) or []
            origin = self._origins.get(name)
            out.append(
                PluginInfo(
                    name=name,
                    distribution=origin.distribution if origin else "specreg",
                    version=origin.version if origin else _own_version(),
                    hooks=tuple(sorted(c.name for c in callers)),
                    load_seconds=self._load_seconds.get(name),
                )
            )
        return sorted(out, key=lambda p: p.name)

    @staticmethod
    def hook_names() -> list[str]:
        return sorted(n for n in dir(hookspecs) if n.startswith("specreg_"))

    def get_algorithm(self, name: str) -> AlgorithmSpec:
        """The algorithm registered under `name` or an alias (case-insensitive)."""
        return self._lookup(name, "algorithm")  # type: ignore[no-any-return]

    def get_cache(self, name: str) -> CacheSpec:
        return self._lookup(name, "cache")  # type: ignore[no-any-return]

    def _lookup(self, name: str, kind: str) -> Any:
        key = str(name).strip().lower()
        table = self._tables.algorithms if kind == "algorithm" else self._tables.caches
        if key in table:
            return table[key]
        if key in self._tables.conflicts:
            raise UnknownNameError(self._tables.conflicts[key])
        raise UnknownNameError(unknown_name_problem(self, name, kind))

    # ----------------------------------------------------------------------------- dispatch
    def _impls(self, hook_name: str, *, skip: frozenset[str] = frozenset()) -> list[Any]:
        """Hook implementations in pluggy's call order, minus the plugins in `skip`."""
        caller = getattr(self._pm.hook, hook_name)
        return [i for i in reversed(caller.get_hookimpls()) if i.plugin_name not in skip]

    def has_hook(self, hook_name: str, *, skip: frozenset[str] = frozenset()) -> bool:
        """Whether a plugin outside `skip` implements `hook_name`."""
        return bool(self._impls(hook_name, skip=skip))

    def call_hook(
        self, hook_name: str, *, skip: frozenset[str], firstresult: bool, **kwargs: Any
    ) -> Any:
        """Call a hook plugin by plugin (config time only), naming the plugin on failure.

        `firstresult`: the first answer that is not None; otherwise every (plugin, answer)."""
        if firstresult:
            return self.call_hook_named(hook_name, skip=skip, **kwargs)[1]
        return list(self._answers(hook_name, skip, kwargs, stop_at_first=False))

    def call_hook_named(
        self, hook_name: str, *, skip: frozenset[str], **kwargs: Any
    ) -> tuple[str | None, Any]:
        """The first answer that is not None, with the plugin that gave it; (None, None) if none."""
        for found in self._answers(hook_name, skip, kwargs, stop_at_first=True):
            return found
        return None, None

    def _answers(
        self, hook_name: str, skip: frozenset[str], kwargs: dict[str, Any], *, stop_at_first: bool
    ) -> Iterator[tuple[str, Any]]:
        for impl in self._impls(hook_name, skip=skip):
            args = {name: kwargs[name] for name in impl.argnames}
            try:
                result = impl.function(**args)
            except SpecRegError:
                raise
            except Exception as exc:
                raise PluginError(
                    problem(
                        "SR114",
                        f"plugin {impl.plugin_name!r} raised in {hook_name}: "
                        f"{type(exc).__name__}: {exc}",
                        fix="report it to the plugin's authors, or leave the plugin out of "
                        f"{ALLOWLIST_ENV}",
                    )
                ) from exc
            if result is None:
                continue
            yield impl.plugin_name, result
            if stop_at_first:
                return

    def bystanders(self, *names: str) -> frozenset[str]:
        """Plugins that registered specs, none of them named in `names`: a resolve of those
        names does not concern them, so their hooks are not called. Plugins that registered no
        spec (policies, overrides of single hooks) are never bystanders."""
        wanted = set(names)
        return frozenset(p for p, own in self._tables.owned.items() if not own & wanted)

    def shadowed(self, name: str) -> frozenset[str]:
        """Plugins whose claim on spec `name` was overridden: their hooks do not answer for it."""
        return self._tables.shadowed.get(name, frozenset())

    # ------------------------------------------------------------------------------ resolve
    def check(self, config: SpecConfig | Mapping[str, Any]) -> list[Problem]:
        """Every problem with `config` (errors and warnings), without raising."""
        return check_config(self, config)

    def resolve(self, config: SpecConfig | Mapping[str, Any]) -> SpecPlan:
        """Validate `config`, resolve gamma and widths, build the kernels: a `SpecPlan`.

        Raises one `ConfigError` listing every problem found.
        """
        return resolve_plan(self, config)


#: The cache `Registry.load()` uses unless it is given another one.
SHARED_REGISTRIES = RegistryCache()


def _own_names(table: Mapping[str, Any]) -> list[Any]:
    """The specs stored under their own name, sorted. An alias that still points at a spec
    whose name was overridden or is in conflict must not list that spec under the name."""
    return [table[name] for name in sorted(table) if table[name].name == name]


def _top_package(plugin: object) -> str:
    """The top-level package a plugin (module or object) is defined in."""
    module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
    return module.split(".")[0]


def _timeout_from_env() -> float:
    raw = os.environ.get(IMPORT_TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_IMPORT_TIMEOUT
    except ValueError:
        value = DEFAULT_IMPORT_TIMEOUT
    return value if value > 0 else DEFAULT_IMPORT_TIMEOUT


def _load_with_timeout(ep: importlib.metadata.EntryPoint, timeout: float) -> Any:
    """`ep.load()` in a daemon thread, so a hanging import cannot stall every other plugin.

    A timed-out import keeps running in its thread (Python cannot stop it); the plugin is
    skipped and reported.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = ep.load()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=f"specreg-import-{ep.name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(ep.name)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _own_version() -> str | None:
    try:
        return importlib.metadata.version("specreg")
    except importlib.metadata.PackageNotFoundError:
        return None

