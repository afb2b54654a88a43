"""The SGLang and vLLM parity grids, their committed snapshots, and the one command that
regenerates them and prints the per-framework report.

A grid case is a set of facts (algorithm, target family, the speculative numbers, the draft
checkpoint, HiSparse switches), built from the frameworks' own rules: topk 1, 2, 4 and 8, steps
1 to 8, draft tokens unset, below 2 and below, at and above the tree's nodes or the block size,
every algorithm name each framework accepts, five target families, checkpoints that state
their block size under each key the frameworks read (or none). Each framework resolves its grid
in one subprocess of the pinned environment (adapter off); specreg resolves the same flags in
this process. The snapshot (tests/adapters/snapshots/<framework>.json) pins, per case, both
outcomes (values and widths, or the error's type and cause) and the class of difference.

    python -m tests.adapters.parity report     # run both grids, print the counts per framework
    python -m tests.adapters.parity report --committed   # the same from the committed snapshots
    python -m tests.adapters.parity update     # run both grids, rewrite snapshots, row counts
                                               # and the generated docs pages
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.adapters import deviation_pages, deviations
from specreg.adapters.common import outcome
from tests.adapters.envs import REPO_ROOT, FrameworkEnv
from tests.support.models import MODEL_CONFIGS

HERE = Path(__file__).resolve().parent
SNAPSHOTS = REPO_ROOT / deviations.SNAPSHOT_DIR
REGENERATE = "SPECREG_FRAMEWORK_CACHE=... python -m tests.adapters.parity update"
FRAMEWORKS = ("sglang", "vllm")
VERSIONS = {"sglang": "0.5.23", "vllm": "0.33.0"}
MIN_CASES = {"sglang": 2000, "vllm": 100}
#: specreg's side resolves with the built-in plugins only, whatever else is installed here.
BUILT_IN_PLUGINS = ("eagle", "dspark", "hisparse", "lookup", "draft_model", "medusa")

_LAYER = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 1000}
_DSPARK = {"architectures": ["DSparkDraftModel"], "model_type": "llama", **_LAYER}
_DFLASH = {"architectures": ["DFlashDraftModel"], "model_type": "llama", **_LAYER}
_MARKOV = {"markov_rank": 8, "markov_head_type": "vanilla", "mask_token_id": 999}
#: Model folders beyond tests/support/models.py: two more targets and draft checkpoints that
#: state their block size under each key the frameworks read, or nowhere.
PARITY_MODELS: dict[str, dict[str, Any]] = {
    "qwen3": {**MODEL_CONFIGS["qwen2"], "architectures": ["Qwen3ForCausalLM"],
              "model_type": "qwen3", "head_dim": 16},
    "grok": {**MODEL_CONFIGS["llama"], "architectures": ["Grok1ForCausalLM"]},
    "dspark-dflash-config": {**_DSPARK, "dflash_config": {"block_size": 6, **_MARKOV}},
    "dspark-top-level": {**_DSPARK, "block_size": 4, "dspark_config": dict(_MARKOV)},
    "dspark-none": {**_DSPARK, "dspark_config": dict(_MARKOV)},
    "dflash-top-level": {**_DFLASH, "block_size": 7, "dflash_config": {"mask_token_id": 999}},
    "dflash-none": {**_DFLASH, "dflash_config": {"mask_token_id": 999}},
}
#: Draft checkpoints per block algorithm: folder -> (where it states the block size, the size
#: as SGLang 0.5.23 reads it: dspark_block_size, else dflash_config.block_size, else block_size).
CHECKPOINTS: dict[str, dict[str, tuple[str, int | None]]] = {
    "DSPARK": {
        "dspark-draft": ("dspark_config-only", None),
        "dspark-draft-prefixed": ("dspark_block_size", 5),
        "dspark-dflash-config": ("dflash_config", 6),
        "dspark-top-level": ("block_size", 4),
        "dspark-none": ("none", None),
    },
    "DFLASH": {
        "dflash-draft": ("dflash_config", 8),
        "dflash-top-level": ("block_size", 7),
        "dflash-none": ("none", None),
    },
}
EAGLE_NAMES = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
#: SGLang 0.5.23's other algorithm names (SpeculativeAlgorithm members).
OTHER_SGLANG_NAMES = ("UNO", "FROZEN_KV_MTP")
#: NGRAM's numbers (steps, topk, draft tokens) and its flags, each crossed with the others.
NGRAM_NUMBERS = ((None, None, None), (None, None, 1), (None, None, 4), (3, 1, 4), (2, 4, 8))
#: fact -> (its --speculative-ngram-* flag, the values tried; 0 is out of range).
NGRAM_FLAGS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "ngram_breadth": ("speculative_ngram_max_bfs_breadth", (None, 1, 4, 0)),
    "ngram_match": ("speculative_ngram_match_type", (None, "PROB")),
    "ngram_depth": ("speculative_ngram_max_trie_depth", (None, 4, 0)),
}
TOPKS = (None, 1, 2, 4, 8)
ALL_STEPS = (None, 1, 2, 3, 4, 5, 6, 7, 8)
#: target -> the steps it is crossed with (every topk and draft position for each).
TARGET_STEPS = {"llama": ALL_STEPS, "qwen2": (None, 1, 3, 8), "qwen3": (None, 1, 3),
                "grok": (None, 1, 3), "dsa": (None, 1, 3)}


def write_models(root: Path) -> dict[str, Path]:
    """Every model folder the grids name, each a config.json under `root` (each written whole,
    by a rename: two workers may write the same folder at once)."""
    out = {}
    for name, config in {**MODEL_CONFIGS, **PARITY_MODELS}.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        path, text = root / name / "config.json", json.dumps(config)
        if not path.exists() or path.read_text() != text:
            staging = path.with_name(f"config.json.{os.getpid()}.tmp")
            staging.write_text(text)
            os.replace(staging, path)
        out[name] = root / name
    return out


def models_digest() -> str:
    """A hash of every model folder's config: the folder name `write_models` is given in the
    framework cache, so that a path names one content."""
    text = json.dumps({**MODEL_CONFIGS, **PARITY_MODELS}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------- the SGLang grid
def _draft_positions(reference: int | None) -> list[int | None]:
    """Draft tokens unset, 1, and below, at and above `reference` (4 and 8 without one)."""
    around = [4, 8] if reference is None else [reference - 1, reference, reference + 1]
    return list(dict.fromkeys([None, 1, *(d for d in around if d >= 2)]))


def _facts(**given: Any) -> dict[str, Any]:
    facts = {"framework": "sglang", "algorithm": None, "target": "llama", "steps": None,
             "topk": None, "draft": None, "block_flag": None, "checkpoint": None,
             "checkpoint_block": "none", "checkpoint_block_size": None, "hisparse": False,
             "disable_radix_cache": False, "mixed_chunk": False, "adaptive": False}
    facts.update(given)
    return facts


def case_id(facts: Mapping[str, Any]) -> str:
    """A stable name for a case: its algorithm and every fact that differs from the default."""
    default = _facts()
    short = {"steps": "s", "topk": "k", "draft": "d", "block_flag": "block", "target": "on",
             "checkpoint": "ckpt", "disable_radix_cache": "no-radix", "mixed_chunk": "mixed",
             "adaptive": "adaptive", "hisparse": "hisparse", "method": "", "k": "k",
             "ngram_breadth": "bfs", "ngram_match": "match", "ngram_depth": "trie-depth"}
    parts = [str(facts.get("algorithm"))]
    for key, value in facts.items():
        if key in ("framework", "algorithm", "checkpoint_block", "checkpoint_block_size"):
            continue
        if key in default and value == default[key] and key != "target":
            continue
        label = short.get(key, key)
        parts.append(label if value is True else f"{label}={value}")
    return " ".join(parts)


def sglang_cases() -> list[dict[str, Any]]:
    """The SGLang grid (facts only; `sglang_flags` turns them into ServerArgs fields)."""
    cases = []
    for target, steps_axis in TARGET_STEPS.items():
        for algorithm, steps, topk in itertools.product(EAGLE_NAMES, steps_axis, TOPKS):
            reference = None if None in (steps, topk) else deviations.tree_nodes(steps, topk)
            positions = _draft_positions(reference)
            if steps is not None and topk == 1:
                positions = list(dict.fromkeys([*positions, steps]))  # a chain's other length
            for draft in positions:
                cases.append(_facts(algorithm=algorithm, target=target, steps=steps, topk=topk,
                                    draft=draft))
    for target, (algorithm, checkpoints) in itertools.product(("llama", "qwen3"), CHECKPOINTS.items()):
        extra = 1 if algorithm == "DSPARK" else 0
        for (checkpoint, (where, size)), block, steps in itertools.product(
            checkpoints.items(), (None, 3, 6), (None, 2)
        ):
            reference = None if (block or size) is None else (block or size) + extra
            for draft in _draft_positions(reference):
                cases.append(_facts(
                    algorithm=algorithm, target=target, steps=steps, topk=steps, draft=draft,
                    block_flag=block, checkpoint=checkpoint, checkpoint_block=where,
                    checkpoint_block_size=size,
                ))
    for algorithm, target, (steps, topk, draft) in itertools.product(
        OTHER_SGLANG_NAMES, ("llama", "qwen3"),
        ((None, None, None), (3, 1, 4), (2, 4, 8), (None, None, 4)),
    ):
        cases.append(_facts(algorithm=algorithm, target=target, steps=steps, topk=topk, draft=draft))
    cases += _ngram_cases()
    cases += _hisparse_cases()
    seen: set[str] = set()
    unique = []
    for facts in cases:
        cid = case_id(facts)
        if cid not in seen:
            seen.add(cid)
            unique.append({"id": cid, "facts": facts})
    return unique


def _ngram_cases() -> list[dict[str, Any]]:
    """NGRAM's numbers crossed with its flags (breadth, match type, trie depth) on a Llama
    target, and its numbers alone on a Qwen3 one."""
    out = [_facts(algorithm="NGRAM", target="qwen3", steps=s, topk=k, draft=d)
           for s, k, d in NGRAM_NUMBERS]
    names = list(NGRAM_FLAGS)
    for (steps, topk, draft), values in itertools.product(
        NGRAM_NUMBERS, itertools.product(*(NGRAM_FLAGS[n][1] for n in names))
    ):
        given = {n: v for n, v in zip(names, values, strict=True) if v is not None}
        out.append(_facts(algorithm="NGRAM", steps=steps, topk=topk, draft=draft, **given))
    return out


def _hisparse_cases() -> list[dict[str, Any]]:
    """HiSparse on a DSA target with and without the radix cache, mixed chunk and adaptive
    steps, and once on a target that is not DSA."""
    numbers = {
        "EAGLE": [(None, None, None), (1, 1, 2), (3, 1, 4), (2, 2, 4), (3, 1, 6)],
        "NEXTN": [(None, None, None), (1, 1, 2), (3, 1, 4), (2, 2, 4)],
        "DSPARK": [(None, None, None), (None, None, 3), (None, None, 5)],
        "DFLASH": [(None, None, None), (None, None, 3), (None, None, 5)],
    }
    checkpoints = {"DSPARK": "dspark-draft-prefixed", "DFLASH": "dflash-draft"}
    out = []
    for algorithm, sets in numbers.items():
        checkpoint = checkpoints.get(algorithm)
        where, size = CHECKPOINTS.get(algorithm, {}).get(checkpoint, ("none", None))
        for (steps, topk, draft), no_radix, mixed, adaptive in itertools.product(
            sets, (True, False), (False, True), (False, True)
        ):
            out.append(_facts(
                algorithm=algorithm, target="dsa", steps=steps, topk=topk, draft=draft,
                checkpoint=checkpoint, checkpoint_block=where, checkpoint_block_size=size,
                hisparse=True, disable_radix_cache=no_radix, mixed_chunk=mixed, adaptive=adaptive,
            ))
        steps, topk, draft = sets[1]
        out.append(_facts(
            algorithm=algorithm, target="qwen3", steps=steps, topk=topk, draft=draft,
            checkpoint=checkpoint, checkpoint_block=where, checkpoint_block_size=size,
            hisparse=True, disable_radix_cache=True,
        ))
    return out


def sglang_flags(facts: Mapping[str, Any], models: Mapping[str, Path]) -> dict[str, Any]:
    """The ServerArgs fields (as the user passes them) of one case."""
    flags: dict[str, Any] = {"model_path": str(models[facts["target"]]),
                             "speculative_algorithm": facts["algorithm"]}
    for key, name in (("speculative_num_steps", "steps"), ("speculative_eagle_topk", "topk"),
                      ("speculative_num_draft_tokens", "draft")):
        if facts[name] is not None:
            flags[key] = facts[name]
    algorithm = facts["algorithm"]
    if facts["checkpoint"] is not None:
        flags["speculative_draft_model_path"] = str(models[facts["checkpoint"]])
    elif algorithm == "STANDALONE":
        flags["speculative_draft_model_path"] = str(models["llama"])
    if facts["block_flag"] is not None:
        flags[f"speculative_{algorithm.lower()}_block_size"] = facts["block_flag"]
    for fact, (flag, _) in NGRAM_FLAGS.items():
        if facts.get(fact) is not None:
            flags[flag] = facts[fact]
    if facts["hisparse"]:
        flags["enable_hisparse"] = True
    for key, name in (("disable_radix_cache", "disable_radix_cache"),
                      ("enable_mixed_chunk", "mixed_chunk"), ("speculative_adaptive", "adaptive")):
        if facts[name]:
            flags[key] = True
    return flags


# ---------------------------------------------------------------------- the vLLM grid
#: vLLM 0.33.0's speculative methods that take a draft model folder -> the folders tried.
VLLM_DRAFTS: dict[str, tuple[str, ...]] = {
    "eagle": ("llama",), "eagle3": ("llama",), "mtp": (None,), "draft_model": ("llama",),
    "dspark": ("dspark-draft", "dspark-draft-prefixed", "dspark-dflash-config", "dspark-none"),
    "dflash": ("dflash-draft", "dflash-top-level", "dflash-none"),
}
VLLM_OTHER_METHODS = ("ngram_gpu", "extract_hidden_states", "deepseek_mtp", "custom_class")
#: The history drafters' keys: method -> option sets tried (each with k unset, 2 and 30).
VLLM_OPTIONS: dict[str, tuple[dict[str, Any], ...]] = {
    "ngram": ({}, {"prompt_lookup_min": 2}, {"prompt_lookup_max": 3},
              {"prompt_lookup_min": 2, "prompt_lookup_max": 4},
              {"prompt_lookup_min": 4, "prompt_lookup_max": 2}, {"prompt_lookup_min": 0}),
    "suffix": ({}, {"suffix_decoding_max_tree_depth": 8}, {"suffix_decoding_max_tree_depth": 0},
               {"suffix_decoding_max_cached_requests": 0},
               {"suffix_decoding_max_cached_requests": -1},
               {"suffix_decoding_max_spec_factor": 2.0}, {"suffix_decoding_max_spec_factor": -1.0},
               {"suffix_decoding_min_token_prob": 0.5}, {"suffix_decoding_min_token_prob": 1.5}),
}
CUSTOM_PROPOSER = "specreg.adapters.vllm_proposers.ngram"
VLLM_CHECKPOINTS: dict[str, tuple[str, int | None]] = {
    **{name: spec for by_algo in CHECKPOINTS.values() for name, spec in by_algo.items()},
}


def vllm_cases() -> list[dict[str, Any]]:
    """The vLLM grid: every method, k unset, 1 and around the checkpoint's block, two targets."""
    cases = []
    for method, drafts in VLLM_DRAFTS.items():
        for draft, target in itertools.product(drafts, ("llama", "qwen3")):
            where, size = VLLM_CHECKPOINTS.get(draft or "", ("none", None))
            extra = 1 if method == "dspark" else 0
            reference = None if size is None else size + extra  # draft tokens = k + 1
            ks = [None, 1, 3] if reference is None else [None, 1, reference - 2, reference - 1, reference]
            for k in dict.fromkeys(ks):
                cases.append({"framework": "vllm", "algorithm": method, "target": target,
                              "checkpoint": draft, "checkpoint_block": where,
                              "checkpoint_block_size": size, "k": k})
    for method, target, k in itertools.product(VLLM_OTHER_METHODS, ("llama", "qwen3"), (None, 2)):
        cases.append({"framework": "vllm", "algorithm": method, "target": target,
                      "checkpoint": None, "checkpoint_block": "none", "checkpoint_block_size": None,
                      "k": k})
    for method, option_sets in VLLM_OPTIONS.items():
        for options, target, k in itertools.product(option_sets, ("llama", "qwen3"), (None, 2, 30)):
            if target == "qwen3" and options:
                continue  # the options do not depend on the target
            if k == 30 and set(options) - {"suffix_decoding_max_tree_depth"}:
                continue  # k beyond the depth beside another refused key: two causes at once
            cases.append({"framework": "vllm", "algorithm": method, "target": target,
                          "checkpoint": None, "checkpoint_block": "none",
                          "checkpoint_block_size": None, "k": k, **options})
    return [{"id": _vllm_id(c), "facts": c} for c in cases]


