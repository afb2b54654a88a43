"""How a problem names a setting in the words of the framework the user runs.

specreg's messages name SGLang's command-line flags (the CLI takes the same spellings). Under
vLLM a user sets keys of the speculative-config dict instead, where k = `num_speculative_tokens`
is gamma, one less than SGLang's `--speculative-num-draft-tokens`. `in_words` rewrites a
problem's message, accepted values and fix into one framework's words; `error_in_words` does it
for every problem of an error. This table is the one place that knows the spellings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import attrs

from specreg.errors import Problem, SpecRegError

_N = "--speculative-num-draft-tokens"
_K = "num_speculative_tokens"


def _minus_one(match: re.Match[str]) -> str:
    return str(int(match.group(0)) - 1)


def _k_of(text: str) -> str:
    """Every integer in `text`, less one: draft tokens n are k = n - 1 speculative tokens."""
    return re.sub(r"\d+", _minus_one, text)


Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

#: vLLM's words for SGLang's flags, most specific first.
_VLLM_RULES: tuple[Rule, ...] = (
    (re.compile(rf"{_N} (\d+) \(= gamma \+ 1\)"),
     lambda m: f"{_K} {int(m.group(1)) - 1} (= gamma)"),
    (re.compile(rf"{_N} to gamma \+ 1"), lambda m: f"{_K} to gamma"),
    (re.compile(rf"{_N} in \[(\d+), (\d+)\]"),
     lambda m: f"{_K} in [{int(m.group(1)) - 1}, {int(m.group(2)) - 1}]"),
    (re.compile(rf"{_N} (?:(>=|<=|>|<|=) ?)?(\d+)"),
     lambda m: f"{_K} {m.group(1) + ' ' if m.group(1) else ''}{_k_of(m.group(2))}"),
    (re.compile(rf"{_N}\b"), lambda m: _K),
    (re.compile(r"--speculative-num-steps (\d+)"), lambda m: f"{_K} {m.group(1)}"),
    (re.compile(r"--speculative-num-steps\b"), lambda m: _K),
    (re.compile(r"--speculative-eagle-topk \d+"), lambda m: "a chain (vLLM drafts topk 1)"),
    (re.compile(r"--speculative-eagle-topk\b"), lambda m: "topk (vLLM drafts a chain, topk 1)"),
    (re.compile(r"--speculative-draft-model-path(?: FOLDER)?"),
     lambda m: "the speculative config's 'model' (a checkpoint folder)"),
    (re.compile(r"--speculative-algorithm ([A-Za-z0-9_]+)"),
     lambda m: f"'method': '{m.group(1).lower()}'"),
    (re.compile(r"--speculative-algorithm\b"), lambda m: "the speculative config's 'method'"),
    (re.compile(r"--model-path\b"), lambda m: "the target model (EngineArgs model)"),
)

#: Per framework (the adapters' names): the rules that put a message in its words.
FRAMEWORK_RULES: Mapping[str, tuple[Rule, ...]] = {"sglang": (), "cli": (), "vllm": _VLLM_RULES}


def _rewrite(text: str, rules: tuple[Rule, ...]) -> str:
    for pattern, replace in rules:
        text = pattern.sub(replace, text)
    return text


def in_words(found: Problem, framework: str | None) -> Problem:
    """`found` with its message, accepted values and fix in `framework`'s words."""
    rules = FRAMEWORK_RULES.get((framework or "").lower(), ())
    if not rules:
        return found
    return attrs.evolve(
        found,
        message=_rewrite(found.message, rules),
        accepted=_rewrite(found.accepted, rules),
        fix=_rewrite(found.fix, rules),
    )


def error_in_words(exc: SpecRegError, framework: str | None) -> SpecRegError:
    """The same error class with every problem in `framework`'s words (`exc` itself if none
    changes)."""
    problems = tuple(in_words(p, framework) for p in exc.problems)
    if problems == exc.problems:
        return exc
    return type(exc)(problems)
