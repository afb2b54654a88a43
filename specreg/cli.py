"""The `specreg` command line: list, check, plan, explain, demo.

`list`, `check` and `explain` import neither torch nor triton. Exit codes: 0 sound, 1 problems
found (for `list`: a plugin failed to load or SPECREG_PLUGINS names a missing one), 2 usage
errors (an unknown flag is SR142 with the closest flag).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from specreg.config import SGLANG_FLAGS, SGLANG_SWITCHES, load_json_object
from specreg.errors import ConfigError, Problem, SpecRegError, problem, split_problems
from specreg.framework_args import framework_findings
from specreg.integers import is_int

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


# --------------------------------------------------------------------------------- arguments
def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("speculative config (SGLang flag spellings)")
    for flag, key in SGLANG_FLAGS.items():
        group.add_argument(flag, dest=key, default=None, metavar=key.upper())
    for flag in SGLANG_SWITCHES:
        group.add_argument(flag, action="store_true", default=None)
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
        "--config", dest="config_file", default=None, metavar="FILE", help="a JSON config file"
    )


def _add_budget_flags(parser: argparse.ArgumentParser) -> None:
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


def config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Merge --config FILE with the flags (flags win) into a SpecConfig mapping."""
    data, problems = parse_config_flags(args)
    if problems:
        raise ConfigError(problems)
    return data


def parse_config_flags(args: argparse.Namespace) -> tuple[dict[str, Any], list[Problem]]:
    """The SpecConfig mapping the flags give, and every problem with the flags themselves
    (worded in flags), so a command can report them together with the config's problems."""
    data: dict[str, Any] = {}
    problems: list[Problem] = []
    if args.config_file:
        try:
            data.update(load_json_object(args.config_file, flag="--config"))
        except ConfigError as exc:
            problems += exc.problems
    for flag in SGLANG_SWITCHES:
        key = flag.lstrip("-").replace("-", "_")
        if getattr(args, key):
            data[key] = True
    for flag, key in SGLANG_FLAGS.items():
        value = getattr(args, key)
        if value is None:
            continue
        if key.endswith(("_num_steps", "_topk", "_num_draft_tokens", "_block_size")):
            value = _coerce(value)
            if not is_int(value):
                problems.append(whole_number_problem(flag, value, key))
                continue
        data[key] = value
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


def _memory_budgets(args: argparse.Namespace) -> tuple[int | None, int | None, list[Problem]]:
    """--memory-budget and --host-memory-budget in bytes, and SR143 for unreadable sizes."""
    from specreg.memory import parse_size

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


def _memory_problems(registry: Any, data: dict[str, Any], args: argparse.Namespace) -> list[Problem]:
    """SR145 when the plan of a sound config exceeds the memory budgets given."""
    device, host, problems = _memory_budgets(args)
    if problems or (device is None and host is None):
        return problems
    memory = registry.resolve(data).memory()
    return memory.budget_problems(
        device_budget=device, host_budget=host, flags=("--memory-budget", "--host-memory-budget")
    )


# ---------------------------------------------------------------------------------- commands
def _load_registry() -> Any:
    from specreg.registry import Registry

    return Registry.load()


def cmd_list(args: argparse.Namespace) -> int:
    registry = _load_registry()
    data = {
        "algorithms": [a.to_dict() for a in registry.algorithms()],
        "caches": [c.to_dict() for c in registry.caches()],
        "plugins": [p.to_dict() for p in registry.plugins()],
        "failures": [f.to_dict() for f in registry.failures],
    }
    status = EXIT_PROBLEMS if registry.failures else EXIT_OK
    if args.json:
        print(json.dumps(data, indent=2))
        return status
    print("Algorithms")
    width = max([10, *(len(a.name) for a in registry.algorithms())])
    for a in registry.algorithms():
        aliases = f" (aliases: {', '.join(a.aliases)})" if a.aliases else ""
        origin = a.origin.plugin if a.origin else "?"
        print(f"  {a.name:<{width}} {a.drafting:<6} {', '.join(a.verify_rules):<40} "
              f"[{origin}]{aliases}")
    if not registry.algorithms():
        print("  (none)")
    print("Caches")
    for c in registry.caches():
        print(f"  {c.name:<10} {c.description}")
    if not registry.caches():
        print("  (none)")
    print("Plugins")
    for p in registry.plugins():
        dist = f"{p.distribution or '?'} {p.version or ''}".strip()
        took = f"  import {p.load_seconds:.2f} s" if p.load_seconds is not None else ""
        slow = "  (slow import)" if p.slow else ""
        print(f"  {p.name:<16} {dist:<24} {len(p.hooks)} hooks{took}{slow}")
    if registry.failures:
        print("Load failures")
        for f in registry.failures:
            print(f"  {f.plugin or '-'}: {f.problem.render()}")
        print(f"{len(registry.failures)} load failure(s): exit status 1.")
    return status


