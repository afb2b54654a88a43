"""What a HiSparse config implies: the buffer layout, the rules its sizes obey, its buffers' bytes.

Per request slot the device buffer has ``buffer_size = hot_size + page_size + scratch_rows``
slots, in this order:

- ``[0, hot_size)``: the hot buffer, managed by the LRU policy;
- ``[hot_size, hot_size + page_size)``: the tail page, holding the newest tokens (token at
  position ``p`` lives in tail slot ``p % page_size``) — no policy, no IO;
- ``[hot_size + page_size, buffer_size)``: scratch, serving the misses of one call that do not
  fit the hot buffer; they are valid for that call only.

Every slot maps to a fixed physical device row (``slot_rows``, default ``slot * buffer_size + j``).
`hisparse_buffers` states the bytes every buffer of a layout takes (the plan's memory contract).
This module imports neither torch nor triton.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import attrs

from specreg.errors import Problem, problem
from specreg.integers import is_int
from specreg.contract.memory import Buffer

MAX_HOT_SIZE = 1 << 20  # slot indices are packed into 20 bits of the sort keys
POLICIES = ("lru",)
DEFAULT_OPTIONS: Mapping[str, Any] = {
    "top_k": 2048,
    "hot_size": 4096,
    "page_size": None,  # tail slots; None -> tokens_per_step (= max_steps)
    "req_slots": 64,
    "max_steps": None,  # None -> the plan's target_verify width
    "tokens_per_step": None,  # new tokens written per step; None -> max_steps
    "scratch_rows": None,  # None -> max(0, max_steps * top_k - hot_size)
    "row_bytes": 656,  # bytes of one KV row (DeepSeek-V3.2 MLA: 656)
    "max_seq_len": 32768,
    "host_rows": None,  # None -> req_slots * max_seq_len
    "device_rows": None,  # None -> req_slots * buffer_size
    "layers": 1,  # anchor layers with their own top-k selection (own policy state)
    "policy": "lru",
    "device": "cpu",  # where the swapper keeps its state ("cuda" in a server)
}
_INT_OPTIONS = (
    "top_k",
    "hot_size",
    "page_size",
    "req_slots",
    "max_steps",
    "tokens_per_step",
    "scratch_rows",
    "row_bytes",
    "max_seq_len",
    "host_rows",
    "device_rows",
    "layers",
)
_FLAG = "--kv-cache-option"


@attrs.frozen(kw_only=True)
class HiSparseLayout:
    """Validated sizes of one HiSparse cache (see the module docstring for the slot order)."""

    top_k: int
    hot_size: int
    page_size: int
    scratch_rows: int
    req_slots: int
    max_steps: int
    row_bytes: int
    max_seq_len: int
    host_rows: int
    device_rows: int
    layers: int = 1
    policy: str = "lru"
    device: str = "cpu"

    @property
    def buffer_size(self) -> int:
        """Slots per request: hot + tail page + scratch."""
        return self.hot_size + self.page_size + self.scratch_rows

    @property
    def capacity(self) -> int:
        """Distinct misses one call can hold valid at once: hot buffer plus scratch."""
        return self.hot_size + self.scratch_rows

    @property
    def tail_start(self) -> int:
        return self.hot_size

    @property
    def scratch_start(self) -> int:
        return self.hot_size + self.page_size

    def plan_capacity(self, steps: int | None = None, top_k: int | None = None) -> int:
        """Columns a miss plan needs for a call of `steps` x `top_k` (defaults: the maxima)."""
        return (steps or self.max_steps) * (top_k or self.top_k)


#: Upper bound of req_slots x max_seq_len: the swapper's host-location map is int64 per position.
MAX_LOCATION_ENTRIES = 2**28


def _as_int(name: str, value: Any) -> tuple[int | None, Problem | None]:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = int(value.strip())
    if not is_int(value) or value <= 0:
        shown = "bool" if isinstance(value, bool) else value
        return None, problem(
            "SR404",
            f"HiSparse option {name}={shown!r} is not a positive integer",
            accepted="an integer >= 1, or unset for the default",
            fix=f"pass e.g. {_FLAG} {name}=N with N >= 1",
            field=f"cache_options.{name}",
        )
    return value, None


def options_with_defaults(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The defaults overlaid with the user's options (unknown keys are kept for the caller)."""
    merged = dict(DEFAULT_OPTIONS)
    merged.update({k: v for k, v in (options or {}).items() if v is not None})
    return merged