def _vllm_id(facts: Mapping[str, Any]) -> str:
    options = [f"{key}={facts[key]}" for key in VLLM_OPTION_KEYS if key in facts]
    return " ".join(str(p) for p in (facts["algorithm"], f"on={facts['target']}",
                                     f"ckpt={facts['checkpoint']}", f"k={facts['k']}", *options))


VLLM_OPTION_KEYS = tuple(dict.fromkeys(k for sets in VLLM_OPTIONS.values() for o in sets for k in o))


def vllm_spec(facts: Mapping[str, Any], models: Mapping[str, Path]) -> dict[str, Any]:
    spec: dict[str, Any] = {"method": facts["algorithm"]}
    spec.update({key: facts[key] for key in VLLM_OPTION_KEYS if key in facts})
    if facts["algorithm"] == "custom_class":
        spec["model"] = CUSTOM_PROPOSER
    if facts["checkpoint"] is not None:
        spec["model"] = str(models[facts["checkpoint"]])
    if facts["k"] is not None:
        spec["num_speculative_tokens"] = facts["k"]
    return spec


# ---------------------------------------------------------------------- outcomes
def _cause(message: str, models_root: Path) -> str:
    text = message.replace(str(models_root), "<models>")
    text = re.sub(r"0x[0-9a-f]{6,}", "0x..", text)
    return " ".join(text.split())[:300]


