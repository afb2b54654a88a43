"""The plugin registry: the one object a framework loads, queries and resolves configs with.

It composes the parts that each do one job: `specreg.registry.loading` (discovery through entry
points, each import isolated), `specreg.registry.registration_checks` (what a plugin may register),
`specreg.registry.tables` (the settled tables of specs and error entries) and `specreg.registry.resolver`
(configs into plans). Hooks run only at load time and resolve time.
`registry.resolve(config)` returns a `SpecPlan` of plain data and bound objects, which a serving
loop queries per step without pluggy. Everything a registry learns from its plugins (specs,
catalog entries, failures) lives on the instance. `Registry.load()` hands out registries from a
`RegistryCache` (by default `SHARED_REGISTRIES`); those are read-only, so no caller can change
another caller's registry.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

import pluggy

from specreg import hookspecs

from specreg.registry import default_plugin
from specreg._suggest import unknown_name_problem, unmatched_allowlist_problem
from specreg.catalog import Catalog
from specreg.contract.config import SpecConfig
from specreg.errors import PluginError, Problem, SpecRegError, UnknownNameError
from specreg.registry.plan import SpecPlan
from specreg.registry.plugin_info import PluginInfo
from specreg.registry.loading import (
    ALLOWLIST_ENV,
    ENTRY_POINT_GROUP,
    PluginFailure,
    distribution_of,
    entry_points,
    import_entry_point,
    parse_allowlist,
    timeout_from_env,
)
from specreg.registry.tables import EMPTY_TABLES, collect_tables, hook_impls, own_names
from specreg.registry.tables import hook_names as all_hook_names
from specreg.registry.registration_checks import hook_raised, register_checked, shared_registry_change
from specreg.contract.resolution import Resolution
from specreg.registry.resolver import check_config, resolve_plan, resolve_sizes
from specreg.contract.specs import AlgorithmSpec, CacheSpec, Origin
from specreg.contract.substitutions import Substitution

__all__ = ["SHARED_REGISTRIES", "PluginFailure", "Registry", "RegistryCache"]


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
            import_timeout if import_timeout is not None else timeout_from_env()
        )
        self._load_seconds: dict[str, float] = {}
        self._lock = threading.RLock()
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._pm.register(default_plugin, name=default_plugin.PLUGIN_NAME)
        self._origins: dict[str, Origin] = {}
        self._load_failures: list[PluginFailure] = []
        self._tables = EMPTY_TABLES
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
            found = entry_points(group)
            self._report_unmatched(allowlist, {ep.name for ep in found}, group)
            for ep in found:
                if allowlist is not None and ep.name not in allowlist:
                    continue
                if ep.name in seen or self._pm.has_plugin(ep.name):
                    continue  # the same name from two paths: the first one wins
                seen.add(ep.name)
                started = time.perf_counter()
                ok, plugin = import_entry_point(ep, self.import_timeout, self._fail)
                if not ok:
                    continue
                self._load_seconds[ep.name] = time.perf_counter() - started
                self._register(plugin, ep.name, *distribution_of(ep))
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
            raise PluginError(shared_registry_change(method))

    def _register(
        self, plugin: object, name: str, dist: str | None, version: str | None
    ) -> bool:
        refusal = register_checked(self._pm, plugin, name, self.hook_names())
        if refusal is not None:
            self._fail(name, dist, refusal)
            return False
        self._origins[name] = Origin(plugin=name, distribution=dist, version=version)
        return True

    def _fail(self, name: str, dist: str | None, prob: Problem, *, detail: str = "") -> None:
        failure = PluginFailure(plugin=name, distribution=dist, problem=prob, detail=detail)
        if self.strict:
            raise PluginError(prob)
        self._load_failures.append(failure)

    # ------------------------------------------------------------------------ spec collection
    def _rebuild(self) -> None:
        """Ask every plugin to register its specs and rebuild the lookup tables."""
        self._tables = collect_tables(
            self._pm, self._origins, self._load_seconds, self._fail, strict=self.strict
        )

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
        return own_names(self._tables.algorithms)

    def caches(self) -> list[CacheSpec]:
        return own_names(self._tables.caches)

    def substitutions(self) -> Mapping[str, Substitution]:
        """The runtime substitutions the loaded plugins registered, by name (read-only plain
        data, resolved once at load): what the adapters' switches and a config's
        `substitutions` accept, and the installer each runs in a framework's process."""
        return self._tables.substitutions

    def plugins(self) -> list[PluginInfo]:
        """Loaded plugins (the default plugin included) with the hooks each implements."""
        return list(self._tables.plugin_infos)

    @staticmethod
    def hook_names() -> list[str]:
        return all_hook_names()

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
        return hook_impls(self._pm, hook_name, skip)

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
                raise PluginError(hook_raised(impl.plugin_name, hook_name, exc)) from exc
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

    def resolution(self, config: SpecConfig | Mapping[str, Any]) -> Resolution:
        """The resolved config, gamma and widths (and every adaptive candidate's) without
        building the verifier, drafter or swapper; raises one `ConfigError` listing every
        problem. Imports nothing heavy: what `specreg check` sizes framework rules with."""
        return resolve_sizes(self, config)

    def resolve(self, config: SpecConfig | Mapping[str, Any]) -> SpecPlan:
        """Validate `config`, resolve gamma and widths, build the kernels: a `SpecPlan`.

        Raises one `ConfigError` listing every problem found.
        """
        return resolve_plan(self, config)


#: The cache `Registry.load()` uses unless it is given another one.
SHARED_REGISTRIES = RegistryCache()