def compute_layout(
    top_k: int,
    hot_size: int,
    page_size: int | None,
    req_slots: int,
    max_steps: int,
    *,
    tokens_per_step: int | None = None,
    scratch_rows: int | None = None,
    row_bytes: int = 656,
    max_seq_len: int = 32768,
    host_rows: int | None = None,
    device_rows: int | None = None,
    layers: int = 1,
    policy: str = "lru",
    device: str = "cpu",
) -> tuple[HiSparseLayout | None, list[Problem]]:
    """Derive and validate a layout. Returns ``(layout, [])`` or ``(None, problems)``.

    Rules (each violation is one coded problem with its fix):

    - every size is a positive integer, ``hot_size <= 2**20`` (SR404);
    - ``hot_size >= top_k`` (SR401);
    - ``page_size >= tokens_per_step`` (default ``max_steps``): the tail holds every token
      written in one step (SR402);
    - ``max_steps * top_k <= hot_size + scratch_rows`` (SR403; automatic scratch always fits);
    - ``device_rows >= req_slots * buffer_size`` and ``< 2**31`` (SR405);
    - ``req_slots * max_seq_len <= MAX_LOCATION_ENTRIES`` (SR404);
    - ``policy == "lru"`` (SR406).
    """
    problems: list[Problem] = []
    values: dict[str, int | None] = {}
    given = {
        "top_k": top_k,
        "hot_size": hot_size,
        "page_size": page_size,
        "req_slots": req_slots,
        "max_steps": max_steps,
        "tokens_per_step": tokens_per_step,
        "scratch_rows": scratch_rows,
        "row_bytes": row_bytes,
        "max_seq_len": max_seq_len,
        "host_rows": host_rows,
        "device_rows": device_rows,
        "layers": layers,
    }
    optional = {"page_size", "tokens_per_step", "scratch_rows", "host_rows", "device_rows"}
    for name, value in given.items():
        if value is None and name in optional:
            values[name] = None
            continue
        if name == "scratch_rows" and value in (0, "0"):
            values[name] = 0
            continue
        number, prob = _as_int(name, value)
        values[name] = number
        if prob is not None:
            problems.append(prob)
    hot = values["hot_size"]
    if hot is not None and hot > MAX_HOT_SIZE:
        problems.append(
            problem(
                "SR404",
                f"hot_size={hot} exceeds the supported maximum {MAX_HOT_SIZE}",
                accepted=f"hot_size in [top_k, {MAX_HOT_SIZE}]",
                fix=f"lower {_FLAG} hot_size",
                field="cache_options.hot_size",
            )
        )
    if str(policy).strip().lower() not in POLICIES:
        problems.append(
            problem(
                "SR406",
                f"unknown HiSparse replacement policy {policy!r}",
                accepted=", ".join(POLICIES),
                fix=f"pass {_FLAG} policy=lru or leave it unset",
                field="cache_options.policy",
            )
        )
    k, steps = values["top_k"], values["max_steps"]
    if hot is not None and k is not None and hot < k:
        problems.append(
            problem(
                "SR401",
                f"hot_size ({hot}) must be >= top_k ({k}): every selected token of one step must "
                "be resident at once",
                accepted=f"hot_size >= {k}",
                fix=f"raise {_FLAG} hot_size={_next_pow2(k)} (or lower top_k)",
                field="cache_options.hot_size",
            )
        )
    per_step = values["tokens_per_step"] if values["tokens_per_step"] is not None else steps
    page = values["page_size"] if values["page_size"] is not None else per_step
    if page is not None and per_step is not None and page < per_step:
        problems.append(
            problem(
                "SR402",
                f"page_size ({page}) holds fewer tail slots than the {per_step} tokens written "
                "per step",
                accepted=f"page_size >= {per_step}",
                fix=f"raise {_FLAG} page_size={per_step}, or leave page_size unset",
                field="cache_options.page_size",
            )
        )
    scratch = values["scratch_rows"]
    if scratch is None and None not in (steps, k, hot):
        scratch = max(0, steps * k - hot)  # type: ignore[operator]
    if None not in (steps, k, hot, scratch) and steps * k > hot + scratch:  # type: ignore[operator]
        need = steps * k - hot  # type: ignore[operator]
        problems.append(
            problem(
                "SR403",
                f"one call may miss max_steps x top_k = {steps} x {k} = {steps * k} distinct "  # type: ignore[operator]
                f"tokens, but hot_size + scratch_rows = {hot} + {scratch} = {hot + scratch}",  # type: ignore[operator]
                accepted=f"scratch_rows >= {need}",
                fix=f"leave scratch_rows unset (sized automatically) or set {_FLAG} "
                f"scratch_rows={need}",
                field="cache_options.scratch_rows",
            )
        )
    slots = values["req_slots"]
    seq_len = values["max_seq_len"]
    if slots is not None and seq_len is not None and slots * seq_len > MAX_LOCATION_ENTRIES:
        problems.append(
            problem(
                "SR404",
                f"req_slots x max_seq_len = {slots} x {seq_len} = {slots * seq_len} host "
                f"locations exceeds the supported {MAX_LOCATION_ENTRIES} (the swapper keeps one "
                "int64 per position)",
                accepted=f"req_slots x max_seq_len <= {MAX_LOCATION_ENTRIES}",
                fix=f"lower {_FLAG} req_slots or max_seq_len",
                field="cache_options.max_seq_len",
            )
        )
    if problems or None in (slots, hot, page, scratch, steps, k):
        return None, problems
    assert slots is not None and hot is not None and page is not None and scratch is not None
    buffer_size = hot + page + scratch
    dev_rows = values["device_rows"] if values["device_rows"] is not None else slots * buffer_size
    if dev_rows >= 2**31:
        problems.append(
            problem(
                "SR405",
                f"device_rows={dev_rows} does not fit the int32 device locations a swap returns",
                accepted="device_rows < 2**31",
                fix="lower req_slots / hot_size / max_steps x top_k",
                field="cache_options.device_rows",
            )
        )
        return None, problems
    if dev_rows < slots * buffer_size:
        problems.append(
            problem(
                "SR405",
                f"device_rows={dev_rows} is below req_slots x buffer_size = {slots} x "
                f"{buffer_size} = {slots * buffer_size}",
                accepted=f"device_rows >= {slots * buffer_size}",
                fix="leave device_rows unset, or lower req_slots / hot_size",
                field="cache_options.device_rows",
            )
        )
        return None, problems
    seq = values["max_seq_len"]
    assert seq is not None
    layout = HiSparseLayout(
        top_k=k,  # type: ignore[arg-type]
        hot_size=hot,
        page_size=page,
        scratch_rows=scratch,
        req_slots=slots,
        max_steps=steps,  # type: ignore[arg-type]
        row_bytes=values["row_bytes"],  # type: ignore[arg-type]
        max_seq_len=seq,
        host_rows=values["host_rows"] if values["host_rows"] is not None else slots * seq,
        device_rows=dev_rows,
        layers=values["layers"],  # type: ignore[arg-type]
        policy=str(policy).strip().lower(),
        device=str(device),
    )
    return layout, []