def _width(value: Any, models_root: Path) -> Any:
    return _cause(value, models_root) if isinstance(value, str) else value


def sglang_outcome(result: Mapping[str, Any], models_root: Path) -> dict[str, Any]:
    """SGLang's side of a case: values and widths, or the error's type, kind and cause."""
    if result["error"]:
        return {"error": result["error"], "refusal": result["refusal"],
                "cause": _cause(result["message"], models_root)}
    values = result["values"]
    draft = values["speculative_num_draft_tokens"]
    return {
        "error": None,
        "values": {"num_steps": values["speculative_num_steps"],
                   "topk": values["speculative_eagle_topk"], "num_draft_tokens": draft},
        "gamma": None if draft is None else draft - 1,
        "widths": {w: {p: _width(v, models_root) for p, v in phases.items()}
                   for w, phases in result["widths"].items()},
    }


VLLM_FIELDS = ("gamma", "verify_width")


def vllm_outcome(result: Mapping[str, Any], models_root: Path) -> dict[str, Any]:
    if result["error"]:
        return {"error": result["error"], "refusal": result["refusal"],
                "cause": _cause(result["message"], models_root)}
    return {"error": None, "method": result["method"], "gamma": result["k"],
            "verify_width": result["k"] + 1}


def specreg_outcome(registry: Any, framework: str, flags: dict[str, Any]) -> dict[str, Any]:
    """specreg's side: what `outcome` resolves (vLLM: gamma and the verify width), or the codes."""
    ours = outcome(registry, dict(flags))
    if ours["error"] or framework == "sglang":
        return ours
    return {"error": None, "gamma": ours["gamma"],
            "verify_width": ours["widths"]["target"]["target_verify"]}


