"""Resolve time of `registry.resolve` for the built-ins, against a floor and an older tree.

Three configs: eagle (a tree), dspark with a draft config.json, eagle with HiSparse. For each,
the best-of-repeats time of one `registry.resolve(config)` and the floor of the same work: parsing
the config (`config_from_flags`), which every resolve does, plus the owning plugin's own
analysis called once directly. `--before REF` also measures the tree at git REF in subprocesses
interleaved with this tree's, in the same run, and prints after/before ratios.

    python benchmarks/bench_resolve.py [--repeat 7] [--number 300] [--json]
    python benchmarks/bench_resolve.py --before <commit> [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DRAFT_CONFIG = {
    "vocab_size": 32000,
    "block_size": 8,
    "markov_rank": 64,
    "markov_head_type": "vanilla",
    "mask_token_id": 4,
    "num_target_layers": 32,
    "target_layer_ids": [1, 15, 29],
    "dspark_config": {"sample_from_anchor": True},
}
CASES = {
    "eagle": {"algorithm": "eagle", "num_steps": 3, "topk": 4, "num_draft_tokens": 8},
    "dspark+draft_config": {"algorithm": "dspark", "draft_config": DRAFT_CONFIG},
    "eagle+hisparse": {
        "algorithm": "eagle",
        "num_steps": 3,
        "topk": 4,
        "num_draft_tokens": 8,
        "cache": "hisparse",
        "cache_options": {"hot_size": 4096, "top_k": 2048},
    },
}


def _floor_work(name: str):
    """The same answer computed directly: parse the config, run the owner's analysis once."""
    from specreg import config_from_flags

    config = CASES[name]
    if name.startswith("dspark"):
        from specreg_dspark.sizes import analyse_dspark

        def work() -> None:
            parsed = config_from_flags(config)
            analyse_dspark(parsed.draft_config, parsed.num_draft_tokens)

        return work
    from specreg_eagle.sizes import max_tree_nodes

    hisparse = "cache" in config
    if hisparse:
        from specreg_hisparse.sizes import layout_from_options

    def work() -> None:
        parsed = config_from_flags(config)
        max_tree_nodes(parsed.num_steps, parsed.topk)
        if hisparse:
            layout_from_options(dict(parsed.cache_options), parsed.num_draft_tokens)

    return work


def measure(repeat: int, number: int) -> dict[str, dict[str, float]]:
    from specreg import Registry

    registry = Registry.load(fresh=True)
    out = {}
    for name, config in CASES.items():
        registry.resolve(config)  # warm imports (torch, kernels) outside the timing
        resolve = min(
            timeit.repeat(lambda c=config: registry.resolve(c), number=number, repeat=repeat)
        )
        floor = min(timeit.repeat(_floor_work(name), number=number, repeat=repeat))
        out[name] = {"resolve_us": resolve / number * 1e6, "floor_us": floor / number * 1e6}
    return out


def _export(ref: str, into: Path) -> Path:
    archive = into / "tree.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), ref], check=True
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def _run_json(tree: Path, repeat: int, number: int) -> dict[str, dict[str, float]]:
    env = dict(os.environ)
    # The tree's own packages come first on the path, ahead of the editable install.
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "plugins")])
    script = ROOT / "benchmarks" / "bench_resolve.py"
    done = subprocess.run(
        [sys.executable, str(script), "--json", "--repeat", str(repeat), "--number", str(number)],
        env=env, check=True, capture_output=True, text=True, cwd=tree,
    )
    return json.loads(done.stdout)


def compare(ref: str, rounds: int, repeat: int, number: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        before_tree = _export(ref, Path(tmp))
        best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
        for _ in range(rounds):  # interleaved, so machine load hits both alike
            for label, tree in (("before", before_tree), ("after", ROOT)):
                for case, row in _run_json(tree, repeat, number).items():
                    prev = best[label].get(case)
                    best[label][case] = row["resolve_us"] if prev is None else min(
                        prev, row["resolve_us"]
                    )
    print(f"before = {ref}, after = working tree, best of {rounds} interleaved rounds")
    print(f"{'config':<22} {'before us':>10} {'after us':>10} {'after/before':>13}")
    for case in CASES:
        b, a = best["before"][case], best["after"][case]
        print(f"{case:<22} {b:>10.1f} {a:>10.1f} {a / b:>12.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=300)
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.add_argument("--before", metavar="REF", help="also measure the tree at git REF")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.before:
        compare(args.before, args.rounds, args.repeat, args.number)
        return
    rows = measure(args.repeat, args.number)
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{'config':<22} {'resolve us':>11} {'floor us':>9} {'resolve/floor':>14}")
    for case, row in rows.items():
        ratio = row["resolve_us"] / row["floor_us"]
        print(f"{case:<22} {row['resolve_us']:>11.1f} {row['floor_us']:>9.1f} {ratio:>13.1f}x")


if __name__ == "__main__":
    main()
