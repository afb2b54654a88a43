"""The SGLang adapter: resolves SGLang's speculative flags with specreg inside SGLang's own pipeline.

Loaded by SGLang's plugin loader (entry-point group `sglang.srt.plugins`) in the launcher and in
every scheduler and worker process. Off unless SPECREG_SGLANG is set:

- `enforce`: specreg resolves the speculative flags before SGLang's speculative step runs (so
  before any weights load); a bad config is specreg's coded `ValueError`. SGLang's width function
  (`resolve_num_tokens_per_req`) answers from the plan. The launcher publishes the plan's
  fingerprint in SPECREG_SGLANG_PLAN; each child process (SGLang's scheduler processes) resolves
  its own plan from the arguments it received and raises SR165 if the fingerprints differ, SR180
  if nothing was published.
- `shadow`: SGLang decides, always: specreg resolves the same flags and logs each disagreement
  or refusal once (SR166); nothing specreg raises reaches SGLang.

A mistyped SPECREG_SGLANG (SR176) cannot stop SGLang's plugin loader, which logs what a plugin
raises and goes on; the adapter is installed anyway and raises SR176 from its resolution step,
so building `ServerArgs` (the launch) fails with the coded error.
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs

from specreg.adapters.common import (
    FrameworkAdapter,
    load_adapter,
    missing_hook,
    outcome,
    version_notice,
)
from specreg.adapters.sglang_rules import with_sglang_rules
from specreg.errors import ConsistencyError, problem
from specreg.contract.framework_flags import SGLANG_FIELDS

ENV_MODE = "SPECREG_SGLANG"
ENV_PLAN = "SPECREG_SGLANG_PLAN"
TESTED_VERSIONS = ("0.5.23",)
RESOLUTION_STEP = "handle_speculative_decoding"
WIDTH_FUNCTION = "sglang.srt.speculative.spec_utils.resolve_num_tokens_per_req"
SOURCE = "specreg"
_DECLARED = {
    "num_steps": "speculative_num_steps",
    "topk": "speculative_eagle_topk",
    "num_draft_tokens": "speculative_num_draft_tokens",
}


def flags_of(view: Any) -> dict[str, Any]:
    """The speculative flags on a ServerArgs view, as `config_from_flags` reads them, with
    SGLang's filter order (its torch sampler's: `specreg.contract.filter_order`)."""
    flags = {name: getattr(view, name) for name in SGLANG_FIELDS if getattr(view, name, None) is not None}
    return flags | ({"filter_order": "sglang"} if flags else {})


@attrs.define
class SGLangAdapter(FrameworkAdapter):
    """One SGLang process's adapter; `plan` is the plan it resolved (None before)."""

    plan: Any = None
    shadow_plans: dict[str, Any] = attrs.field(factory=dict)
    framework = "SGLang"
    words = "sglang"
    variable = ENV_MODE

    # ------------------------------------------------------------------ installation
    def install(self) -> None:
        try:
            import sglang
            from sglang.srt.arg_groups.resolution_hooks import register_resolution_hook
            from sglang.srt.plugins.hook_registry import HookRegistry, HookType
        except (ImportError, AttributeError) as exc:
            raise missing_hook("sglang", "sglang.srt.plugins.hook_registry / resolution_hooks", exc) from exc
        notice = version_notice("sglang", getattr(sglang, "__version__", None), TESTED_VERSIONS)
        if notice is not None:
            self.once.log(notice)
        try:
            register_resolution_hook(RESOLUTION_STEP)(self.resolution_step)
        except ValueError as exc:
            raise missing_hook("sglang", f"the resolution step {RESOLUTION_STEP!r}", exc) from exc
        HookRegistry.register(WIDTH_FUNCTION, self.width_around, HookType.AROUND)

    # ------------------------------------------------------------------ resolution
    def resolution_step(self, server_args: Any, previous: Any) -> None:
        self.refuse_if_mistyped()
        from sglang.srt.arg_groups.overrides import (
            declare_resolution,
            resolved_view,
            resolving_view,
        )

        flags = flags_of(resolving_view(server_args))
        if flags.get("speculative_algorithm") is None:
            previous(server_args)
            return
        if self.mode == "shadow":
            previous(server_args)
            self._compare(server_args, flags, resolved_view(server_args))
            return
        try:
            flags, facts = with_sglang_rules(server_args, flags)
        except Exception:  # noqa: BLE001 - SGLang's own step fails on the same record next;
            facts = {}  # specreg's standalone rules then report it (e.g. SR160), coded
        plan, notices = self.resolve(flags, facts)
        for notice in notices:
            self.once.log(notice)
        values = {_DECLARED[k]: getattr(plan.config, k) for k in _DECLARED}
        declare_resolution(server_args, SOURCE, **values)
        previous(server_args)
        declare_resolution(server_args, SOURCE, **values)  # specreg's values win over later rewrites
        self.plan = plan
        inherited = os.environ.get(ENV_PLAN)
        if inherited is not None and _publisher(inherited) != os.getpid():
            check_fingerprint(plan)  # a child that resolves again still answers to its launcher
        publish_plan(plan)

    def _compare(self, server_args: Any, flags: dict[str, Any], view: Any) -> None:
        try:
            flags, facts = with_sglang_rules(server_args, flags)
            mine = outcome(self.loaded_registry(), flags, facts)
        except Exception as exc:  # noqa: BLE001 - shadow mode never changes what SGLang does
            self.log_failure(flags, exc)
            return
        if mine["error"] is not None:
            self.log_rejection(flags, mine["error"])
            return
        for field, attr in _DECLARED.items():
            self.log_disagreement(attr, getattr(view, attr), mine["values"][field], field)

    # ------------------------------------------------------------------ widths
    def process_plan(self) -> Any:
        """This process's plan: the one its resolution step resolved, else one resolved from the
        arguments SGLang published in this process (a scheduler process), checked against the
        launcher's fingerprint."""
        if self.plan is not None:
            return self.plan
        flags = published_flags()
        if flags.get("speculative_algorithm") is None:
            return None
        plan, _ = self.resolve(*published_rules(flags))
        check_fingerprint(plan, required=True)
        self.plan = plan
        return plan

    def shadow_plan(self) -> Any:
        """Shadow mode: specreg's plan for the published arguments (raises what specreg raises)."""
        flags = published_flags()
        if flags.get("speculative_algorithm") is None:
            return None
        key = json.dumps(flags, sort_keys=True, default=str)
        if key not in self.shadow_plans:
            try:
                self.shadow_plans[key] = self.resolve(*published_rules(flags))[0]
            except Exception as exc:  # noqa: BLE001 - remembered, re-raised on each call
                self.shadow_plans[key] = exc
        found = self.shadow_plans[key]
        if isinstance(found, BaseException):
            raise found
        return found

    def width_around(self, original: Any, *args: Any, **kwargs: Any) -> int:
        self.refuse_if_mistyped()
        if args:
            return original(*args, **kwargs)
        if self.mode == "shadow":
            return self._shadow_width(original, kwargs)
        plan = self.process_plan()
        if plan is None:
            return original(**kwargs)
        override = kwargs.get("num_draft_tokens")
        if override is not None and override != plan.config.num_draft_tokens:
            return original(**kwargs)  # an adaptive candidate's width, not the plan's
        return plan.num_tokens_per_req(kwargs["phase"], bool(kwargs.get("is_draft_worker", False)))

    def _shadow_width(self, original: Any, kwargs: dict[str, Any]) -> int:
        """SGLang's own width, always; specreg's is only compared (and a refusal logged)."""
        theirs = original(**kwargs)
        phase, is_draft = kwargs.get("phase"), bool(kwargs.get("is_draft_worker", False))
        try:
            plan = self.shadow_plan()
            override = kwargs.get("num_draft_tokens")
            if plan is None or (override is not None and override != plan.config.num_draft_tokens):
                return theirs
            ours = plan.num_tokens_per_req(phase, is_draft)
        except Exception as exc:  # noqa: BLE001 - shadow mode never changes what SGLang computes
            self.log_failure(_safe_flags(), exc)
            return theirs
        self.log_disagreement(f"width of {phase} (draft worker: {is_draft})", theirs, ours, "widths")
        return theirs


