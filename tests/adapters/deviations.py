"""The committed table of where specreg deliberately differs from SGLang and vLLM, how a parity
case is judged against it, and its docs page.

A parity case is one framework configuration, described by its facts (algorithm, target, the
speculative numbers, the draft checkpoint, HiSparse switches). Both the framework and specreg
resolve it; `difference` puts the pair in one class:

- ``same``: both resolved, to the same values;
- ``both-refuse``: both refused (each side's cause is kept in the parity snapshot);
- ``rescued:<Exception>:<specreg>``: the framework crashed (an exception that is not a
  ``ValueError``), specreg resolved (``resolves``) or refused with codes;
- ``stricter:<codes>``: the framework resolved, specreg refused;
- ``looser:<Exception>``: the framework refused with a ``ValueError``, specreg resolved;
- ``values:<fields>``: both resolved, to different values of the named fields.

Each row of `deviations.json` names a framework, one kind, the semantic conditions it covers
(`CONDITIONS`: topk a tree, draft tokens unset, the target family, where the checkpoint states
its block size..., never one grid value), how many cases it covers, and one reason. `audit`
fails a case no row covers, a row that covers no case or another count than it states, a row
whose conditions also hold for a case of another kind (over-broad), and a row with an empty or
unknown condition. `tests.adapters.deviation_pages` renders the docs pages from the table and
the parity snapshots.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.adapters.history_conditions import (
    ngram_breadth,
    ngram_flags,
    ngram_steps,
    suffix_cache,
    suffix_k,
    vllm_options,
)

TABLE = Path(__file__).with_name("deviations.json")
SNAPSHOT_DIR = Path("tests") / "adapters" / "snapshots"
NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
COMPARED = ("num_steps", "topk", "num_draft_tokens", "gamma", "widths")
CLASSES = ("same", "both-refuse", "rescued", "stricter", "looser", "values")
AGREEING = ("same", "both-refuse")


# ---------------------------------------------------------------------- judging one case
def difference(
    framework: Mapping[str, Any], ours: Mapping[str, Any], fields: Sequence[str] = COMPARED
) -> str:
    """The class of a case (see the module docstring) from both sides' outcomes.

    `framework` holds ``error`` (the exception's type name or None) and ``refusal`` (whether
    it is a ValueError); `ours` holds ``error`` (specreg's codes or None). Resolved outcomes
    hold the `fields`, at top level or under ``values``.
    """
    theirs_err, ours_err = framework.get("error"), ours.get("error")
    crashed = bool(theirs_err) and not framework.get("refusal", False)
    if theirs_err and crashed:
        return f"rescued:{theirs_err}:" + (",".join(ours_err) if ours_err else "resolves")
    if theirs_err and ours_err:
        return "both-refuse"
    if theirs_err:
        return f"looser:{theirs_err}"
    if ours_err:
        return "stricter:" + ",".join(ours_err)
    differing = [name for name in fields if _value(framework, name) != _value(ours, name)]
    return "values:" + ",".join(differing) if differing else "same"


def class_of(kind: str) -> str:
    return kind.split(":", 1)[0]


def _value(outcome: Mapping[str, Any], name: str) -> Any:
    if name in outcome:
        return outcome[name]
    return (outcome.get("values") or {}).get(name)


# ---------------------------------------------------------------------- semantic conditions
EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "NEXTN", "eagle", "eagle3", "mtp", "deepseek_mtp"})
BLOCK_ALGORITHMS = frozenset({"DSPARK", "DFLASH", "dspark", "dflash"})
WIDE_TREE_TARGETS = frozenset({"llama", "grok"})


def tree_nodes(steps: int, topk: int) -> int:
    """Draft tokens a tree of `steps` levels of `topk` can hold: 1 + topk + (steps - 1) topk^2."""
    return 1 + topk + (steps - 1) * topk * topk


def reference_size(case: Mapping[str, Any]) -> int | None:
    """The draft-token count the framework's rules tie this case to: the tree's nodes (steps and
    topk given), the block (flag, else the checkpoint's block size as the framework reads it,
    plus the anchor for DSpark); None where the case has none."""
    algorithm = case.get("algorithm")
    if algorithm in BLOCK_ALGORITHMS:
        block = case.get("block_flag") or case.get("checkpoint_block_size")
        if block is None:
            return None
        return block + 1 if algorithm in ("DSPARK", "dspark") else block
    if case.get("steps") is None or case.get("topk") is None:
        return None
    return tree_nodes(case["steps"], case["topk"])


def _position(value: int | None, reference: int | None) -> str:
    if value is None:
        return "unset"
    if value < 2:
        return "one"
    if reference is None:
        return "given"
    return "below" if value < reference else "at" if value == reference else "above"


def _draft(case: Mapping[str, Any]) -> str:
    draft = case.get("draft")
    if draft is None and case.get("k") is not None:
        draft = case["k"] + 1
    return _position(draft, reference_size(case))


def _draft_tokens(case: Mapping[str, Any]) -> int | None:
    """The draft-token count the framework runs, as far as the facts fix it: the given count,
    else the block, else a chain's steps + 1, else SGLang's default for the target."""
    if case.get("draft") is not None:
        return case["draft"]
    if case.get("algorithm") in BLOCK_ALGORITHMS:
        return reference_size(case)
    if case.get("steps") is not None and case.get("topk") in (None, 1):
        return case["steps"] + 1
    if case.get("steps") is None and case.get("topk") is None:
        return 8 if case.get("target") in WIDE_TREE_TARGETS else 4
    return None


def _hisparse_swap(case: Mapping[str, Any]) -> str:
    if not case.get("hisparse"):
        return "off"
    tokens = _draft_tokens(case)
    return "unknown" if tokens is None else "within" if 2 <= tokens <= 4 else "outside"


def _family(case: Mapping[str, Any]) -> str:
    algorithm = case.get("algorithm")
    if algorithm in EAGLE_FAMILY:
        return "eagle"
    if algorithm in BLOCK_ALGORITHMS:
        return "block"
    if algorithm in ("NGRAM", "ngram", "ngram_gpu"):
        return "ngram"
    return "standalone" if algorithm in ("STANDALONE", "draft_model") else "other"


def _set(name: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda case: "unset" if case.get(name) is None else "set"


def _topk(case: Mapping[str, Any]) -> str:
    topk = case.get("topk")
    return "unset" if topk is None else "chain" if topk == 1 else "tree"


def _flag(name: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda case: bool(case.get(name))


#: name -> (how a case's facts give its value, the values it can take, what it means).
CONDITIONS: dict[str, tuple[Callable[[Mapping[str, Any]], Any], tuple[Any, ...], str]] = {
    "algorithm": (lambda c: c.get("algorithm"), (
        "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "DSPARK", "DFLASH", "NGRAM", "UNO",
        "FROZEN_KV_MTP", "eagle", "eagle3", "mtp", "deepseek_mtp", "dspark", "dflash", "ngram",
        "ngram_gpu", "draft_model", "suffix", "extract_hidden_states", "custom_class"),
        "the algorithm name (SGLang) or method (vLLM) the user passed"),
    "family": (_family, ("eagle", "block", "standalone", "ngram", "other"),
               "EAGLE/EAGLE3/NEXTN (eagle), DSpark/DFlash (block), STANDALONE/draft_model "
               "(standalone), ngram"),
    "steps": (_set("steps"), ("unset", "set"), "whether the number of draft steps is given"),
    "topk": (_topk, ("unset", "chain", "tree"), "topk unset, 1 (a chain) or above 1 (a tree)"),
    "draft": (_draft, ("unset", "one", "given", "below", "at", "above"),
              "draft tokens (vLLM: k + 1) unset, below 2, or below/at/above the tree's nodes or "
              "the block (given: no tree or block to compare with)"),
    "block_flag": (_set("block_flag"), ("unset", "set"),
                   "whether --speculative-dspark/dflash-block-size is given"),
    "checkpoint_block": (lambda c: c.get("checkpoint_block", "none"), (
        "none", "dspark_block_size", "dflash_config", "block_size", "dspark_config-only"),
        "where the draft checkpoint states its block size (dspark_config-only: only in the "
        "dspark_config sub-dict, a key SGLang does not read for it)"),
    "target": (lambda c: c.get("target"), ("llama", "qwen2", "qwen3", "dsa", "grok"),
               "the target model's family"),
    "target_defaults": (lambda c: "wide-tree" if c.get("target") in WIDE_TREE_TARGETS else "chain",
                        ("wide-tree", "chain"),
                        "SGLang's default for the target: (5, 4, 8) for Llama and Grok, else (3, 1, 4)"),
    "hisparse": (_flag("hisparse"), (False, True), "--enable-hisparse"),
    "hisparse_swap": (_hisparse_swap, ("off", "within", "outside", "unknown"),
                      "with HiSparse on, whether the draft tokens run (given, else the block, a "
                      "chain's steps + 1 or the target's default) are within the swap's 2-4"),
    "radix_cache": (lambda c: not c.get("disable_radix_cache"), (False, True),
                    "the radix cache on (no --disable-radix-cache)"),
    "mixed_chunk": (_flag("mixed_chunk"), (False, True), "--enable-mixed-chunk"),
    "adaptive": (_flag("adaptive"), (False, True), "--speculative-adaptive"),
    "ngram_flags": (ngram_flags, ("unset", "valid", "zero"),
                    "SGLang's --speculative-ngram-max-bfs-breadth/-max-trie-depth/-match-type: "
                    "none given, all in range, or a breadth or trie depth of 0"),
    "ngram_breadth": (ngram_breadth, ("n/a", "one", "wide"),
                      "SGLang NGRAM: --speculative-ngram-max-bfs-breadth 1, or wider (10 unset)"),
    "ngram_steps": (ngram_steps, ("n/a", "unset", "drafts", "other"),
                    "SGLang NGRAM: --speculative-num-steps unset, draft tokens - 1, or another"),
    "vllm_options": (vllm_options, ("unset", "in-range", "out-of-range"),
                     "vLLM's prompt_lookup_* / suffix_decoding_* keys (but max_cached_requests): "
                     "none given, all within vLLM's ranges, or one outside them"),
    "suffix_k": (suffix_k, ("n/a", "unset", "within", "beyond"),
                 "vLLM suffix: num_speculative_tokens unset, within or beyond "
                 "suffix_decoding_max_tree_depth (24 by default)"),
    "suffix_cache": (suffix_cache, ("unset", "disabled", "negative", "limited"),
                     "vLLM suffix_decoding_max_cached_requests: unset, 0, below 0, or above 0"),
}


def conditions_of(case: Mapping[str, Any]) -> dict[str, Any]:
    """Every condition's value for `case`."""
    return {name: get(case) for name, (get, _, _) in CONDITIONS.items()}


def row_problems(row: Mapping[str, Any]) -> list[str]:
    """What is wrong with a row's shape: an empty `when`, an unknown condition or value."""
    when = row.get("when") or {}
    found = [] if when else [f"{row.get('id')}: empty 'when' (a row must state its conditions)"]
    for name, accepted in when.items():
        if name not in CONDITIONS:
            found.append(f"{row.get('id')}: unknown condition {name!r} (known: {', '.join(CONDITIONS)})")
            continue
        if not accepted:
            found.append(f"{row.get('id')}: condition {name!r} accepts nothing")
        domain = CONDITIONS[name][1]
        found += [f"{row.get('id')}: {name}={v!r} is not one of {list(domain)}"
                  for v in accepted if v not in domain]
    kinds = kinds_of(row)
    if not kinds or any(class_of(k) not in CLASSES or class_of(k) in AGREEING for k in kinds):
        found.append(f"{row.get('id')}: kind {row.get('kind')!r} is not a difference")
    return found


def kinds_of(row: Mapping[str, Any]) -> tuple[str, ...]:
    """The kinds a row covers: its `kind`, one string or a list (codes reported together)."""
    kind = row.get("kind", "")
    return (kind,) if isinstance(kind, str) else tuple(kind)


def matches(row: Mapping[str, Any], case: Mapping[str, Any]) -> bool:
    """Whether the case's facts satisfy every condition of the row (False for an empty `when`)."""
    when = row.get("when") or {}
    if not when:
        return False
    values = conditions_of(case)
    return all(name in values and values[name] in accepted for name, accepted in when.items())


# ---------------------------------------------------------------------- the audit
def audit(
    framework: str, entries: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Judge every entry (``id``, ``case`` facts, ``kind``) against `framework`'s rows.

    Returns the count per class, ``covered`` (entry id -> row id), and what fails:
    ``undocumented`` (a difference no row covers), ``stale`` (rows covering nothing),
    ``miscounted`` (rows covering another number of cases than their ``cases``),
    ``overbroad`` (rows whose conditions hold for a case of another kind), ``overlapping``
    (cases two rows cover) and ``malformed`` (`row_problems`).
    """
    mine = [r for r in rows if r["framework"] == framework]
    malformed = [p for r in mine for p in row_problems(r)]
    counts = Counter(class_of(e["kind"]) for e in entries)
    covered: dict[str, str] = {}
    hits: dict[str, list[str]] = {r["id"]: [] for r in mine}
    wrong_kind: dict[str, list[str]] = {r["id"]: [] for r in mine}
    undocumented, overlapping = [], []
    for entry in entries:
        matching = [r for r in mine if matches(r, entry["case"])]
        for r in matching:
            (hits if entry["kind"] in kinds_of(r) else wrong_kind)[r["id"]].append(entry["id"])
        right = [r["id"] for r in matching if entry["kind"] in kinds_of(r)]
        if len(right) > 1:
            overlapping.append({"case": entry["id"], "rows": right})
        if right:
            covered[entry["id"]] = right[0]
        elif class_of(entry["kind"]) not in AGREEING:
            undocumented.append({"case": entry["id"], "kind": entry["kind"]})
    return {
        "cases": len(entries),
        "counts": {name: counts.get(name, 0) for name in CLASSES},
        "documented": len(covered),
        "covered": covered,
        "undocumented": undocumented,
        "stale": [rid for rid, ids in hits.items() if not ids],
        "miscounted": [{"row": r["id"], "states": r.get("cases"), "covers": len(hits[r["id"]])}
                       for r in mine if hits[r["id"]] and r.get("cases") != len(hits[r["id"]])],
        "overbroad": [{"row": rid, "other_kind_cases": ids[:5], "count": len(ids)}
                      for rid, ids in wrong_kind.items() if ids],
        "overlapping": overlapping,
        "malformed": malformed,
    }


FAILURES = ("undocumented", "stale", "miscounted", "overbroad", "overlapping", "malformed")


def failures(report: Mapping[str, Any]) -> dict[str, Any]:
    """The non-empty failure lists of an `audit` report."""
    return {name: report[name] for name in FAILURES if report[name]}


def summary(report: Mapping[str, Any]) -> dict[str, int]:
    """One framework's line of the parity report."""
    counts = report["counts"]
    return {"cases": report["cases"], "same values": counts["same"],
            "both refuse": counts["both-refuse"], "rescued": counts["rescued"],
            "stricter": counts["stricter"], "looser": counts["looser"],
            "values differ": counts["values"], "undocumented": len(report["undocumented"])}


# ---------------------------------------------------------------------- table and pages
def load_table(path: Path = TABLE) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["rows"])


def load_snapshot(framework: str, folder: Path = SNAPSHOT_DIR) -> dict[str, Any] | None:
    """A framework's committed parity snapshot (None when the folder has none)."""
    path = folder / f"{framework}.json"
    return json.loads(path.read_text()) if path.exists() else None


def entries_of(snapshot: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"id": cid, "case": e["case"], "kind": e["kind"]} for cid, e in snapshot["cases"].items()]
