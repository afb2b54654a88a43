"""What both framework adapters share: the mode switch, the version check and one-time logging."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Literal

import attrs

from specreg.adapters.substitution_runtime import from_env as substitutions_from_env
from specreg.adapters.substitution_runtime import install_all
from specreg.errors import ConfigError, PluginError, Problem, problem

if TYPE_CHECKING:
    from specreg.registry.plan import SpecPlan

Mode = Literal["enforce", "shadow"]
MODES: tuple[str, ...] = ("enforce", "shadow")
OFF_VALUES = ("", "0", "off", "false", "no")

logger = logging.getLogger("specreg.adapters")


def mode_from_env(variable: str) -> Mode | None:
    """None when the adapter is off; SR176 for a value other than enforce or shadow."""
    value = os.environ.get(variable, "").strip().lower()
    if value in OFF_VALUES:
        return None
    if value not in MODES:
        raise ConfigError(
            problem(
                "SR176", f"{variable}={os.environ[variable]!r} is not an adapter mode",
                accepted="enforce, shadow, or unset (off)",
                fix=f"export {variable}=enforce (or shadow), or unset it",
                field=variable,
            )
        )
    return value  # type: ignore[return-value]


def version_notice(framework: str, installed: str | None, tested: tuple[str, ...]) -> Problem | None:
    """SR163 when the installed framework release is not one the adapter was tested with."""
    if installed in tested:
        return None
    return problem(
        "SR163",
        f"{framework} {installed} is installed; specreg's adapter was tested with "
        f"{framework} {', '.join(tested)}",
        accepted=", ".join(f"{framework}=={v}" for v in tested),
        fix=f"pip install {framework}=={tested[-1]}, or use shadow mode to see disagreements",
        severity="warning",
    )


def missing_hook(framework: str, hook: str, exc: BaseException) -> PluginError:
    """SR164 naming the hook the adapter needs and did not find."""
    return PluginError(
        problem(
            "SR164",
            f"{framework} has no {hook} ({type(exc).__name__}: {exc}); specreg's adapter needs it",
            accepted=f"a {framework} release that provides {hook}",
            fix=f"install the tested {framework} release, or unset the adapter's variable",
        )
    )


@attrs.define
class OnceLog:
    """Logs each distinct problem once per process."""

    seen: set[str] = attrs.field(factory=set)

    def log(self, found: Problem) -> bool:
        text = found.render()
        if text in self.seen:
            return False
        self.seen.add(text)
        logger.warning("%s", text)
        return True


def resolve_for_framework(
    registry: Any, data: dict[str, Any], framework: str = "sglang",
    facts: dict[str, Any] | None = None,
) -> tuple[SpecPlan, list[Problem]]:
    """The plan for framework-spelled `data`, and the notices to print, in `framework`'s words
    (`specreg.adapters.words`). `facts` are the framework's own answers (inside SGLang:
    `specreg.adapters.sglang_rules`), used instead of specreg's standalone copy of its rules.

    Raises one `ConfigError` (a ValueError) with every problem: the registry's and, with
    HiSparse on, SGLang's runtime rules.
    """
    from specreg.adapters.words import error_in_words, in_words
    from specreg.errors import SpecRegError
    from specreg.framework_args.rules import hisparse_runtime_problems
    from specreg.registry.translate import config_from_flags

    try:
        config = config_from_flags(data)
        plan: SpecPlan = registry.resolve(config)
        found = hisparse_runtime_problems(
            {**config.framework, **(facts or {})}, plan.config.topk or 1,
            plan.num_tokens_per_req("target_verify"), plan.config.substitutions,
        )
        errors = [p for p in found if p.is_error]
        if errors:
            raise ConfigError(errors)
    except SpecRegError as exc:
        raise error_in_words(exc, framework) from None
    return plan, [in_words(p, framework) for p in [*config.notices, *plan.notices]]


def outcome(
    registry: Any, data: dict[str, Any], facts: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What specreg resolves for `data`: steps, topk, draft tokens, gamma and widths, or the codes."""
    from specreg.errors import SpecRegError
    from specreg.contract.phase import PHASES

    try:
        plan, _ = resolve_for_framework(registry, data, framework_of(data), facts)
    except SpecRegError as exc:
        return {"error": sorted(set(exc.codes))}
    config = plan.config
    return {
        "error": None,
        "values": {"num_steps": config.num_steps, "topk": config.topk,
                   "num_draft_tokens": config.num_draft_tokens},
        "gamma": plan.gamma,
        "widths": {
            worker: {p.value: plan.num_tokens_per_req(p, worker == "draft") for p in PHASES}
            for worker in ("target", "draft")
        },
    }


