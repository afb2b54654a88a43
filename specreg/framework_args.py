"""Translates SGLang's server flags and vLLM's speculative-config dict into `SpecConfig` fields.

SGLang spells the speculative config as ServerArgs fields (`--speculative-num-steps` is
`speculative_num_steps`) and vLLM as a dict (`method`, `num_speculative_tokens`, `model`). This
module maps both onto specreg's fields the way the frameworks read them: model-dependent
defaults from the target's config.json, draft checkpoints read from a model folder, the block-size
flags, HiSparse switches, and SGLang's silent rewrite of draft tokens to steps + 1 under topk 1
(adopted, with a coded notice). Flags specreg once invented stay as aliases with a notice.
Imports neither torch nor triton.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import attrs

from specreg.errors import ConfigError, Problem, problem
from specreg.integers import is_int

#: SGLang ServerArgs fields specreg reads (flag = "--" + name with "-" for "_").
SGLANG_FIELDS: tuple[str, ...] = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
    "speculative_dspark_block_size",
    "speculative_dflash_block_size",
    "enable_hisparse",
    "hisparse_config",
    "model_path",
    "disable_radix_cache",
    "enable_mixed_chunk",
    "speculative_adaptive",
)
#: vLLM speculative-config keys specreg reads.
VLLM_FIELDS: tuple[str, ...] = ("method", "num_speculative_tokens", "model")
#: Spellings specreg invented, kept as aliases: key -> (SpecConfig field, the real flag).
INVENTED: Mapping[str, tuple[str, str]] = {
    "speculative_draft_config": ("draft_config", "--speculative-draft-model-path FOLDER"),
    "kv_cache": ("cache", "--enable-hisparse"),
}
#: Architectures whose EAGLE-family defaults are (5, 4, 8) in SGLang 0.5.23; every other is (3, 1, 4).
WIDE_TREE_ARCHITECTURES = frozenset({"LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"})
WIDE_TREE_DEFAULTS = (5, 4, 8)
CHAIN_DEFAULTS = (3, 1, 4)
EAGLE_FAMILY = frozenset({"eagle", "eagle3", "nextn"})
VLLM_METHODS: Mapping[str, str] = {"mtp": "nextn", "deepseek_mtp": "nextn"}
#: DeepSeek sparse-attention targets (SGLang's is_deepseek_dsa), DeepSeek V4 and MiniMax M3.
DSA_ARCHITECTURES = frozenset(
    {
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "DeepseekV3ForCausalLMNextN",
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
        "GlmMoeDsaForCausalLM",
        "GlmMoeDsaForCausalLMNextN",
        "DeepseekV4ForCausalLM",
        "MiniMaxM3ForCausalLM",
    }
)


def key_of(raw: object) -> str:
    """`--speculative-num-steps`, `speculative-num-steps` and `speculative_num_steps` alike."""
    return str(raw).lstrip("-").replace("-", "_")


def is_framework_key(raw: object) -> bool:
    key = key_of(raw)
    return key in SGLANG_FIELDS or key in VLLM_FIELDS or key in INVENTED


@attrs.frozen(kw_only=True)
class Translation:
    """SpecConfig fields from framework spellings, the notices printed, and framework facts."""

    fields: dict[str, Any]
    notices: tuple[Problem, ...]
    problems: tuple[Problem, ...]
    framework: dict[str, Any]


def read_model_config(path: Any, flag: str) -> tuple[dict[str, Any] | None, Problem | None]:
    """A checkpoint folder's (or a file's) config.json; SR160 naming the path when it has none."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if text is None:
        return None, problem(
            "SR160", f"{flag} must be a path, got {path!r}",
            accepted="a local checkpoint folder holding config.json",
            fix=f"pass {flag} FOLDER", field=key_of(flag),
        )
    file = os.path.join(text, "config.json") if os.path.isdir(text) else text
    try:
        with open(file, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        reason = "no such file" if isinstance(exc, FileNotFoundError) else str(exc)
        return None, problem(
            "SR160", f"{flag} {text!r}: cannot read {file!r} ({reason})",
            accepted="a local checkpoint folder holding a readable config.json",
            fix=f"point {flag} at the checkpoint folder that holds config.json "
            "(download it first; specreg never fetches from a hub)",
            field=key_of(flag),
        )
    if not isinstance(data, dict):
        return None, problem(
            "SR160", f"{flag} {text!r}: {file!r} holds a JSON {type(data).__name__}, not an object",
            accepted="a config.json whose top level is an object",
            fix=f"point {flag} at the checkpoint's config.json", field=key_of(flag),
        )
    return data, None


def architecture(model_config: Mapping[str, Any] | None) -> str | None:
    archs = (model_config or {}).get("architectures") or []
    return str(archs[0]) if isinstance(archs, list) and archs else None


def model_defaults(arch: str | None) -> tuple[int, int, int]:
    """SGLang's (num_steps, topk, num_draft_tokens) for an EAGLE-family draft of this target."""
    return WIDE_TREE_DEFAULTS if arch in WIDE_TREE_ARCHITECTURES else CHAIN_DEFAULTS


def _as_int(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return value


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def translate(data: Mapping[str, Any]) -> Translation:
    """Map the framework keys of `data` (others are ignored) onto SpecConfig fields."""
    raw = {key_of(k): v for k, v in data.items() if is_framework_key(k)}
    fields: dict[str, Any] = {}
    notices: list[Problem] = []
    problems: list[Problem] = []
    framework: dict[str, Any] = {}
    _invented(raw, fields, notices)
    if any(k in raw for k in VLLM_FIELDS):
        _vllm(raw, fields, problems, framework)
    _sglang(raw, data, fields, notices, problems, framework)
    return Translation(
        fields=fields, notices=tuple(notices), problems=tuple(problems), framework=framework
    )


def _invented(raw: dict[str, Any], fields: dict[str, Any], notices: list[Problem]) -> None:
    for key, (field, real) in INVENTED.items():
        if key not in raw:
            continue
        fields[field] = raw[key]
        notices.append(
            problem(
                "SR161", f"--{key.replace('_', '-')} is specreg's own spelling; SGLang has no such flag",
                accepted=real, fix=f"use {real}", field=field, severity="warning",
            )
        )


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
    for key, field in (
        ("speculative_algorithm", "algorithm"),
        ("speculative_num_steps", "num_steps"),
        ("speculative_eagle_topk", "topk"),
        ("speculative_num_draft_tokens", "num_draft_tokens"),
    ):
        if raw.get(key) is not None:
            fields[field] = _as_int(raw[key]) if field != "algorithm" else raw[key]
    algorithm = str(fields.get("algorithm", given.get("algorithm", ""))).strip().lower()
    target = None
    if raw.get("model_path") is not None:
        target, prob = read_model_config(raw["model_path"], "--model-path")
        problems.extend([prob] if prob else [])
        framework["target_architecture"] = architecture(target)
        framework["index_topk"] = (target or {}).get("index_topk")
    draft_path = raw.get("speculative_draft_model_path")
    if draft_path is not None:
        flag = framework.pop("draft_flag", "--speculative-draft-model-path")
        draft, prob = read_model_config(draft_path, flag)
        problems.extend([prob] if prob else [])
        if draft is not None:
            fields["draft_config"] = draft
    elif algorithm in ("dspark",) and target is not None and "draft_config" not in fields:
        fields["draft_config"] = target  # a draft head bundled in the target checkpoint
    _block_sizes(raw, fields, problems, algorithm)
    sglang_spelled = any(k in raw for k in SGLANG_FIELDS)
    for key in ("disable_radix_cache", "enable_mixed_chunk", "speculative_adaptive", "enable_hisparse"):
        if key in raw:
            framework[key] = _as_bool(raw[key])
    if framework.get("enable_hisparse"):
        options = _hisparse_options(raw.get("hisparse_config"), problems)
        framework["hisparse_config"] = options
        fields.setdefault("cache", "hisparse")
        known = {k: v for k, v in options.items() if k in ("top_k", "hot_size", "req_slots")}
        if known:
            fields.setdefault("cache_options", known)
    if algorithm in EAGLE_FAMILY and sglang_spelled and not framework.get("speculative_adaptive"):
        _eagle_defaults(fields, given, notices, framework.get("target_architecture"))


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
    fields: dict[str, Any], given: Mapping[str, Any], notices: list[Problem], arch: str | None
) -> None:
    steps, topk, draft = (
        fields.get(k, given.get(k)) for k in ("num_steps", "topk", "num_draft_tokens")
    )
    if steps is None and topk is None and draft is None:
        fields["num_steps"], fields["topk"], fields["num_draft_tokens"] = model_defaults(arch)
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


def hisparse_runtime_problems(
    framework: Mapping[str, Any], topk: int, num_draft_tokens: int
) -> list[Problem]:
    """SGLang's HiSparse rules that its runtime (swap manager, hooks) enforces, as coded problems."""
    if not framework.get("enable_hisparse"):
        return []
    out: list[Problem] = []
    arch = framework.get("target_architecture")
    sparse = framework.get("target_is_sparse")  # SGLang's own answer, inside SGLang
    if arch is not None and (arch not in DSA_ARCHITECTURES if sparse is None else not sparse):
        out.append(problem(
            "SR169", f"--enable-hisparse needs a DSA target; --model-path is a {arch}",
            accepted="DeepSeek V3.2 / GLM-5 (DSA), DeepSeek V4, MiniMax M3",
            fix="use a DSA --model-path, or drop --enable-hisparse", field="model_path",
        ))
    if not framework.get("disable_radix_cache"):
        out.append(problem(
            "SR170", "--enable-hisparse requires --disable-radix-cache",
            accepted="--disable-radix-cache", fix="add --disable-radix-cache", field="disable_radix_cache",
        ))
    if topk != 1:
        out.append(problem(
            "SR171", f"--enable-hisparse supports linear speculation only; topk is {topk}",
            accepted="--speculative-eagle-topk 1", fix="set --speculative-eagle-topk 1", field="topk",
        ))
    if framework.get("speculative_adaptive"):
        out.append(problem(
            "SR172", "--enable-hisparse sizes swap state statically; --speculative-adaptive is on",
            accepted="no --speculative-adaptive", fix="drop --speculative-adaptive",
            field="speculative_adaptive",
        ))
    if framework.get("enable_mixed_chunk"):
        out.append(problem(
            "SR173", "--enable-hisparse does not support --enable-mixed-chunk",
            accepted="no --enable-mixed-chunk", fix="drop --enable-mixed-chunk", field="enable_mixed_chunk",
        ))
    if not 2 <= num_draft_tokens <= 4:
        out.append(problem(
            "SR167",
            f"SGLang's HiSparse swap manager takes 2-4 draft tokens; the plan verifies "
            f"{num_draft_tokens} (SGLang would fail after loading the weights)",
            accepted="2 <= draft tokens <= 4",
            fix="set --speculative-num-steps 3 with --speculative-eagle-topk 1 (4 draft tokens), "
            "or fewer",
            field="num_draft_tokens",
        ))
    top_k = (framework.get("hisparse_config") or {}).get("top_k") or framework.get("index_topk") or 2048
    if is_int(top_k) and (top_k < 1024 or num_draft_tokens * top_k > 8192):
        out.append(problem(
            "SR168",
            f"SGLang's HiSparse swap needs top_k >= 1024 and draft tokens x top_k <= 8192; "
            f"got {num_draft_tokens} x {top_k} = {num_draft_tokens * top_k}",
            accepted="top_k >= 1024 and draft tokens x top_k <= 8192",
            fix="lower --speculative-num-draft-tokens or the top_k in --hisparse-config",
            field="num_draft_tokens",
        ))
    return out


def raise_problems(problems: list[Problem]) -> None:
    errors = [p for p in problems if p.is_error]
    if errors:
        raise ConfigError(errors)


def framework_findings(registry: Any, data: Mapping[str, Any]) -> list[Problem]:
    """The translation's notices plus SGLang's HiSparse runtime rules for the resolved plan.

    Problems the registry itself reports (bad values, unknown names) are not repeated here.
    """
    from specreg.config import SpecConfig
    from specreg.errors import SpecRegError

    try:
        config = SpecConfig.from_dict(data)
    except SpecRegError:
        return []
    found = list(config.notices)
    if config.framework.get("enable_hisparse"):
        try:
            plan = registry.resolve(config)
        except SpecRegError:
            return found
        found += hisparse_runtime_problems(
            config.framework, plan.config.topk or 1, plan.num_tokens_per_req("target_verify")
        )
    return found
