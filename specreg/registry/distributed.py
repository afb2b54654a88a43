"""Check that every rank of a serving job resolved the same plan.

Serving frameworks run one process per GPU rank. If one node has another plugin version, another
SPECREG_PLUGINS or SPECREG_KERNEL_BACKEND, or other speculative flags, its ranks compute other
widths or verify with other rules, and the job hangs or corrupts outputs far from the cause.
Call `check_consistent(plan)` once after resolving, on every rank::

    import specreg.registry.distributed

    plan = specreg.Registry.load().resolve(config)
    specreg.registry.distributed.check_consistent(plan)  # every rank, after init_process_group

Rules:

- Every rank contributes `plan.fingerprint()` through `torch.distributed.all_gather_object`; the
  comparison runs on the gathered list, which is identical on every rank, so every rank raises
  the same `ConsistencyError` (SR120) or none does. No rank is left waiting in a collective.
- The reference is the **majority** fingerprint; a tie goes to the fingerprint of the lowest rank
  (so with two ranks, rank 0 is the reference). The error names each rank that differs from the
  reference, every differing field (nested fields dotted, e.g. `widths.target.target_verify`) and
  both values, and which ranks hold the reference.
- A rank whose fingerprint cannot be computed (for example an invalid SPECREG_KERNEL_BACKEND)
  still joins the collective; every rank then raises SR120 naming it.
- Without an initialised process group: a no-op when the job has one process (`WORLD_SIZE`
  unset or 1); SR121 when `WORLD_SIZE` says several processes, because comparing is then
  impossible and silently skipping would hide the very mismatch this check exists for.

With the NCCL backend, `all_gather_object` uses the current CUDA device: call
`torch.cuda.set_device(local_rank)` first, as serving frameworks do anyway. This module imports
torch only inside `check_consistent`; `import specreg` never imports it.
"""

from __future__ import annotations

import json
import os
import socket
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from specreg.errors import ConsistencyError, Problem, SpecRegError, problem

if TYPE_CHECKING:
    from specreg.registry.plan import SpecPlan

_MISSING = object()
_ERROR_KEY = "error"
_FINGERPRINT_KEY = "fingerprint"
_FIX = (
    "give every rank the same plugin versions, SPECREG_PLUGINS, SPECREG_KERNEL_BACKEND and "
    "speculative flags"
)


def check_consistent(plan: SpecPlan, group: Any = None) -> None:
    """Raise `ConsistencyError` (SR120) on every rank if any rank resolved a different plan.

    `group` is a `torch.distributed` process group (default: the whole job); on a rank outside
    `group` this returns at once. Ranks in messages are ranks within `group`, with the global
    rank added when it differs.
    """
    own = _own_entry(plan)
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        _check_single_process(own)
        return
    if group is not None and dist.get_rank(group) < 0:
        return  # not a member of `group`: nothing to compare, as torch collectives do
    world = dist.get_world_size(group)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, own, group=group)
    labels = [_rank_label(dist, group, rank, entry) for rank, entry in enumerate(gathered)]
    problems = compare_entries(gathered, labels)
    if problems:
        raise ConsistencyError(problems)


def compare_fingerprints(
    fingerprints: Sequence[Mapping[str, Any]], labels: Sequence[str] | None = None
) -> list[Problem]:
    """The SR120 problems for fingerprints gathered from ranks 0..n-1 (empty if all agree).

    `labels` names each rank in messages (default `rank i`). Pure: no torch, no collectives.
    """
    return compare_entries([{_FINGERPRINT_KEY: dict(f)} for f in fingerprints], labels)


