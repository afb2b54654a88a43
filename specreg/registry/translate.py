"""Translates SGLang's server flags and vLLM's speculative-config dict into a `SpecConfig`.

The frameworks' own reading is kept: model-dependent defaults from the target's config.json,
draft checkpoints read from a model folder, the block-size flags, the HiSparse switches, and
SGLang's silent rewrite of draft tokens to steps + 1 under topk 1 (adopted, with a coded notice;
STANDALONE follows the EAGLE family's number rules, as SGLang runs it on the EAGLE worker), and
SGLang's NGRAM reading (a breadth-first tree of --speculative-num-draft-tokens nodes, 12 by
default, from --speculative-ngram-* options; steps and topk, which its worker never reads, are
dropped with a coded notice). Flags specreg once invented stay as aliases with a notice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import attrs

from specreg.contract.acceptance_rules import acceptance_fields
from specreg.contract.config import SpecConfig
from specreg.errors import ConfigError, Problem, problem
from specreg.contract.framework_flags import (
    ALIASES,
    DRAFTER_OPTIONS,
    SGLANG,
    SGLANG_FIELDS,
    SPECREG,
    VLLM_FIELDS,
    is_framework_key,
    key_of,
)
from specreg.framework_args.model_config import architecture, read_model_config, vocab_size
from specreg.framework_args.rules import EAGLE_FAMILY, VLLM_METHODS, model_defaults
from specreg.integers import is_int


@attrs.frozen(kw_only=True)
class Translation:
    """SpecConfig fields from framework spellings, the notices printed, and framework facts."""

    fields: dict[str, Any]
    notices: tuple[Problem, ...]
    problems: tuple[Problem, ...]
    framework: dict[str, Any]


def config_from_flags(data: Mapping[str, Any]) -> SpecConfig:
    """A `SpecConfig` from SGLang flags, a vLLM speculative-config dict or SpecConfig fields
    (mixed freely; a framework spelling wins over the field it sets). Raises one `ConfigError`
    with every problem: the translation's and the config's."""
    if not isinstance(data, Mapping):
        return SpecConfig.from_dict(data)  # SR104, worded for a non-mapping
    translation = translate(data)
    own = {k: v for k, v in data.items() if not is_framework_key(k)}
    problems = list(translation.problems)
    try:
        config = SpecConfig.from_dict({**own, **translation.fields})
    except ConfigError as exc:
        problems += exc.problems
    if problems:
        raise ConfigError(problems)
    return attrs.evolve(config, notices=translation.notices, framework=translation.framework)


def translate(data: Mapping[str, Any]) -> Translation:
    """Map the framework keys of `data` (others are ignored) onto SpecConfig fields."""
    raw = {key_of(k): v for k, v in data.items() if is_framework_key(k)}
    fields: dict[str, Any] = {}
    notices: list[Problem] = []
    problems: list[Problem] = []
    framework: dict[str, Any] = {}
    _aliases(raw, fields, notices)
    for flag in SPECREG:
        if flag.field is not None and raw.get(flag.key) is not None:
            fields[flag.field] = raw[flag.key]
    if any(k in raw for k in VLLM_FIELDS):
        _vllm(raw, fields, problems, framework)
    _sglang(raw, data, fields, notices, problems, framework)
    acceptance_fields(raw, fields, data.get("acceptance"))
    options = {k: raw[k] for k in DRAFTER_OPTIONS if raw.get(k) is not None}
    given = fields.get("draft_config", data.get("draft_config"))
    if framework.pop("sglang_ngram", False):
        named = {key_of(k) for k in (*options, *(given if isinstance(given, Mapping) else ()))}
        options = {spellings[0]: value for spellings, value in SGLANG_NGRAM_OPTIONS
                   if named.isdisjoint(spellings)} | options
    if options:
        fields["draft_config"] = {**(given if isinstance(given, Mapping) else {}), **options}
    return Translation(
        fields=fields, notices=tuple(notices), problems=tuple(problems), framework=framework
    )


def _aliases(raw: dict[str, Any], fields: dict[str, Any], notices: list[Problem]) -> None:
    for alias in ALIASES:
        if alias.key not in raw:
            continue
        assert alias.field is not None and alias.real is not None
        if alias.key == "kv_cache" and _means_none(raw[alias.key]):
            fields["cache"] = None  # no KV-cache backend, as SGLang without --enable-hisparse
            continue
        fields[alias.field] = raw[alias.key]
        notices.append(_alias_notice(alias.flag, alias.real, alias.field, raw[alias.key]))


def _alias_notice(flag: str, real: str, field: str | None, value: Any) -> Problem:
    """SR161 for specreg's own spelling of a flag; for --kv-cache hisparse, the deliberate
    difference from SGLang's --enable-hisparse: the HiSparse runtime rules are SGLang's."""
    text, fix = f"{flag} is specreg's own spelling; SGLang has no such flag", f"use {real}"
    if flag == "--kv-cache" and str(value).strip().lower() == "hisparse":
        real += " --disable-radix-cache"
        text += (": --kv-cache hisparse configures specreg's HiSparse swapper alone, so SGLang's "
                 "HiSparse runtime rules (SR167-SR173: linear speculation, 2-4 draft tokens, "
                 "...) are not checked")
        fix = (f"use {real} to check the config against SGLang's runtime; keep --kv-cache "
               "hisparse for specreg's swapper outside SGLang")
    return problem("SR161", text, accepted=real, fix=fix, field=field, severity="warning")


def _as_int(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return value


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _vllm(
    raw: dict[str, Any], fields: dict[str, Any], problems: list[Problem], framework: dict[str, Any]
) -> None:
    framework["framework"] = "vllm"
    method = raw.get("method")
    if method is not None:
        if not isinstance(method, str) or not method.strip():
            problems.append(problem(
                "SR174", f"vLLM method must be a non-empty string, got {method!r}",
                accepted="a method name such as eagle, eagle3, dspark, dflash, ngram",
                fix="set 'method' in the speculative config", field="method",
            ))
        else:
            name = method.strip().lower()
            fields["algorithm"] = VLLM_METHODS.get(name, name)
    k = _as_int(raw.get("num_speculative_tokens"))
    if k is not None:
        if is_int(k) and k >= 1:
            fields["num_draft_tokens"] = k + 1
            if fields.get("algorithm") in EAGLE_FAMILY:  # vLLM's EAGLE drafts a chain of k steps
                fields["num_steps"], fields["topk"] = k, 1
        else:
            problems.append(problem(
                "SR174", f"vLLM num_speculative_tokens must be an integer >= 1, got {k!r}",
                accepted="an integer >= 1 (k = gamma; the verify width is k + 1), or unset",
                fix="set 'num_speculative_tokens' to the number of tokens to draft",
                field="num_speculative_tokens",
            ))
    if raw.get("model") is not None:
        raw.setdefault("speculative_draft_model_path", raw["model"])
        framework["draft_flag"] = "the speculative config's 'model'"


def _sglang(
    raw: dict[str, Any],
    given: Mapping[str, Any],
    fields: dict[str, Any],
    notices: list[Problem],
    problems: list[Problem],
    framework: dict[str, Any],
) -> None:
    for flag in SGLANG:
        if flag.field is not None and raw.get(flag.key) is not None:
            fields[flag.field] = _as_int(raw[flag.key]) if flag.integer else raw[flag.key]
    algorithm = str(fields.get("algorithm", given.get("algorithm", ""))).strip().lower()
    target = None
    if raw.get("model_path") is not None:
        target, prob = read_model_config(raw["model_path"], "--model-path")
        problems.extend([prob] if prob else [])
        framework["target_architecture"] = architecture(target)
        framework["index_topk"] = (target or {}).get("index_topk")
        framework["target_vocab_size"] = vocab_size(target)
    draft_path = raw.get("speculative_draft_model_path")
    if draft_path is not None:
        flag = framework.pop("draft_flag", "--speculative-draft-model-path")
        draft, prob = read_model_config(draft_path, flag)
        problems.extend([prob] if prob else [])
        if draft is not None:
            fields["draft_config"] = draft
    elif (
        algorithm in BLOCK_DRAFTERS
        and "algorithm" in fields  # named by a framework flag, so read as the framework reads it
        and "draft_config" not in fields
        and given.get("draft_config") is None
    ):
        found = _target_draft(algorithm, raw.get("model_path"), target)
        if found is not None:
            fields["draft_config"] = found
        else:
            # the config stands without it (defaults), so every other problem is found too
            notices.append(_no_draft_problem(algorithm, framework.get("framework") == "vllm"))
    _block_sizes(raw, fields, problems, algorithm)
    sglang_spelled = any(k in raw for k in SGLANG_FIELDS)
    for flag in SGLANG:
        if flag.switch and flag.key in raw:
            framework[flag.key] = _as_bool(raw[flag.key])
    if framework.get("enable_hisparse") and "kv_cache" in raw:
        named = str(raw["kv_cache"]).strip().lower()
        if named != "hisparse":
            problems.append(_cache_conflict(raw["kv_cache"]))
    if framework.get("enable_hisparse"):
        options = _hisparse_options(raw.get("hisparse_config"), problems)
        framework["hisparse_config"] = options
        fields.setdefault("cache", "hisparse")
        known = {k: v for k, v in options.items() if k in ("top_k", "hot_size", "req_slots")}
        if known:
            fields.setdefault("cache_options", known)
    if (
        algorithm in EAGLE_FAMILY | {"standalone"}
        and sglang_spelled
        and not framework.get("speculative_adaptive")
    ):
        _eagle_defaults(fields, given, notices, framework.get("target_architecture"), algorithm)
    if algorithm == "ngram" and "speculative_algorithm" in raw:
        _sglang_ngram(raw, fields, notices)
        framework["sglang_ngram"] = True


#: SGLang 0.5.23's NGRAM: a breadth-first tree (its trie), matches of any length up to the trie
#: depth (18), merging up to 10 matches; --speculative-ngram-* flags override these.
#: Each: (the option's spellings, SGLang's value); set only where no spelling of it is given.
SGLANG_NGRAM_OPTIONS: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("proposals",), "tree"),
    (("min_ngram", "prompt_lookup_min"), 1),
    (("speculative_ngram_max_trie_depth", "max_ngram", "prompt_lookup_max"), 18),
    (("speculative_ngram_max_bfs_breadth", "max_bfs_breadth"), 10),
)
#: SGLang's NGRAM default tree size (the root, the last verified token, included).
SGLANG_NGRAM_DRAFT_TOKENS = 12


def _sglang_ngram(raw: dict[str, Any], fields: dict[str, Any], notices: list[Problem]) -> None:
    """SGLang's NGRAM verifies a tree of --speculative-num-draft-tokens nodes (12 by default);
    it overwrites topk with --speculative-ngram-max-bfs-breadth and never reads the steps, so
    specreg drops both (SR185) and drafts num_draft_tokens - 1 nodes."""
    dropped = [f"--{key.replace('_', '-')} {raw[key]}" for key in
               ("speculative_num_steps", "speculative_eagle_topk") if raw.get(key) is not None]
    fields.pop("num_steps", None)
    fields.pop("topk", None)
    draft = fields.get("num_draft_tokens")
    if draft is None:
        fields["num_draft_tokens"] = SGLANG_NGRAM_DRAFT_TOKENS
    if dropped:
        notices.append(problem(
            "SR185",
            f"SGLang's NGRAM sizes its tree by --speculative-num-draft-tokens only: "
            f"{' and '.join(dropped)} ignored, as SGLang ignores them",
            accepted="--speculative-num-draft-tokens N (the tree's nodes, root included) and "
            "--speculative-ngram-max-bfs-breadth",
            fix="drop --speculative-num-steps and --speculative-eagle-topk for NGRAM",
            field="num_steps", severity="warning",
        ))


def _block_sizes(
    raw: dict[str, Any], fields: dict[str, Any], problems: list[Problem], algorithm: str
) -> None:
    for key, algo, extra in (
        ("speculative_dspark_block_size", "dspark", 1),
        ("speculative_dflash_block_size", "dflash", 0),
    ):
        size = _as_int(raw.get(key))
        if size is None or algorithm != algo:
            continue
        flag = "--" + key.replace("_", "-")
        if not is_int(size) or size < 1:
            problems.append(problem(
                "SR177", f"{flag} must be a positive integer, got {size!r}",
                accepted="an integer >= 1", fix=f"set {flag} to the draft block size",
                field="num_draft_tokens",
            ))
            continue
        if algo == "dspark" and isinstance(fields.get("draft_config"), Mapping):
            # As in SGLang, the flag wins over the checkpoint's block size (gamma).
            fields["draft_config"] = {**fields["draft_config"], "dspark_block_size": size}
        given = fields.get("num_draft_tokens")
        if given is not None and given != size + extra:
            problems.append(problem(
                "SR177",
                f"{flag} {size} means {size + extra} draft tokens, but "
                f"--speculative-num-draft-tokens is {given}",
                accepted=f"--speculative-num-draft-tokens {size + extra}, or unset",
                fix="drop --speculative-num-draft-tokens; the block size determines it",
                field="num_draft_tokens",
            ))
            continue
        fields["num_draft_tokens"] = size + extra


def _hisparse_options(value: Any, problems: list[Problem]) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    problems.append(problem(
        "SR174", f"--hisparse-config must be a JSON object, got {value!r}",
        accepted='a JSON object such as {"top_k": 2048}', fix="pass --hisparse-config '{...}'",
        field="hisparse_config",
    ))
    return {}


def _eagle_defaults(
    fields: dict[str, Any], given: Mapping[str, Any], notices: list[Problem], arch: str | None,
    algorithm: str | None = None,
) -> None:
    steps, topk, draft = (
        fields.get(k, given.get(k)) for k in ("num_steps", "topk", "num_draft_tokens")
    )
    if steps is None and topk is None and draft is None:
        defaults = model_defaults(arch, algorithm)
        fields["num_steps"], fields["topk"], fields["num_draft_tokens"] = defaults
        return
    if (
        is_int(steps) and steps >= 1 and topk in (None, 1)
        and draft is not None and draft != steps + 1
    ):
        fields["num_draft_tokens"] = steps + 1
        notices.append(problem(
            "SR162",
            f"topk 1 drafts a chain of {steps} tokens: --speculative-num-draft-tokens {draft} "
            f"is rewritten to {steps + 1}, as SGLang does",
            accepted=f"--speculative-num-draft-tokens {steps + 1} (steps + 1) with topk 1",
            fix="drop --speculative-num-draft-tokens or set it to steps + 1",
            field="num_draft_tokens", severity="warning",
        ))


#: Algorithms that draft with a separate draft checkpoint, which the frameworks require.
BLOCK_DRAFTERS = frozenset({"dspark", "dflash"})
#: Keys on a target's config.json that mark a bundled DSpark draft head (SGLang's
#: `checkpoint_bundles_dspark_draft`).
BUNDLED_DSPARK_KEYS = (
    "dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids",
)


def _target_draft(
    algorithm: str, model_path: Any, target: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """The DSpark draft SGLang finds without --speculative-draft-model-path: one bundled in the
    target checkpoint, or its dspark/ subfolder. None for DFlash, which always needs the flag."""
    if algorithm != "dspark" or target is None:
        return None
    if any(target.get(key) is not None for key in BUNDLED_DSPARK_KEYS):
        return target
    folder = os.path.join(os.fspath(model_path), "dspark")
    if os.path.isfile(os.path.join(folder, "config.json")):
        found, _ = read_model_config(folder, "--model-path")
        return found
    return None


def _no_draft_problem(algorithm: str, vllm: bool) -> Problem:
    flag = "the speculative config's 'model'" if vllm else "--speculative-draft-model-path"
    where = " (nor a draft bundled in --model-path)" if algorithm == "dspark" and not vllm else ""
    return problem(
        "SR178",
        f"{algorithm} drafts with a draft checkpoint, and no {flag} is given{where}",
        accepted=f"{flag} naming the draft checkpoint folder that holds config.json",
        fix=f"set {flag} to the {algorithm} draft checkpoint",
        field="draft_config",
    )


def _means_none(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == "none"


def _cache_conflict(kv_cache: Any) -> Problem:
    """SR179: --kv-cache names another cache (or none) while --enable-hisparse turns HiSparse on."""
    wanted = "no KV-cache backend" if _means_none(kv_cache) else f"the cache {kv_cache!r}"
    return problem(
        "SR179",
        f"--kv-cache {kv_cache} asks for {wanted}, but --enable-hisparse turns HiSparse on",
        accepted="--enable-hisparse alone (HiSparse), --kv-cache NAME alone, or neither (none)",
        fix="drop --kv-cache for HiSparse, or drop --enable-hisparse for "
        + ("no cache" if _means_none(kv_cache) else f"--kv-cache {kv_cache}"),
        field="cache",
    )