def published_flags() -> dict[str, Any]:
    """The speculative flags of the ServerArgs SGLang published in this process."""
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.runtime_context import get_context

    return flags_of(resolved_view(get_context().server_args))


def published_rules(flags: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`with_sglang_rules` for the published record. A record SGLang refuses to build a model
    config for keeps specreg's standalone rules (its launcher already passed SGLang's)."""
    from sglang.srt.runtime_context import get_context

    try:
        return with_sglang_rules(get_context().server_args, flags)
    except Exception:  # noqa: BLE001 - see the docstring
        return flags, {}


def _safe_flags() -> dict[str, Any]:
    try:
        return published_flags()
    except Exception:  # noqa: BLE001 - only for the log line
        return {}


def publish_plan(plan: Any) -> None:
    """The launcher's fingerprint, for the child processes it spawns (they inherit the
    environment); the publishing process's id tells its own publication from its parent's."""
    os.environ[ENV_PLAN] = json.dumps(
        {"pid": os.getpid(), "fingerprint": plan.fingerprint()}, sort_keys=True
    )


def _publisher(published: str) -> int | None:
    try:
        found = json.loads(published)
    except ValueError:
        return None
    return found.get("pid") if isinstance(found, dict) else None


def check_fingerprint(plan: Any, *, required: bool = False) -> None:
    """SR165 when the launcher published another plan than this process resolved; SR180 when
    `required` (enforce mode) and no launcher published one."""
    published = os.environ.get(ENV_PLAN)
    mine = plan.fingerprint()
    if published is None:
        if not required:
            return
        raise ConsistencyError(problem(
            "SR180", f"SPECREG_SGLANG=enforce, but no SGLang launcher published a specreg plan "
            f"in {ENV_PLAN} for this process, which resolved {json.dumps(mine, sort_keys=True)}",
            accepted=f"{ENV_PLAN} set by the launcher that spawned this process",
            fix="start SGLang through its launcher with SPECREG_SGLANG=enforce in the launcher's "
            "environment; when building ServerArgs by hand, call sglang.srt.plugins.load_plugins() "
            "before ServerArgs(...)",
        ))
    try:
        theirs = json.loads(published)
        theirs = theirs["fingerprint"] if isinstance(theirs, dict) and "pid" in theirs else theirs
    except ValueError:
        theirs = published
    if theirs != json.loads(json.dumps(mine)):
        raise ConsistencyError(problem(
            "SR165", f"this process resolved {json.dumps(mine, sort_keys=True)}, the launcher "
            f"{published}",
            accepted="the launcher's plan",
            fix="give every SGLang process the same specreg plugins, SPECREG_* variables and flags",
        ))


def load() -> None:
    """SGLang's plugin entry point: does nothing unless SPECREG_SGLANG is enforce or shadow."""
    load_adapter(SGLangAdapter)