def cmd_check(args: argparse.Namespace) -> int:
    registry = _load_registry()
    data, problems = parse_config_flags(args)
    if "speculative_algorithm" in data or not problems:
        try:
            problems += registry.check(data)
            problems += framework_findings(registry, data)
        except SpecRegError as exc:
            problems += exc.problems
    if not any(p.is_error for p in problems):
        try:
            problems += _memory_problems(registry, data, args)
        except SpecRegError as exc:
            problems += exc.problems
    errors, warnings = split_problems(problems)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": not errors,
                    "errors": [p.to_dict() | {"text": p.render()} for p in errors],
                    "warnings": [p.to_dict() | {"text": p.render()} for p in warnings],
                },
                indent=2,
            )
        )
    else:
        for p in errors:
            print(f"error: {p.render()}")
        for p in warnings:
            print(f"warning: {p.render()}")
        if errors:
            print(f"{len(errors)} problem(s) found.")
        else:
            print("OK: the config is sound.")
    return EXIT_PROBLEMS if errors else EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    registry = _load_registry()
    try:
        data = config_from_args(args)
        plan = registry.resolve(data)
        for notice in framework_findings(registry, data):
            print(f"{notice.severity}: {notice.render()}", file=sys.stderr)
        device, host, problems = _memory_budgets(args)
    except SpecRegError as exc:
        for p in exc.problems:
            print(f"error: {p.render()}", file=sys.stderr)
        return EXIT_PROBLEMS
    memory = plan.memory()
    problems += memory.budget_problems(
        device_budget=device, host_budget=host, flags=("--memory-budget", "--host-memory-budget")
    )
    for p in problems:
        print(f"error: {p.render()}", file=sys.stderr)
    status = EXIT_PROBLEMS if problems else EXIT_OK
    data = plan.to_dict()
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return status
    print(f"algorithm      {data['algorithm']}  ({plan.algorithm.drafting} drafting)")
    print(f"config         {json.dumps(data['config'], default=str)}")
    print(f"gamma          {data['gamma']}")
    print("widths         phase           target  draft")
    for phase in data["widths"]["target"]:
        t, d = data["widths"]["target"][phase], data["widths"]["draft"][phase]
        print(f"               {phase:<15} {t:>6}  {d:>5}")
    print(f"verifier       {data['verifier']}")
    print(f"drafter        {data['drafter']}")
    for c in data.get("candidates", []):
        print(f"candidate {c['steps']:<4} num_draft_tokens={c['num_draft_tokens']}, gamma={c['gamma']}")
    print(f"cache          {data['cache']}  swapper: {data['cache_swapper']}")
    backends = ", ".join(f"{k}: {v}" for k, v in data["kernel_backends"].items())
    print(f"kernels        {backends}")
    print("memory         " + "\n               ".join(memory.lines()))
    for notice in data["notices"]:
        print(f"notice: {notice}")
    return status


def cmd_explain(args: argparse.Namespace) -> int:
    from specreg import catalog

    if not args.code:
        for entry in _load_registry().catalog.entries().values():  # with the plugins' codes
            print(f"{entry.code}  {entry.title}")
        return EXIT_OK
    try:
        entry = catalog.lookup(args.code)  # a core code needs no registry
    except KeyError:
        known = _load_registry().catalog  # plugins register their own codes while loading
        try:
            entry = known.lookup(args.code)
        except KeyError:
            from specreg._suggest import did_you_mean

            print(
                f"unknown error code {args.code!r}."
                f"{did_you_mean(args.code.upper(), list(known.entries()))} "
                "Run `specreg explain` to list every code.",
                file=sys.stderr,
            )
            return EXIT_PROBLEMS
    print(entry.render_text())
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from specreg.demo_args import demo_arg_problems

    problems = demo_arg_problems(args, _load_registry())
    for p in problems:
        print(f"error: {p.render()}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    from specreg.demo import run_demo_cli

    return run_demo_cli(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specreg", description="Speculative-decoding plugin registry."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="algorithms, caches, plugins and load failures")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("check", help="report every problem in a config (exit 1 on problems)")
    _add_config_flags(p)
    _add_budget_flags(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("plan", help="the resolved widths, gamma and kernels for a config")
    _add_config_flags(p)
    _add_budget_flags(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("explain", help="explain an error code")
    p.add_argument("code", nargs="?")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("demo", help="run every algorithm on the built-in toy model")
    from specreg.demo_args import add_demo_arguments

    add_demo_arguments(p)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        return _unknown_flags(parser, args, extras)
    try:
        return int(args.func(args))
    except SpecRegError as exc:
        for p in exc.problems:
            print(f"error: {p.render()}", file=sys.stderr)
        return EXIT_PROBLEMS


def _unknown_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> int:
    """SR142 for every flag the command does not have, with the closest one; exit 2."""
    from specreg._suggest import did_you_mean

    sub = _subparser(parser, args.command)
    known = sorted(o for a in sub._actions for o in a.option_strings if o.startswith("--"))
    flags = [e.partition("=")[0] for e in extras if e.startswith("-")] or extras
    for flag in flags:
        p = problem(
            "SR142",
            f"`specreg {args.command}` has no flag {flag!r}.{did_you_mean(flag, known)}",
            accepted=f"the flags `specreg {args.command} --help` lists",
            fix="use the flag suggested, or remove it",
            field=flag,
        )
        print(f"error: {p.render()}", file=sys.stderr)
    return EXIT_USAGE


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]  # type: ignore[no-any-return]
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