def framework_of(data: dict[str, Any]) -> str:
    """Whose words `data` is spelled in: vLLM's speculative-config keys, else SGLang's flags."""
    from specreg.contract.framework_flags import VLLM_FIELDS

    return "vllm" if any(k in data for k in VLLM_FIELDS) else "sglang"


@attrs.define
class FrameworkAdapter:
    """What each framework's adapter holds: its mode, its registry (loaded on first use) and
    the once-per-process log of disagreements. `substitutions` are the runtime substitutions its
    switch turned on (enforce mode only); every plan it resolves records them.

    `refusal` is the coded error of a mistyped mode switch (SR176), or of a substitution that
    did not apply (SR182): the adapter is installed anyway and raises it from every hook, so a
    user who asked for specreg never silently runs without it.
    """

    mode: Mode
    registry: Any = None
    once: OnceLog = attrs.field(factory=OnceLog)
    refusal: ConfigError | PluginError | None = None
    substitutions: tuple[str, ...] = ()

    framework = ""  # "SGLang" or "vLLM", for messages
    words = ""  # "sglang" or "vllm": whose flags messages name (specreg.adapters.words)
    variable = ""  # the switch, e.g. SPECREG_SGLANG

    def refuse_if_mistyped(self) -> None:
        """Raise the mode switch's SR176 when it was mistyped."""
        if self.refusal is not None:
            raise self.refusal

    def resolve(
        self, data: dict[str, Any], facts: dict[str, Any] | None = None
    ) -> tuple[SpecPlan, list[Problem]]:
        if self.substitutions:
            data = {**data, "substitutions": list(self.substitutions)}
        return resolve_for_framework(self.loaded_registry(), data, self.words, facts)

    def log_failure(self, data: dict[str, Any], exc: BaseException) -> None:
        """Shadow mode: specreg failed where the framework went on (never raised, logged once)."""
        from specreg.errors import SpecRegError

        if isinstance(exc, SpecRegError):
            self.log_rejection(data, list(exc.codes))
            return
        self.once.log(problem(
            "SR166", f"{self.framework} accepted {data} but specreg failed: "
            f"{type(exc).__name__}: {exc}",
            accepted="a config both accept", fix="run `specreg check` with the same config, "
            "and report the failure to specreg", severity="warning",
        ))

    def loaded_registry(self) -> Any:
        if self.registry is None:
            from specreg.registry.registry import Registry

            self.registry = Registry.load()
        return self.registry

    def log_rejection(self, data: dict[str, Any], codes: list[str]) -> None:
        """Shadow mode: the framework accepted what specreg refuses."""
        self.once.log(problem(
            "SR166", f"{self.framework} accepted {data} but specreg reports {', '.join(codes)}",
            accepted="a config both accept", fix="run `specreg check` with the same config",
            severity="warning",
        ))

    def log_disagreement(self, what: str, theirs: Any, ours: Any, field: str) -> None:
        """Shadow mode: both resolved, to different values."""
        if theirs == ours:
            return
        self.once.log(problem(
            "SR166", f"{what}: {self.framework} resolved {theirs!r}, specreg {ours!r}",
            accepted="see the deviation table in the docs",
            fix=f"{self.variable}=enforce uses specreg's value", field=field, severity="warning",
        ))


def load_adapter(adapter_class: type[FrameworkAdapter]) -> None:
    """A plugin entry point's body: nothing unless the adapter's variable turns it on.

    A mistyped variable (SR176, or SR181 for the substitution switch) is raised here, and, since a framework's loader may catch what
    a plugin raises (SGLang's logs it and goes on), the adapter is first installed with the
    error as its `refusal`: every later call of it raises the same coded error.
    """
    try:
        mode = mode_from_env(adapter_class.variable)
        substitutions = () if mode is None else substitutions_from_env(adapter_class.words, mode)
    except ConfigError as exc:
        try:
            adapter_class(mode="enforce", refusal=exc).install()  # type: ignore[attr-defined]
        except PluginError:
            pass  # no framework (SR164) to guard: the mode's own error is the one to see
        logger.error("%s", exc)
        raise
    if mode is None:
        return
    adapter = adapter_class(mode=mode, substitutions=substitutions)
    adapter.install()  # type: ignore[attr-defined]
    if substitutions:
        try:
            install_all(adapter_class.words, substitutions)
        except PluginError as exc:  # SR182: the loader may swallow it, the adapter's hooks not
            adapter.refusal = exc  # type: ignore[assignment]
            logger.error("%s", exc)
            raise
    logger.info("specreg %s adapter on (%s)", adapter_class.framework, mode)
