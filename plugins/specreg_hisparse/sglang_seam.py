"""HiSparse's SGLang seam (`hisparse_swap`): SGLang's swap manager, run by this plugin's swapper.

SGLang's `HiSparseSpecSwapManager` (``sglang.srt.managers.hisparse_coordinator``) owns the
speculative swap: its coordinator builds it, the DSA backend's ``swap_in_selected_pages`` ->
``_run_swap_in_kernel`` calls ``swap_in``, EAGLE's verify calls ``prepare_verify`` and
``commit_accept_tokens`` (through the coordinator). Its CUDA kernel takes 2-4 draft tokens and
top_k >= 1024. `install` registers, through SGLang's ``HookRegistry`` (REPLACE), a subclass of
it whose swap is `specreg_hisparse.swapper.HiSparseSwapper`, any number of draft tokens:

- SGLang's coordinator tables stay the truth the rest of SGLang reads: hot slot ``j`` of a
  request holds token ``req_device_buffer_tokens[layer, r, j]`` in device row
  ``req_device_buffer_token_locs[layer, r, j]``; the extra page (columns
  ``device_buffer_size..``) holds the newest token and the verify tokens; host rows come from
  ``req_to_host_pool`` (shared with the swapper, not copied).
- The swapper's hot-slot state is read from those tables when SGLang writes them (a request's
  buffer bound in ``reset``, emptied in ``invalidate_cache``, accepted tokens moved in by
  ``commit_accept_tokens``) and written back after every swap, so SGLang's tables say where
  every admitted token lives. The extra page is read once per verify (after
  ``prepare_verify``) and becomes specreg's tail: token ``t`` in tail slot ``t % page_size``.
- Device rows never rotate (specreg's slots keep their rows), so every layer keeps the rows
  SGLang allocated, and a shared-index layer replays the anchor's miss plan at the same rows.
- ``prepare_verify`` and ``commit_accept_tokens`` run SGLang's own code (then note what it
  changed); the scratch bookkeeping and ``output_locs`` are SGLang's, inherited unchanged.

The plugin registers `SUBSTITUTION` through `specreg_register_substitutions`; specreg's SGLang
adapter calls `install` inside an SGLang process whose ``SPECREG_SGLANG_SUBSTITUTE`` names it.
Importing this module imports neither torch nor SGLang (the manager class is built at install).
"""

from __future__ import annotations

import importlib
import sys
import weakref
from typing import Any

from specreg.contract.substitutions import Substitution
from specreg.errors import ConfigError
from specreg.framework_args.rules import hisparse_swap_limits

NAME = "hisparse_swap"
MODULE = "sglang.srt.managers.hisparse_coordinator"
SEAM = f"{MODULE}.HiSparseSpecSwapManager"
#: The SGLang attributes the substitution relies on: the manager's interface and its callers.
MANAGER_INTERFACE = (
    "reset", "invalidate_cache", "prepare_verify", "swap_in", "commit_accept_tokens",
    "output_locs", "allocate_scratch", "free_unrotated_scratch", "clear_scratch",
    "extend_owned_locs", "miss_plan_capacity",
)  # fmt: skip
CALLERS = (
    f"{MODULE}.HiSparseCoordinator._run_swap_in_kernel",
    f"{MODULE}.HiSparseCoordinator.swap_in_selected_pages",
    f"{MODULE}.HiSparseCoordinator.prepare_spec_verify",
    f"{MODULE}.HiSparseCoordinator.commit_spec_accept_tokens",
)


