"""The flags `specreg check` and `specreg plan` share, and how they become a config mapping.

The speculative-config flags are SGLang's spellings (from `specreg.contract.framework_flags`) plus
specreg's own (`--kv-cache-option`, `--speculative-candidate-steps`, `--config FILE`); every
problem with a flag's value is coded (SR143, SR108) and worded in flags. Imports neither torch
nor triton.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from specreg.contract.config import load_json_object
from specreg.errors import ConfigError, Problem, problem
from specreg.contract.framework_flags import COMMAND_LINE
from specreg.integers import is_int

if TYPE_CHECKING:
    from specreg.contract.substitutions import Substitution


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("speculative config (SGLang flag spellings)")
    for flag in COMMAND_LINE:
        if flag.switch:
            group.add_argument(flag.flag, dest=flag.key, action="store_true", default=None)
        else:
            group.add_argument(flag.flag, dest=flag.key, default=None, metavar=flag.key.upper())
    group.add_argument(
        "--kv-cache-option",
        dest="cache_option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the KV-cache backend; repeatable",
    )
    group.add_argument(
        "--speculative-candidate-steps",
        dest="candidate_steps",
        default=None,
        metavar="S1,S2,...",
        help="adaptive speculation: widths cover every candidate step count",
    )
    group.add_argument(
        "--substitute",
        dest="substitutions",
        default=None,
        metavar="NAME[,NAME]",
        help="runtime substitutions the framework process runs (specreg.contract.substitutions), as "
        "SPECREG_SGLANG_SUBSTITUTE / SPECREG_VLLM_SUBSTITUTE set them",
    )
    group.add_argument(
        "--config", dest="config_file", default=None, metavar="FILE", help="a JSON config file"
    )


def add_budget_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--memory-budget", default=None, metavar="SIZE",
        help="device memory the plan may use, e.g. 16GiB; exit 1 (SR145) beyond it",
    )
    parser.add_argument(
        "--host-memory-budget", default=None, metavar="SIZE",
        help="host memory the plan may use, e.g. 64GiB; exit 1 (SR145) beyond it",
    )


def _coerce(value: str) -> Any:
    """Integers where the text is an integer; booleans for true/false; text otherwise."""
    text = value.strip()
    with contextlib.suppress(ValueError):
        return int(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def config_from_args(
    args: argparse.Namespace, substitutions: Mapping[str, Substitution]
) -> dict[str, Any]:
    """Merge --config FILE with the flags (flags win) into a SpecConfig mapping."""
    data, problems = parse_config_flags(args, substitutions)
    if problems:
        raise ConfigError(problems)
    return data


def parse_config_flags(
    args: argparse.Namespace, substitutions: Mapping[str, Substitution]
) -> tuple[dict[str, Any], list[Problem]]:
    """The SpecConfig mapping the flags give, and every problem with the flags themselves
    (worded in flags), so a command can report them together with the config's problems.
    `substitutions` are the registry's (`registry.substitutions()`), which --substitute names."""
    data: dict[str, Any] = {}
    problems: list[Problem] = []
    if args.config_file:
        try:
            data.update(load_json_object(args.config_file, flag="--config"))
        except ConfigError as exc:
            problems += exc.problems
    for flag in COMMAND_LINE:
        value = getattr(args, flag.key)
        if value is None or (flag.switch and not value):
            continue
        if flag.integer:
            value = _coerce(value)
            if not is_int(value):
                problems.append(whole_number_problem(flag.flag, value, flag.key))
                continue
        data[flag.key] = value
    options = dict(data.get("cache_options") or {})
    for item in args.cache_option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(
                problem(
                    "SR108",
                    f"--kv-cache-option {item!r} is not KEY=VALUE",
                    accepted="KEY=VALUE, e.g. hot_size=4096",
                    fix="write the option as KEY=VALUE",
                    field="cache_options",
                )
            )
            continue
        options[key.strip()] = _coerce(value)
    if options:
        data["cache_options"] = options
    if args.candidate_steps is not None:
        data["candidate_steps"] = [_coerce(s) for s in args.candidate_steps.split(",") if s.strip()]
    if args.substitutions is not None:
        from specreg.contract.substitutions import parse

        names, found = parse(args.substitutions, substitutions, flag="--substitute")
        problems += found  # reported once, here; the config gets the known names only
        data["substitutions"] = [n for n in names if n in substitutions]
    return data, problems


def whole_number_problem(flag: str, value: Any, field: str | None = None) -> Problem:
    """SR143: an integer flag got something else; the advice is a command line."""
    return problem(
        "SR143",
        f"{flag} takes a whole number, got {value!r}",
        accepted=f"an integer, e.g. {flag} 3, or leave the flag out to infer it",
        fix=f"pass a whole number to {flag}",
        field=field or flag,
    )


def memory_budgets(args: argparse.Namespace) -> tuple[int | None, int | None, list[Problem]]:
    """--memory-budget and --host-memory-budget in bytes, and SR143 for unreadable sizes."""
    from specreg.contract.memory import parse_size

    budgets: list[int | None] = []
    problems: list[Problem] = []
    for flag, text in (("--memory-budget", args.memory_budget),
                       ("--host-memory-budget", args.host_memory_budget)):
        size = None if text is None else parse_size(text)
        if text is not None and size is None:
            problems.append(
                problem(
                    "SR143",
                    f"{flag} takes a size, got {text!r}",
                    accepted="bytes, or a number with a unit: 80GB, 16GiB, 512MiB",
                    fix=f"pass e.g. {flag} 16GiB",
                    field=flag,
                )
            )
        budgets.append(size)
    return budgets[0], budgets[1], problems