def compare_entries(
    entries: Sequence[Mapping[str, Any]], labels: Sequence[str] | None = None
) -> list[Problem]:
    """Like `compare_fingerprints`, for the gathered entries (fingerprint or error per rank)."""
    labels = list(labels) if labels is not None else [f"rank {i}" for i in range(len(entries))]
    failed = [i for i, entry in enumerate(entries) if _ERROR_KEY in entry]
    if failed:
        return [
            problem(
                "SR120",
                f"{labels[i]} could not compute its plan fingerprint: {entries[i][_ERROR_KEY]}",
                accepted="every rank resolving a plan whose fingerprint can be computed",
                fix=f"fix the error on {labels[i]}; then {_FIX}",
                field="fingerprint",
            )
            for i in failed
        ]
    flat = [_flatten(entry[_FINGERPRINT_KEY]) for entry in entries]
    reference = _reference_index(flat)
    holders = [i for i, f in enumerate(flat) if f == flat[reference]]
    holders_text = ", ".join(labels[i] for i in holders)
    out = []
    for rank, fingerprint in enumerate(flat):
        if fingerprint == flat[reference]:
            continue
        fields = sorted(set(fingerprint) | set(flat[reference]))
        differing = [
            f for f in fields if fingerprint.get(f, _MISSING) != flat[reference].get(f, _MISSING)
        ]
        details = "; ".join(
            f"{field}: {labels[rank]} has "
            + _describe_difference(
                fingerprint.get(field, _MISSING), flat[reference].get(field, _MISSING)
            )
            for field in differing
        )
        out.append(
            problem(
                "SR120",
                f"{labels[rank]} resolved a different plan than the reference held by "
                f"{holders_text} ({len(holders)} of {len(flat)} ranks): {details}",
                accepted="the same plugins, versions, gamma, widths and kernel backends on "
                "every rank",
                fix=_FIX,
                field=", ".join(differing),
            )
        )
    return out


# ------------------------------------------------------------------------------------ helpers
def _own_entry(plan: SpecPlan) -> dict[str, Any]:
    entry: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        entry[_FINGERPRINT_KEY] = plan.fingerprint()
    except SpecRegError as exc:
        entry[_ERROR_KEY] = str(exc)
    except Exception as exc:  # noqa: BLE001 - this rank must still join the collective
        entry[_ERROR_KEY] = f"{type(exc).__name__}: {exc}"
    return entry


def _check_single_process(own: Mapping[str, Any]) -> None:
    raw = os.environ.get("WORLD_SIZE", "").strip()
    try:
        world = int(raw) if raw else 1
    except ValueError:
        world = 1
    if world > 1:
        raise ConsistencyError(
            problem(
                "SR121",
                f"WORLD_SIZE={world} but torch.distributed is not initialised, so the ranks' "
                "plans cannot be compared",
                accepted="check_consistent called after torch.distributed.init_process_group, "
                "or in a single-process job",
                fix="call torch.distributed.init_process_group(...) before check_consistent",
                field="torch.distributed",
            )
        )
    problems = compare_entries([own])
    if problems:
        raise ConsistencyError(problems)


def _rank_label(dist: Any, group: Any, rank: int, entry: Mapping[str, Any]) -> str:
    label = f"rank {rank}"
    if group is not None:
        global_rank = dist.get_global_rank(group, rank)
        if global_rank != rank:
            label += f" (global rank {global_rank})"
    host = entry.get("host")
    return f"{label} on {host}" if host else label


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping):
            out.update(_flatten(item, name + "."))
        else:
            out[name] = item
    return out


def _reference_index(flat: Sequence[Mapping[str, Any]]) -> int:
    """The lowest rank among those holding the most common fingerprint."""
    keys = [json.dumps(f, sort_keys=True, default=repr) for f in flat]
    counts = Counter(keys)
    best = max(counts.values())
    return next(i for i, key in enumerate(keys) if counts[key] == best)


def _describe_difference(mine: Any, reference: Any) -> str:
    text = f"{_show(mine)}, the reference has {_show(reference)}"
    if isinstance(mine, list) and isinstance(reference, list):
        extra = [x for x in mine if x not in reference]
        missing = [x for x in reference if x not in mine]
        parts = ([f"only here: {extra}"] if extra else []) + (
            [f"only in the reference: {missing}"] if missing else []
        )
        if parts:
            text += f" ({'; '.join(parts)})"
    return text


def _show(value: Any) -> str:
    return "<missing>" if value is _MISSING else repr(value)