def layout_from_options(
    options: Mapping[str, Any] | None, verify_width: int | None
) -> tuple[HiSparseLayout | None, list[Problem]]:
    """A layout from cache options, `max_steps` defaulting to the plan's verify width.

    Also reports SR400 when an explicit `max_steps` is below the verify width.
    """
    opts = options_with_defaults(options)
    problems: list[Problem] = []
    max_steps = opts.get("max_steps")
    if max_steps is None:
        max_steps = verify_width if verify_width else 1
    else:
        number, prob = _as_int("max_steps", max_steps)
        if prob is not None:
            return None, [prob]
        max_steps = number
        if verify_width is not None and number is not None and number < verify_width:
            problems.append(steps_problem(verify_width, number))
    layout, found = compute_layout(
        opts["top_k"],
        opts["hot_size"],
        opts.get("page_size"),
        opts["req_slots"],
        max_steps,
        tokens_per_step=opts.get("tokens_per_step"),
        scratch_rows=opts.get("scratch_rows"),
        row_bytes=opts["row_bytes"],
        max_seq_len=opts["max_seq_len"],
        host_rows=opts.get("host_rows"),
        device_rows=opts.get("device_rows"),
        layers=opts["layers"],
        policy=opts["policy"],
        device=opts["device"],
    )
    problems += found
    return (layout if not problems else None), problems


def steps_problem(steps: int, max_steps: int) -> Problem:
    """SR400: a step count above the configured capacity, naming the limit and the fix."""
    return problem(
        "SR400",
        f"HiSparse swap of {steps} steps exceeds the configured capacity of max_steps="
        f"{max_steps} (any step count from 1 to {max_steps} works)",
        accepted=f"steps in [1, {max_steps}]",
        fix=f"raise the capacity with {_FLAG} max_steps={steps}",
        field="cache_options.max_steps",
    )


def _next_pow2(value: int) -> int:
    return 1 << max(0, (int(value) - 1).bit_length())


# ------------------------------------------------------------------------------------ memory
_I32, _I64 = 4, 8


def hisparse_buffers(layout: HiSparseLayout) -> list[Buffer]:
    """Swap state, the device buffer and host cache a server allocates with the swapper's
    helpers, and the largest per-call miss plan (every request slot at the maximum steps)."""
    lay = layout
    slots_hot = lay.layers * lay.req_slots * lay.hot_size
    plan_cols = lay.req_slots * lay.plan_capacity()
    return [
        Buffer(name="device_buffer", device_bytes=lay.device_rows * lay.row_bytes,
               per=f"{lay.device_rows} rows x {lay.row_bytes} B"),
        Buffer(name="host_cache", host_bytes=lay.host_rows * lay.row_bytes,
               per=f"{lay.host_rows} rows x {lay.row_bytes} B"),
        Buffer(name="slot_rows", device_bytes=lay.req_slots * lay.buffer_size * _I32),
        Buffer(name="slot_tokens+slot_stamp", device_bytes=slots_hot * (_I32 + _I64)),
        Buffer(name="host_cache_locs", device_bytes=lay.req_slots * lay.max_seq_len * _I64),
        Buffer(name="tail_tokens+clock",
               device_bytes=lay.req_slots * (lay.page_size * _I32 + lay.layers * _I64)),
        Buffer(name="miss_plan", device_bytes=plan_cols * (_I64 + _I32),
               per=f"per call at batch {lay.req_slots}"),
    ]
