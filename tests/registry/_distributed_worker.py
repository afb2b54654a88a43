"""One rank of the consistency test: runs every scenario in order and writes what each raised.

Usage: python _distributed_worker.py RANK WORLD_SIZE INIT_FILE OUT_DIR
Every rank runs the same scenarios in the same order (the collectives must line up); a scenario
changes one thing on one rank. Results go to OUT_DIR/rank<RANK>.json.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

import torch.distributed as dist

from specreg import ConsistencyError, Registry
from specreg.registry.distributed import check_consistent
from tests.support.plugins import ExtraPlugin, ToyPlugin

ENTRY_POINT_GROUP = "specreg_consistency_test"


def toy_registry(version: str = "0.1", extra: bool = False) -> Registry:
    registry = Registry()
    registry.register_plugin(ToyPlugin(), "toy", distribution="toy-dist", version=version)
    if extra:
        registry.register_plugin(ExtraPlugin(), "extra", distribution="extra-dist", version="1.0")
    return registry


def outcome(action) -> dict:
    try:
        action()
    except ConsistencyError as exc:
        return {
            "error": type(exc).__name__,
            "codes": list(exc.codes),
            "messages": [p.message for p in exc.problems],
            "fields": [p.field for p in exc.problems],
        }
    return {"ok": True}


def with_env(name: str, value: str | None, action):
    def run():
        old = os.environ.get(name)
        if value is not None:
            os.environ[name] = value
        try:
            action()
        finally:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old

    return run


def main() -> None:
    rank, world, init_file, out_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=30),
    )
    base = {"algorithm": "toy", "num_draft_tokens": 4}
    plan = toy_registry().resolve(base)
    results = {}

    results["equal"] = outcome(lambda: check_consistent(plan))

    loaded = Registry.load(
        group=ENTRY_POINT_GROUP,
        allowlist={"toy", "extra"} if rank == 1 else {"toy"},
        fresh=True,
    )
    results["allowlist"] = outcome(lambda: check_consistent(loaded.resolve(base)))

    extra = toy_registry(extra=(rank == 1))
    results["extra_plugin"] = outcome(lambda: check_consistent(extra.resolve(base)))

    versioned = toy_registry(version="0.2" if rank == world - 1 else "0.1")
    results["plugin_version"] = outcome(lambda: check_consistent(versioned.resolve(base)))

    config = {**base, "num_draft_tokens": 5} if rank == 1 else base
    results["config"] = outcome(lambda: check_consistent(toy_registry().resolve(config)))

    odd = {**base, "num_draft_tokens": 6} if rank == 0 else base
    results["rank0_odd"] = outcome(lambda: check_consistent(toy_registry().resolve(odd)))

    # The backend is fixed when a plan is resolved: the last rank resolves under torch.
    backend = "torch" if rank == world - 1 else None
    results["backend"] = outcome(
        with_env(
            "SPECREG_KERNEL_BACKEND", backend,
            lambda: check_consistent(toy_registry().resolve(base)),
        )
    )

    # Changing the variable after the resolve changes nothing.
    results["backend_after_resolve"] = outcome(
        with_env("SPECREG_KERNEL_BACKEND", backend, lambda: check_consistent(plan))
    )

    # The last rank resolves with triton forced, then has no interpreter for CPU tensors: its
    # plan cannot say which kernels run on the CPU, so its fingerprint fails (SR116).
    last = rank == world - 1

    def unfingerprintable() -> None:
        forced = toy_registry().resolve(base)
        with_env("TRITON_INTERPRET", "0" if last else None, lambda: check_consistent(forced))()

    results["fingerprint_error"] = outcome(
        with_env("SPECREG_KERNEL_BACKEND", "triton" if last else None, unfingerprintable)
    )

    members = list(range(1, world))
    subgroup = dist.new_group(members)
    if rank in members:
        sub_config = {**base, "num_draft_tokens": 5} if rank == world - 1 else base
        sub_plan = toy_registry().resolve(sub_config)
        results["subgroup"] = outcome(lambda: check_consistent(sub_plan, group=subgroup))
    else:
        results["outside_subgroup"] = outcome(lambda: check_consistent(plan, group=subgroup))
    dist.barrier()

    with open(os.path.join(out_dir, f"rank{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
