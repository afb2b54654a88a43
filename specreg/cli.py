"""The `specreg` command line: list, check, plan, explain, demo.

`list`, `check` and `explain` import neither torch nor triton. Exit codes: 0 sound, 1 problems
found, 2 usage errors.
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
    data: dict[str, Any] = {}
    if args.config_file:
        data.update(load_json_object(args.config_file))
    for flag in SGLANG_SWITCHES:
        key = flag.lstrip("-").replace("-", "_")
        if getattr(args, key):
            data[key] = True
    for key in SGLANG_FLAGS.values():
        value = getattr(args, key)
        if value is None:
            continue
        if key.endswith(("_num_steps", "_topk", "_num_draft_tokens", "_block_size")):
            value = _coerce(value)
        data[key] = value
    options = dict(data.get("cache_options") or {})
    problems: list[Problem] = []
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
    if problems:
        raise ConfigError(problems)
    return data


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
    if args.json:
        print(json.dumps(data, indent=2))
        return EXIT_OK
    print("Algorithms")
    for a in registry.algorithms():
        aliases = f" (aliases: {', '.join(a.aliases)})" if a.aliases else ""
        origin = a.origin.plugin if a.origin else "?"
        print(f"  {a.name:<10} {a.drafting:<6} {', '.join(a.verify_rules):<40} [{origin}]{aliases}")
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
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    registry = _load_registry()
    try:
        data = config_from_args(args)
        problems = registry.check(data)
        problems += framework_findings(registry, data)
    except SpecRegError as exc:
        problems = list(exc.problems)
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
    except SpecRegError as exc:
        for p in exc.problems:
            print(f"error: {p.render()}", file=sys.stderr)
        return EXIT_PROBLEMS
    data = plan.to_dict()
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return EXIT_OK
    print(f"algorithm      {data['algorithm']}  ({plan.algorithm.drafting} drafting)")
    print(f"config         {json.dumps(data['config'], default=str)}")
    print(f"gamma          {data['gamma']}")
    print("widths         phase           target  draft")
    for phase in data["widths"]["target"]:
        t, d = data["widths"]["target"][phase], data["widths"]["draft"][phase]
        print(f"               {phase:<15} {t:>6}  {d:>5}")
    print(f"verifier       {data['verifier']}")
    print(f"cache          {data['cache']}  swapper: {data['cache_swapper']}")
    backends = ", ".join(f"{k}: {v}" for k, v in data["kernel_backends"].items())
    print(f"kernels        {backends}")
    for notice in data["notices"]:
        print(f"notice: {notice}")
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from specreg import catalog

    if not args.code:
        _load_registry()  # include the codes loaded plugins registered
        for entry in catalog.entries().values():
            print(f"{entry.code}  {entry.title}")
        return EXIT_OK
    try:
        entry = catalog.lookup(args.code)
    except KeyError:
        _load_registry()  # plugins register their own codes while loading
    try:
        entry = catalog.lookup(args.code)
    except KeyError:
        from specreg._suggest import did_you_mean

        known = list(catalog.entries())
        print(
            f"unknown error code {args.code!r}.{did_you_mean(args.code.upper(), known)} "
            "Run `specreg explain` to list every code.",
            file=sys.stderr,
        )
        return EXIT_PROBLEMS
    print(entry.render_text())
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
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
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("plan", help="the resolved widths, gamma and kernels for a config")
    _add_config_flags(p)
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
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except SpecRegError as exc:
        for p in exc.problems:
            print(f"error: {p.render()}", file=sys.stderr)
        return EXIT_PROBLEMS


if __name__ == "__main__":
    raise SystemExit(main())
