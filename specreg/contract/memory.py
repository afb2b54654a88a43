"""What a plan costs in memory: the buffers its objects imply, their total, and budget checks.

The memory contract: an object on a plan (verifier, drafter, cache swapper) may define
``memory() -> Iterable[Buffer]``, listing every buffer it allocates or makes a serving framework
allocate, in bytes, without allocating them. `plan.memory()` collects them into a
`MemoryReport`; buffers that scale with the batch say `per="per request"` and are counted once
(the built-in verifiers and drafters state theirs so). Imports neither torch nor triton.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import attrs

from specreg.errors import Problem, problem

PLAN_OBJECTS = ("verifier", "drafter", "cache_swapper")
_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


@attrs.frozen(kw_only=True)
class Buffer:
    """One buffer a plan implies: what it holds and its bytes on the accelerator and the host.

    `device_bytes` counts what a serving framework keeps on the accelerator, `host_bytes` what
    it keeps in host memory. `per` says what the size scales with when it is an upper bound
    (for example "per call at the largest batch"). `per="per request"` (`PER_REQUEST`) marks
    bytes for one request: a plan has no batch size, so its totals count such a buffer once,
    and a batch of b holds b of them.
    """

    name: str
    device_bytes: int = 0
    host_bytes: int = 0
    per: str = ""
    owner: str = ""

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class MemoryReport:
    """The buffers of one plan, and the objects on it that state no memory."""

    buffers: tuple[Buffer, ...]
    unstated: tuple[str, ...] = ()

    @property
    def device_bytes(self) -> int:
        return sum(b.device_bytes for b in self.buffers)

    @property
    def host_bytes(self) -> int:
        return sum(b.host_bytes for b in self.buffers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "device_bytes": self.device_bytes,
            "host_bytes": self.host_bytes,
            "buffers": [b.to_dict() for b in self.buffers],
            "unstated": list(self.unstated),
        }

    def lines(self) -> list[str]:
        """The report as text lines, largest buffers first."""
        out = [f"total: device {format_bytes(self.device_bytes)}, host {format_bytes(self.host_bytes)}"]
        for b in sorted(self.buffers, key=lambda b: -(b.device_bytes + b.host_bytes)):
            per = f"  ({b.per})" if b.per else ""
            out.append(
                f"  {(b.owner + '.' if b.owner else '') + b.name:<44} device "
                f"{format_bytes(b.device_bytes):>10}  host {format_bytes(b.host_bytes):>10}{per}"
            )
        out += [f"  {name}: states no memory (no memory() method)" for name in self.unstated]
        return out

    def budget_problems(
        self, *, device_budget: int | None, host_budget: int | None, flags: tuple[str, str]
    ) -> list[Problem]:
        """SR145 for each budget the plan exceeds; `flags` name the device and host flags."""
        out = []
        for where, used, budget, flag in (
            ("device", self.device_bytes, device_budget, flags[0]),
            ("host", self.host_bytes, host_budget, flags[1]),
        ):
            if budget is None or used <= budget:
                continue
            biggest = max(self.buffers, key=lambda b: getattr(b, f"{where}_bytes"))
            out.append(
                problem(
                    "SR145",
                    f"the plan needs {format_bytes(used)} of {where} memory, over the "
                    f"{format_bytes(budget)} budget; the largest {where} buffer is "
                    f"{biggest.owner}.{biggest.name} "
                    f"({format_bytes(getattr(biggest, f'{where}_bytes'))})",
                    accepted=f"plans within {flag} {format_bytes(budget)}",
                    fix="lower the draft widths (--speculative-num-draft-tokens, "
                    "--speculative-num-steps, --speculative-eagle-topk) or the cache sizes "
                    "(req_slots and hot_size in --hisparse-config, or --kv-cache-option "
                    f"max_seq_len=), or raise {flag}",
                    field=f"memory.{where}",
                )
            )
        return out


def plan_memory(plan: Any) -> MemoryReport:
    """Collect `memory()` from every object on `plan`."""
    buffers: list[Buffer] = []
    unstated: list[str] = []
    for owner in PLAN_OBJECTS:
        obj = getattr(plan, owner, None)
        if obj is None:
            continue
        stated = getattr(obj, "memory", None)
        if not callable(stated):
            unstated.append(f"{owner} {type(obj).__name__}")
            continue
        buffers += [attrs.evolve(b, owner=b.owner or owner) for b in _buffers(stated())]
    return MemoryReport(tuple(buffers), tuple(unstated))


def _buffers(items: Iterable[Any]) -> list[Buffer]:
    out = []
    for item in items:
        if not isinstance(item, Buffer):
            raise TypeError(f"memory() must yield specreg.contract.memory.Buffer, got {type(item).__name__}")
        out.append(item)
    return out


def parse_size(text: str) -> int | None:
    """'16GiB', '80GB', '512MiB', '1e9'-free plain integers -> bytes; None when unreadable."""
    match = _SIZE_RE.match(str(text))
    if not match or match.group(2).lower() not in _UNITS:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_bytes(value: int) -> str:
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


_INT32, _INT64 = 4, 8
PER_REQUEST = "per request"


def verify_result_buffers(slots: int, *, width: int = 0) -> list[Buffer]:
    """The per-request outputs of one `VerifyResult` with `slots` = the deepest path + 1; `width`
    > 0 adds the per-node `predicts` of tree verifiers."""
    out = [
        Buffer(name="output_tokens", device_bytes=slots * _INT64, per=PER_REQUEST),
        Buffer(name="accepted_index", device_bytes=slots * _INT64, per=PER_REQUEST),
        Buffer(name="num_accepted", device_bytes=_INT32, per=PER_REQUEST),
        Buffer(name="bonus", device_bytes=_INT64, per=PER_REQUEST),
    ]
    if width:
        out.append(Buffer(name="predicts", device_bytes=width * _INT64, per=PER_REQUEST))
    return out
