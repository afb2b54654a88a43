"""Installs `tree_verify` in an SGLang process: eagle_sample runs specreg's tree kernels.

`install(plan)` puts `specreg.adapters.sglang_tree_kernels`'s functions in place of SGLang
0.5.23's greedy tree kernel, its target-only tree sampling kernel and the top-k / top-p renorm
before it, and wraps (AROUND) `eagle_sample` so that the sampling kernels see the batch's
min-p and, for the final token's draw on specreg's random stream, its seeds and `seq_lens`
(a seeded request's key is its `sampling_seed`), `_seeded_verify_coins` so that seeded
requests get SGLang's acceptance coins on a CPU too, and the chain kernel
`--speculative-use-rejection-sampling` selects (min-p there as well).

A seam whose value is a function goes through SGLang's `HookRegistry` (which patches the
defining module and every module-level copy); a seam whose value is not a function (`None` on
a CPU for the renorm and tree-sampling names; CUDA's lazy FlashInfer renorm objects) is bound
directly, in the defining module and in every loaded module holding that name bound to the
same object (a hook on a `None` value would rebind every `None` global of every module). Every
seam is then checked: a hook SGLang did not apply, or a seam this SGLang release lacks, raises
SR182 (`substitution_runtime`), never a silent fallback.

`SEAMS` and `AROUND` list the seams with SGLang's dotted names.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import types
from typing import Any

from specreg.adapters import sglang_seeded_coins as seeded_coins
from specreg.adapters import sglang_tree_kernels as kernels
from specreg.adapters.substitution_runtime import require_applied, seam_missing

#: AROUND hooks: the call site whose kernels are substituted (min-p's sampling info, the seeds
#: and seq_lens keying the final draws), and its seeded acceptance coins (SGLang's own stream,
#: computed in torch on a CPU).
AROUND = {
    "sglang.srt.speculative.eagle_utils.eagle_sample": kernels.verify_call,
    "sglang.srt.speculative.eagle_utils._seeded_verify_coins": seeded_coins.seeded_verify_coins,
    "sglang.kernels.ops.speculative.reject_sampling.chain_speculative_sampling_triton":
        kernels.chain_sampling,
}
#: SGLang's kernel name -> specreg's function with its signature.
SEAMS: dict[str, Any] = {
    "sglang.kernels.ops.speculative.spec_tree.verify_tree_greedy_func":
        kernels.verify_tree_greedy,
    "sglang.kernels.ops.speculative.verify_sampling.tree_speculative_sampling_target_only":
        kernels.tree_sampling_target_only,
    "sglang.kernels.ops.sampling.renorm.top_k_renorm_prob": kernels.top_k_renorm_prob,
    "sglang.kernels.ops.sampling.renorm.top_p_renorm_prob": kernels.top_p_renorm_prob,
}
#: Where eagle_sample reads each kernel (its module-level copies; checked after install).
CALL_SITE = "sglang.srt.speculative.eagle_utils"


def install(plan: Any = None) -> None:
    """Apply and check every seam (SR182 on a missing seam or a hook that did not apply).
    `plan` is not needed: every parameter comes from SGLang's own call."""
    del plan
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    call_site = _import(CALL_SITE)
    originals = {target: _resolve(target) for target in (*AROUND, *SEAMS)}
    hooked: dict[str, Any] = {}
    for target, ours in SEAMS.items():
        module_name, name = target.rsplit(".", 1)
        if not inspect.isroutine(originals[target]):  # None, or a lazy import object
            bind_direct(_import(module_name), name, originals[target], ours)
        else:
            HookRegistry.register(target, ours, HookType.REPLACE)
            hooked[target] = ours
    for target, ours in AROUND.items():
        HookRegistry.register(target, ours, HookType.AROUND)
    HookRegistry.apply_hooks()  # idempotent: SGLang's loader calls it again after all plugins
    for target, ours in SEAMS.items():
        module_name, name = target.rsplit(".", 1)
        now = getattr(_import(module_name), name)
        if target in hooked:
            _require_hook(target, now, originals[target], ours)
        else:
            require_applied("sglang", target, now, ours)
        require_applied("sglang", f"{CALL_SITE}.{name}", getattr(call_site, name), now)
    for target, ours in AROUND.items():
        _require_hook(target, _resolve(target), originals[target], ours)


def bind_direct(module: types.ModuleType, name: str, original: Any, ours: Any) -> int:
    """Bind `name` to `ours` in `module` and in every loaded module where `name` holds
    `original` (its `from module import name` copies; only that name, so a `None` elsewhere is
    left alone); returns how many modules were rebound."""
    count = 0
    for other in [module, *[m for m in list(sys.modules.values()) if m is not module]]:
        if (isinstance(other, types.ModuleType) and name in vars(other)
                and vars(other)[name] is original):
            setattr(other, name, ours)
            count += 1
    return count


def _require_hook(target: str, now: Any, original: Any, ours: Any) -> None:
    """SR182 unless `target` is SGLang's wrapper of `original` calling `ours`, and no loaded
    module still holds `original` under any name."""
    cells = [c.cell_contents for c in getattr(now, "__closure__", None) or ()]
    if getattr(now, "__wrapped__", None) is not original or not any(c is ours for c in cells):
        require_applied("sglang", target, now, ours)  # raises: `now` is not specreg's
    for module in list(sys.modules.values()):
        if not isinstance(module, types.ModuleType):
            continue
        stale = [k for k, v in list(vars(module).items()) if v is original]
        if stale:
            require_applied("sglang", f"{module.__name__}.{stale[0]}", original, now)


def _import(module_name: str) -> types.ModuleType:
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure means the seam is missing
        raise seam_missing("sglang", module_name, exc) from exc


def _resolve(target: str) -> Any:
    try:
        return pkgutil.resolve_name(target)
    except (ImportError, AttributeError, ValueError) as exc:
        raise seam_missing("sglang", target, exc) from exc