def framework_inputs(framework: str, cases: Sequence[Mapping[str, Any]],
                     models: Mapping[str, Path]) -> list[dict[str, Any]]:
    """The payload of the framework's grid script (tests/adapters/<framework>_grid.py)."""
    if framework == "sglang":
        return [{"id": i, "kwargs": {**sglang_flags(c["facts"], models), "device": "cuda"},
                 "check": c["facts"]["hisparse"]} for i, c in enumerate(cases)]
    return [{"id": i, "target": str(models[c["facts"]["target"]]),
             "spec": vllm_spec(c["facts"], models)} for i, c in enumerate(cases)]


def specreg_inputs(framework: str, facts: Mapping[str, Any], models: Mapping[str, Path]) -> dict[str, Any]:
    if framework == "sglang":
        return sglang_flags(facts, models)
    return vllm_spec(facts, models)


def cases_of(framework: str) -> list[dict[str, Any]]:
    return sglang_cases() if framework == "sglang" else vllm_cases()


def run_framework(env: FrameworkEnv, framework: str, cases: Sequence[Mapping[str, Any]],
                  models: Mapping[str, Path], args: Sequence[str] = (), **extra: str) -> dict[str, Any]:
    """The framework's grid script over `cases` in one subprocess: its JSON output."""
    script = str(HERE / f"{framework}_grid.py")
    result = subprocess.run(
        [str(env.python), script, *args], input=json.dumps(framework_inputs(framework, cases, models)),
        capture_output=True, text=True, timeout=1800, env=env.subprocess_env(**extra),
    )
    if result.returncode != 0:
        raise AssertionError(f"{script} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def specreg_side(registry: Any, framework: str, cases: Sequence[Mapping[str, Any]],
                 models: Mapping[str, Path]) -> list[dict[str, Any]]:
    return [specreg_outcome(registry, framework, specreg_inputs(framework, c["facts"], models))
            for c in cases]


