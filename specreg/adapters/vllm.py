"""The vLLM adapter: validates vLLM's speculative config with specreg when vLLM builds it.

Loaded by vLLM's plugin loader (entry-point group `vllm.general_plugins`) in every process, from
`EngineArgs.__post_init__`. Off unless SPECREG_VLLM is set:

- `enforce`: `EngineArgs.create_speculative_config` first resolves `method`,
  `num_speculative_tokens` and `model` with specreg (a bad config is specreg's coded
  `ValueError`) and fills `num_speculative_tokens` from `plan.gamma` when it is unset; vLLM then
  builds its `SpeculativeConfig` from the filled dict.
- `shadow`: vLLM decides; specreg logs each disagreement once (SR166).

Messages name vLLM's keys (`num_speculative_tokens`, `model`, `method`), not SGLang's flags.
A mistyped SPECREG_VLLM (SR176) stops vLLM's plugin loader, hence `EngineArgs`; the adapter is
installed first with the error, so a later `EngineArgs` in the same process (whose loader does
not run the plugins twice) raises it again from `create_speculative_config`.

Methods specreg has no algorithm for (and `custom_class`, whose proposer is
`specreg.adapters.vllm_proposers`) pass through untouched.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs

from specreg.adapters.common import (
    FrameworkAdapter,
    load_adapter,
    missing_hook,
    outcome,
    version_notice,
)
from specreg.contract.framework_flags import VLLM_FIELDS
from specreg.framework_args.rules import VLLM_METHODS

ENV_MODE = "SPECREG_VLLM"
TESTED_VERSIONS = ("0.33.0",)
HOOK = "vllm.engine.arg_utils.EngineArgs.create_speculative_config"


@attrs.define
class VLLMAdapter(FrameworkAdapter):
    """One vLLM process's adapter."""

    framework = "vLLM"
    words = "vllm"
    variable = ENV_MODE

    def owns(self, spec: Any) -> bool:
        """Whether specreg has an algorithm for the dict's method."""
        if not isinstance(spec, dict) or not isinstance(spec.get("method"), str):
            return False
        method = spec["method"].strip().lower()
        names = {a.name for a in self.loaded_registry().algorithms()}
        names |= {alias for a in self.loaded_registry().algorithms() for alias in a.aliases}
        return VLLM_METHODS.get(method, method) in names

    def install(self) -> None:
        try:
            import vllm
            from vllm.engine.arg_utils import EngineArgs

            original = EngineArgs.create_speculative_config
        except (ImportError, AttributeError) as exc:
            raise missing_hook("vllm", HOOK, exc) from exc
        notice = version_notice("vllm", getattr(vllm, "__version__", None), TESTED_VERSIONS)
        if notice is not None:
            self.once.log(notice)
        if getattr(original, "__specreg_adapter__", False):
            return  # loaded twice in one process
        adapter = self

        @functools.wraps(original)
        def create_speculative_config(engine_args: Any, *args: Any, **kwargs: Any) -> Any:
            return adapter.create(original, engine_args, *args, **kwargs)

        create_speculative_config.__specreg_adapter__ = True  # type: ignore[attr-defined]
        EngineArgs.create_speculative_config = create_speculative_config

    def create(self, original: Any, engine_args: Any, *args: Any, **kwargs: Any) -> Any:
        self.refuse_if_mistyped()
        spec = engine_args.speculative_config
        if not self.owns(spec):
            return original(engine_args, *args, **kwargs)
        data = {k.replace("-", "_"): v for k, v in spec.items()}
        data = {k: v for k, v in data.items() if k in VLLM_FIELDS and v is not None}
        data["filter_order"] = "vllm"  # vLLM's sampler order (specreg.contract.filter_order)
        if self.mode == "shadow":
            result = original(engine_args, *args, **kwargs)
            try:
                self._compare(data, result)
            except Exception as exc:  # noqa: BLE001 - shadow mode never changes what vLLM does
                self.log_failure(data, exc)
            return result
        plan, notices = self.resolve(data)
        for notice in notices:
            self.once.log(notice)
        if spec.get("num_speculative_tokens") is None:
            engine_args.speculative_config = {**spec, "num_speculative_tokens": plan.gamma}
        return original(engine_args, *args, **kwargs)

    def _compare(self, data: dict[str, Any], result: Any) -> None:
        mine = outcome(self.loaded_registry(), data)
        if mine["error"] is not None:
            self.log_rejection(data, mine["error"])
        elif result is not None:
            self.log_disagreement("num_speculative_tokens", result.num_speculative_tokens,
                                  mine["gamma"], "num_speculative_tokens")


def load() -> None:
    """vLLM's plugin entry point: does nothing unless SPECREG_VLLM is enforce or shadow."""
    load_adapter(VLLMAdapter)
