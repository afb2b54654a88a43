"""The SGLang adapter: resolves SGLang's speculative flags with specreg inside SGLang's own pipeline.

Loaded by SGLang's plugin loader (entry-point group `sglang.srt.plugins`) in the launcher and in
every scheduler and worker process. Off unless SPECREG_SGLANG is set:

- `enforce`: specreg resolves the speculative flags before SGLang's speculative step runs (so
  before any weights load); a bad config is specreg's coded `ValueError`. SGLang's width function
  (`resolve_num_tokens_per_req`) answers from the plan. The launcher publishes the plan's
  fingerprint in SPECREG_SGLANG_PLAN; each child process resolves its own plan from the arguments
  it received and raises SR165 if the fingerprints differ.
- `shadow`: SGLang decides; specreg resolves the same flags and logs each disagreement once (SR166).
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
    resolve_for_framework,
    version_notice,
)
from specreg.errors import ConsistencyError, problem
from specreg.framework_args.flags import SGLANG_FIELDS

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
    """The speculative flags on a ServerArgs view, as `config_from_flags` reads them."""
    return {name: getattr(view, name) for name in SGLANG_FIELDS if getattr(view, name, None) is not None}


@attrs.define
class SGLangAdapter(FrameworkAdapter):
    """One SGLang process's adapter; `plan` is the plan it resolved (None before)."""

    plan: Any = None
    framework = "SGLang"
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
            self._compare(flags, resolved_view(server_args))
            return
        plan, notices = resolve_for_framework(self.loaded_registry(), flags)
        for notice in notices:
            self.once.log(notice)
        values = {_DECLARED[k]: getattr(plan.config, k) for k in _DECLARED}
        declare_resolution(server_args, SOURCE, **values)
        previous(server_args)
        declare_resolution(server_args, SOURCE, **values)  # specreg's values win over later rewrites
        self.plan = plan
        os.environ[ENV_PLAN] = json.dumps(plan.fingerprint(), sort_keys=True)

    def _compare(self, flags: dict[str, Any], view: Any) -> None:
        mine = outcome(self.loaded_registry(), flags)
        if mine["error"] is not None:
            self.log_rejection(flags, mine["error"])
            return
        for field, attr in _DECLARED.items():
            self.log_disagreement(attr, getattr(view, attr), mine["values"][field], field)

    # ------------------------------------------------------------------ widths
    def process_plan(self) -> Any:
        """This process's plan: the launcher's, or one resolved from the published arguments."""
        if self.plan is not None:
            return self.plan
        from sglang.srt.arg_groups.overrides import resolved_view
        from sglang.srt.runtime_context import get_context

        flags = flags_of(resolved_view(get_context().server_args))
        if flags.get("speculative_algorithm") is None:
            return None
        plan, _ = resolve_for_framework(self.loaded_registry(), flags)
        check_fingerprint(plan)
        self.plan = plan
        return plan

    def width_around(self, original: Any, *args: Any, **kwargs: Any) -> int:
        plan = self.process_plan()
        if plan is None or args:
            return original(*args, **kwargs)
        phase, is_draft = kwargs["phase"], bool(kwargs.get("is_draft_worker", False))
        override = kwargs.get("num_draft_tokens")
        if override is not None and override != plan.config.num_draft_tokens:
            return original(*args, **kwargs)  # an adaptive candidate's width, not the plan's
        ours = plan.num_tokens_per_req(phase, is_draft)
        if self.mode == "enforce":
            return ours
        theirs = original(*args, **kwargs)
        self.log_disagreement(f"width of {phase} (draft worker: {is_draft})", theirs, ours, "widths")
        return theirs


def check_fingerprint(plan: Any) -> None:
    """SR165 when the launcher published another plan than this process resolved."""
    published = os.environ.get(ENV_PLAN)
    if published is None:
        return
    mine = json.dumps(plan.fingerprint(), sort_keys=True)
    if json.loads(published) != json.loads(mine):
        raise ConsistencyError(problem(
            "SR165", f"this process resolved {mine}, the launcher {published}",
            accepted="the launcher's plan",
            fix="give every SGLang process the same specreg plugins, SPECREG_* variables and flags",
        ))


def load() -> None:
    """SGLang's plugin entry point: does nothing unless SPECREG_SGLANG is enforce or shadow."""
    load_adapter(SGLangAdapter)