def build_snapshot(framework: str, version: str, cases: Sequence[Mapping[str, Any]],
                   theirs: Sequence[Mapping[str, Any]], ours: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    fields = deviations.COMPARED if framework == "sglang" else VLLM_FIELDS
    entries = {}
    for case, their, our in zip(cases, theirs, ours, strict=True):
        entries[case["id"]] = {"case": case["facts"], "framework": their, "specreg": our,
                               "kind": deviations.difference(their, our, fields)}
    return {"framework": framework, "version": version, "cases": entries}


def built_in_registry() -> Any:
    from specreg.registry.registry import Registry

    return Registry.load(allowlist=BUILT_IN_PLUGINS)


def snapshot_from_run(framework: str, out: Mapping[str, Any], models: Mapping[str, Path],
                      registry: Any = None) -> dict[str, Any]:
    """The snapshot a framework run (`run_framework`'s output) and specreg's side make now."""
    cases = cases_of(framework)
    root = next(iter(models.values())).parent
    normalize = sglang_outcome if framework == "sglang" else vllm_outcome
    theirs = [normalize(r, root) for r in out["results"]]
    ours = specreg_side(registry or built_in_registry(), framework, cases, models)
    return build_snapshot(framework, out["version"], cases, theirs, ours)


def collect(env: FrameworkEnv, framework: str, models: Mapping[str, Path]) -> dict[str, Any]:
    """Run `framework`'s grid and specreg's side: the snapshot they make now."""
    out = run_framework(env, framework, cases_of(framework), models)
    return snapshot_from_run(framework, out, models)


#: Changes to specreg the parity tests must catch, each (what it changes, module, name, value).
MUTATIONS = (
    ("EAGLE's default steps 3 -> 4", "specreg_eagle.plugin", "DEFAULT_NUM_STEPS", 4),
    ("Grok loses SGLang's wide-tree default (5, 4, 8)", "specreg.framework_args.rules",
     "WIDE_TREE_ARCHITECTURES", frozenset({"LlamaForCausalLM"})),
)


# ---------------------------------------------------------------------- comparing and reporting
def snapshot_diff(committed: Mapping[str, Any] | None, fresh: Mapping[str, Any]) -> list[str]:
    """One line per case that is new, gone or changed since the committed snapshot."""
    if committed is None:
        return [f"no committed snapshot for {fresh['framework']}"]
    lines = []
    if committed["version"] != fresh["version"]:
        lines.append(f"version {committed['version']} -> {fresh['version']}")
    old, new = committed["cases"], fresh["cases"]
    lines += [f"new case: {cid}" for cid in new if cid not in old]
    lines += [f"case gone: {cid}" for cid in old if cid not in new]
    for cid in new:
        if cid not in old or old[cid] == new[cid]:
            continue
        for side in ("framework", "specreg", "kind", "case"):
            if old[cid][side] != new[cid][side]:
                lines.append(f"case {cid!r}: {side} {json.dumps(old[cid][side], sort_keys=True)} "
                             f"-> {json.dumps(new[cid][side], sort_keys=True)}")
    return lines


def both_refuse_causes(snapshot: Mapping[str, Any]) -> Counter[tuple[str, str]]:
    """For the both-refuse cases: (the framework's exception, specreg's codes) -> cases."""
    return Counter(
        (e["framework"]["error"], ",".join(e["specreg"]["error"]))
        for e in snapshot["cases"].values() if e["kind"] == "both-refuse"
    )


def report_lines(snapshots: Mapping[str, Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The parity report: per framework, the case count per class and what the audit found."""
    lines = []
    for framework, snapshot in snapshots.items():
        audit = deviations.audit(framework, deviations.entries_of(snapshot), rows)
        counts = deviations.summary(audit)
        lines.append(f"{framework} {snapshot['version']}: "
                     + ", ".join(f"{name} {value}" for name, value in counts.items()))
        causes = both_refuse_causes(snapshot)
        lines.append("  both refuse, by cause (framework / specreg): "
                     + "; ".join(f"{t} / {c}: {n}" for (t, c), n in sorted(causes.items())))
        found = deviations.failures(audit)
        lines.append("  audit: " + ("clean" if not found else json.dumps(found, default=str)[:2000]))
    return lines


def write_snapshot(snapshot: Mapping[str, Any], folder: Path = SNAPSHOTS) -> Path:
    """One case a line, sorted, so a change shows as a one-line diff."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{snapshot['framework']}.json"
    body = ",\n".join(f"  {json.dumps(cid)}: {json.dumps(entry, sort_keys=True)}"
                      for cid, entry in sorted(snapshot["cases"].items()))
    path.write_text(f'{{"framework": {json.dumps(snapshot["framework"])}, '
                    f'"version": {json.dumps(snapshot["version"])}, "cases": {{\n{body}\n}}}}\n')
    return path


def recount_rows(snapshots: Mapping[str, Mapping[str, Any]],
                 rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rewrite each row's `cases` to what it covers in `snapshots` (printing each change); rows
    themselves are only ever added or changed by hand."""
    covers: Counter[str] = Counter()
    for framework, snapshot in snapshots.items():
        audit = deviations.audit(framework, deviations.entries_of(snapshot), rows)
        covers.update(audit["covered"].values())
    out = []
    for row in rows:
        if row["framework"] in snapshots and row.get("cases") != covers[row["id"]]:
            print(f"row {row['id']}: cases {row.get('cases')} -> {covers[row['id']]}", file=sys.stderr)
            row = {**row, "cases": covers[row["id"]]}
        out.append(dict(row))
    deviations.TABLE.write_text(json.dumps({"rows": out}, indent=1) + "\n")
    return out


USAGE = "usage: python -m tests.adapters.parity [report [--committed] | update]"


def main(argv: Sequence[str] | None = None) -> int:
    from tests.adapters.envs import ensure_env

    args = list(sys.argv[1:] if argv is None else argv)
    command, options = (args[0] if args else "report"), set(args[1:])
    if command not in ("report", "update") or options - ({"--committed"} if command == "report" else set()):
        print(f"{USAGE}; got {' '.join(args)!r}", file=sys.stderr)
        return 2
    rows = deviations.load_table()
    if "--committed" in options:  # the committed snapshots, without running anything
        committed = {f: deviations.load_snapshot(f, SNAPSHOTS) for f in FRAMEWORKS}
        print("\n".join(report_lines({f: s for f, s in committed.items() if s}, rows)))
        return 0
    env = ensure_env()
    fresh = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = write_models(Path(tmp))
        for framework in FRAMEWORKS:
            started = time.monotonic()
            fresh[framework] = collect(env, framework, models)
            print(f"{framework}: {len(fresh[framework]['cases'])} cases in "
                  f"{time.monotonic() - started:.1f} s", file=sys.stderr)
    if command == "update":
        for snapshot in fresh.values():
            print(f"wrote {write_snapshot(snapshot)}", file=sys.stderr)
        rows = recount_rows(fresh, rows)
        deviation_pages.main([str(REPO_ROOT)])
    else:
        for framework, snapshot in fresh.items():
            changed = snapshot_diff(deviations.load_snapshot(framework, SNAPSHOTS), snapshot)
            print(f"{framework}: {len(changed)} lines differ from the committed snapshot",
                  file=sys.stderr)
    print("\n".join(report_lines(fresh, rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