# ------------------------------------------------------------------------------ the manager
def manager_class(original: type) -> type:
    """The replacement of SGLang's manager class `original` (a subclass, so every attribute
    SGLang's callers read is there)."""
    import torch

    from specreg_hisparse.sizes import HiSparseLayout
    from specreg_hisparse.swapper import HiSparseSwapper

    module = importlib.import_module(MODULE)

    class SpecregHiSparseSpecSwapManager(original):  # type: ignore[misc, valid-type]
        """SGLang's HiSparse speculative swap state and lifecycle, swapped by specreg's
        `HiSparseSwapper` for any number of draft tokens (see the module docstring)."""

        specreg_substitution = NAME

        def __init__(self, coordinator: Any, *, num_draft_tokens: int) -> None:
            self._coordinator = weakref.proxy(coordinator)
            self.enabled = num_draft_tokens > 0
            self.num_draft_tokens = num_draft_tokens
            self.scratch_capacity = 0
            self._scratch_reqs: set[int] = set()
            layer_num = coordinator.mem_pool_device.layer_num
            slots = coordinator.req_to_token_pool.req_to_token.shape[0]
            device = coordinator.device
            self.req_to_scratch = torch.empty((layer_num, slots, 0), dtype=torch.int32, device=device)
            self.states: tuple[Any, ...] = ()
            self.top_k_device_locs = None
            self.swapper = None
            self._epoch = 0  # bumped whenever SGLang may have rewritten a request's tables
            self._tail_key: tuple[Any, ...] | None = None
            if not self.enabled:
                return
            # SGLang's refusals that are about the cache kind, not the step count, stay its own
            if getattr(module, "_is_xpu", False):
                raise ValueError("HiSparse speculative swap is unsupported on XPU.")
            if coordinator.is_dsv4_hisparse:
                raise ValueError("HiSparse spec swap currently supports DSA caches only.")
            top_k, hot = coordinator.top_k, coordinator.device_buffer_size
            page = coordinator.padded_buffer_size - hot
            found = hisparse_swap_limits(top_k, hot, page, num_draft_tokens)
            if found:
                raise ConfigError(found)
            # scratch serves one call's misses beyond the hot buffer; SGLang's allocator hands
            # it out in whole pages
            need = max(0, num_draft_tokens * top_k - hot)
            self.scratch_capacity = -(-need // page) * page
            host = coordinator.mem_pool_host.kv_buffer[0]
            device_buffer = coordinator.mem_pool_device.kv_buffer[0]
            host_locs = coordinator.req_to_host_pool
            self.layout = HiSparseLayout(
                top_k=top_k, hot_size=hot, page_size=page, scratch_rows=self.scratch_capacity,
                req_slots=slots, max_steps=num_draft_tokens,
                row_bytes=host.stride(0) * host.element_size(), max_seq_len=host_locs.shape[1],
                host_rows=host.shape[0], device_rows=device_buffer.shape[0], layers=layer_num,
                device=str(device),
            )  # fmt: skip
            self.swapper = HiSparseSwapper(self.layout, device, host_cache_locs=host_locs)
            self.req_to_scratch = torch.zeros(
                (layer_num, slots, self.scratch_capacity), dtype=torch.int32, device=device
            )
            self.top_k_device_locs = torch.full(
                (slots, num_draft_tokens, top_k), -1, dtype=torch.int32, device=device
            )

        # -------------------------------------------------------------- request lifecycle
        def invalidate_cache(self, req_pool_idx: int) -> None:
            self._epoch += 1
            if self.enabled:
                self._read_hot(slice(req_pool_idx, req_pool_idx + 1))
                self.swapper.state.slot_stamp[:, req_pool_idx] = -1

        def reset(self, req_pool_idx: int) -> None:
            """A request took slot `req_pool_idx` (its device buffer and scratch are
            allocated): its slots' rows, hot tokens and LRU state start afresh."""
            self._epoch += 1
            if not self.enabled:
                return
            lay, state, coordinator = self.layout, self.swapper.state, self._coordinator
            hot, page = lay.hot_size, lay.page_size
            state.slot_rows[req_pool_idx, : hot + page] = coordinator.req_device_buffer_token_locs[
                0, req_pool_idx, : hot + page
            ]
            state.slot_rows[req_pool_idx, lay.scratch_start :] = self.req_to_scratch[0, req_pool_idx]
            state.slot_stamp[:, req_pool_idx] = -1
            state.clock[:, req_pool_idx] = 0
            state.tail_tokens[req_pool_idx] = -1
            self._read_hot(slice(req_pool_idx, req_pool_idx + 1))

        def allocate_scratch(self, req_pool_idx: int) -> None:
            self._epoch += 1
            if self.enabled and self.scratch_capacity == 0:  # nothing to allocate: steps x
                self._scratch_reqs.add(req_pool_idx)  # top_k fit the hot buffer
                return
            super().allocate_scratch(req_pool_idx)

        def clear_scratch(self, req_pool_idx: int) -> None:
            self._epoch += 1
            super().clear_scratch(req_pool_idx)

        def prepare_verify(self, batch: Any) -> None:
            """SGLang's own (binds the verify tokens to the extra page); the tail is re-read at
            the next swap."""
            super().prepare_verify(batch)
            self._epoch += 1

        def commit_accept_tokens(self, batch: Any, accept_indices: torch.Tensor) -> None:
            """SGLang's own (moves accepted KV into the buffer, backs it up to host), then its
            writes to the hot slots into the swapper's state."""
            super().commit_accept_tokens(batch, accept_indices)
            self._epoch += 1
            if self.enabled and not batch.forward_mode.is_idle():
                self._read_hot(batch.req_pool_indices.long())

        # -------------------------------------------------------------------- the swap
        def swap_in(
            self,
            req_pool_indices: torch.Tensor,
            compressed_seq_lens: torch.Tensor,
            top_k_result: torch.Tensor,
            layer_id: int,
            **plan: Any,
        ) -> torch.Tensor:
            if not self.enabled:
                raise RuntimeError("HiSparse spec swap is not initialized.")
            num_reqs = req_pool_indices.size(0)
            num_steps, num_top_k = top_k_result.shape[1:]
            if num_steps != self.num_draft_tokens:
                raise ValueError(
                    f"HiSparse spec step mismatch: expected {self.num_draft_tokens}, "
                    f"got {num_steps}."
                )
            coordinator = self._coordinator
            rows = req_pool_indices.long()
            # once per verify (every layer's page is alike), without reading the device: a
            # verify's layers get the same index tensor, and each verify bumps the epoch
            key = (self._epoch, req_pool_indices.data_ptr(), rows.numel())
            if key != self._tail_key:
                self._read_extra_page(rows, layer_id)
                self._tail_key = key
            out = self.top_k_device_locs[:num_reqs, :num_steps, :num_top_k]
            direct = out.is_contiguous()  # the full top_k: written in place, no copy
            locs = self.swapper.swap(
                top_k_result, req_pool_indices, compressed_seq_lens, coordinator.num_real_reqs,
                layer=layer_id, host_cache=coordinator.mem_pool_host.kv_buffer[layer_id],
                device_buffer=coordinator.mem_pool_device.kv_buffer[layer_id],
                record_plan=bool(plan), out=out if direct else None, **plan,
            )  # fmt: skip
            self._write_hot(rows, layer_id)
            if not direct:
                out.copy_(locs)
            return out

        def _read_hot(self, rows: Any, layer: int | None = None) -> None:
            """The hot tokens of `rows` (all layers, or `layer`) from SGLang's table."""
            hot = self.layout.hot_size
            table = self._coordinator.req_device_buffer_tokens
            slot_tokens = self.swapper.state.slot_tokens
            if layer is None:
                slot_tokens[:, rows] = table[:, rows, :hot]
            else:
                slot_tokens[layer, rows] = table[layer, rows, :hot]

        def _write_hot(self, rows: torch.Tensor, layer: int) -> None:
            """The hot tokens of `rows` back into SGLang's table (whole rows, no host sync;
            a repeated padding row writes its slot's unchanged tokens)."""
            table = self._coordinator.req_device_buffer_tokens[layer]
            full = table.index_select(0, rows)
            full[:, : self.layout.hot_size] = self.swapper.state.slot_tokens[layer].index_select(
                0, rows
            )
            table.index_copy_(0, rows, full)

        def _read_extra_page(self, rows: torch.Tensor, layer: int) -> None:
            """SGLang's extra page of `rows` as specreg's tail: token t -> tail slot t % page,
            with the device row SGLang bound it to."""
            lay, state, coordinator = self.layout, self.swapper.state, self._coordinator
            hot, page = lay.hot_size, lay.page_size
            tokens = coordinator.req_device_buffer_tokens[layer, rows, hot : hot + page]
            locs = coordinator.req_device_buffer_token_locs[layer, rows, hot : hot + page]
            valid = (tokens >= 0) & (locs >= 0)
            slot = torch.where(valid, tokens.remainder(page), page).long()  # column `page`: junk
            tail = torch.full((rows.numel(), page + 1), -1, dtype=torch.int32, device=tokens.device)
            tail_rows = torch.cat([state.slot_rows[rows, hot : hot + page], tail[:, :1]], 1)
            tail.scatter_(1, slot, tokens.int())
            tail_rows.scatter_(1, slot, locs.int())
            state.tail_tokens[rows] = tail[:, :page]
            state.slot_rows[rows, hot : hot + page] = tail_rows[:, :page]

    SpecregHiSparseSpecSwapManager.__module__ = __name__
    SpecregHiSparseSpecSwapManager.__qualname__ = "SpecregHiSparseSpecSwapManager"
    return SpecregHiSparseSpecSwapManager


# ------------------------------------------------------------------------------ installing
def install(plan: Any) -> None:
    """Replace SGLang's HiSparse speculative swap manager with specreg's (REPLACE through
    SGLang's HookRegistry), then check that the coordinator module now builds ours: SR182
    names the seam that is missing or was not replaced. `plan` is unused: the manager takes its
    sizes from SGLang's own arguments when the coordinator builds it. Idempotent."""
    del plan
    from specreg.adapters.substitution_runtime import require_applied, seam_missing

    try:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType
    except ImportError as exc:
        raise seam_missing("sglang", "sglang.srt.plugins.hook_registry.HookRegistry", exc) from exc
    try:
        module = importlib.import_module(MODULE)
    except ImportError as exc:
        raise seam_missing("sglang", MODULE, exc) from exc
    original = getattr(module, "HiSparseSpecSwapManager", None)
    if getattr(original, "specreg_substitution", None) == NAME:
        return
    if not isinstance(original, type):
        raise seam_missing("sglang", SEAM)
    for name in MANAGER_INTERFACE:
        if not hasattr(original, name):
            raise seam_missing("sglang", f"{SEAM}.{name}")
    coordinator = getattr(module, "HiSparseCoordinator", None)
    for caller in CALLERS:
        if not hasattr(coordinator, caller.rsplit(".", 1)[1]):
            raise seam_missing("sglang", caller)
    replacement = manager_class(original)
    HookRegistry.register(SEAM, replacement, HookType.REPLACE)
    HookRegistry.apply_hooks()  # idempotent; SGLang's loader calls it again after all plugins
    require_applied("sglang", SEAM, getattr(module, "HiSparseSpecSwapManager", None), replacement)


def installed() -> bool:
    """Whether this process's SGLang builds specreg's manager (reads the module, imports nothing)."""
    module = sys.modules.get(MODULE)
    manager = getattr(module, "HiSparseSpecSwapManager", None)
    return getattr(manager, "specreg_substitution", None) == NAME


#: What the plugin registers (`specreg_register_substitutions`).
SUBSTITUTION = Substitution(
    NAME, "sglang",
    "SGLang's HiSparseSpecSwapManager runs specreg's swapper: any number of draft tokens "
    "instead of 2-4, and no top_k limit",
    install,
)
