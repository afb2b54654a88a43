"""The `specreg` command line: list, check, plan, explain, demo, under one exit-code convention.

Exit status, for every subcommand: 0 the answer is sound; 1 a coded problem in what was asked
(a config, a name, a flag's value, a plugin that failed to load, a budget exceeded, a demo row
that is not lossless); 2 a usage error, the command line itself does not parse (no or an
unknown subcommand, an unknown flag, a flag without its value: SR142, SR152). Every error is
coded, argparse's own included. With `--json` the answer is JSON on stdout, errors too:
{"ok": false, "exit_status": ..., "errors": [...], "warnings": [...]}. `check` and `plan` give
one verdict per config (`specreg.cli.verdict`), so they exit alike. `list`, `check` and
`explain` import neither torch nor triton (`check` builds the plan's objects that need them in
a child process, `specreg.cli.child_build`, unless `--no-torch-build`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from specreg.cli.args import add_budget_flags, add_config_flags
from specreg.cli.verdict import config_verdict
from specreg.errors import Problem, SpecRegError, problem, split_problems

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
EXIT_STATUS_TEXT = (
    "exit status: 0 sound; 1 a coded problem in the input (config, names, flag values, plugins, "
    "budgets); 2 a usage error (the command line does not parse). --json answers in JSON, "
    "errors included."
)


# ------------------------------------------------------------------------------------ output
def problems_document(problems: Sequence[Problem], status: int) -> dict[str, Any]:
    """The JSON every subcommand prints for its problems."""
    errors, warnings = split_problems(list(problems))
    return {
        "ok": not errors,
        "exit_status": status,
        "errors": [p.to_dict() | {"text": p.render()} for p in errors],
        "warnings": [p.to_dict() | {"text": p.render()} for p in warnings],
    }


def report(problems: Sequence[Problem], status: int, *, as_json: bool) -> int:
    """Print `problems` (JSON on stdout, or text on stderr) and return `status`."""
    if as_json:
        print(json.dumps(problems_document(problems, status), indent=2))
    else:
        for p in problems:
            print(f"{p.severity}: {p.render()}", file=sys.stderr)
    return status


# ---------------------------------------------------------------------------------- commands
def _load_registry() -> Any:
    from specreg.registry.registry import Registry

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
        print(json.dumps(data | {"ok": not registry.failures, "exit_status": status}, indent=2))
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


NOT_BUILT = (
    "the plan's verifier and drafter were not built: they need torch, and --no-torch-build "
    "skipped building them in a child process; `specreg check` without the flag, or "
    "`specreg plan`, builds and checks them"
)


def cmd_check(args: argparse.Namespace) -> int:
    verdict = config_verdict(_load_registry(), args, build=False)
    errors, warnings = split_problems(list(verdict.problems))
    sound = not errors
    if args.json:
        answer = problems_document(verdict.problems, verdict.status)
        print(json.dumps(answer | {"objects_checked": verdict.objects_checked}, indent=2))
        return verdict.status
    for p in errors:
        print(f"error: {p.render()}")
    for p in warnings:
        print(f"warning: {p.render()}")
    print("OK: the config is sound." if sound else f"{len(errors)} problem(s) found.")
    if sound and not verdict.objects_checked:
        print(f"note: {NOT_BUILT}.")
    return verdict.status


def cmd_plan(args: argparse.Namespace) -> int:
    verdict = config_verdict(_load_registry(), args, build=True)
    plan = verdict.plan
    if plan is None:
        return report(verdict.problems, verdict.status, as_json=args.json)
    if args.json:
        answer = plan.to_dict()
        if verdict.problems:
            answer |= problems_document(verdict.problems, verdict.status)
        print(json.dumps(answer, indent=2, default=str))
        return verdict.status
    report(verdict.problems, verdict.status, as_json=False)
    _print_plan(plan.to_dict(), plan, plan.memory())
    return verdict.status


def _print_plan(data: dict[str, Any], plan: Any, memory: Any) -> None:
    print(f"algorithm      {data['algorithm']}  ({plan.algorithm.drafting} drafting)")
    print(f"config         {json.dumps(data['config'], default=str)}")
    print(f"gamma          {data['gamma']}")
    over = "  (maxima over the config and its candidates)" if plan.candidates else ""
    print(f"widths         phase           target  draft{over}")
    for phase in data["widths"]["target"]:
        t, d = data["widths"]["target"][phase], data["widths"]["draft"][phase]
        print(f"               {phase:<15} {t:>6}  {d:>5}")
    print(f"acceptance     {plan.config.acceptance.describe()}")
    print(f"verifier       {data['verifier']}")
    print(f"drafter        {data['drafter']}")
    if plan.candidates:
        own = data["config_sizes"]
        print(f"config's own   gamma={own['gamma']}, "
              f"target_verify={own['widths']['target']['target_verify']}")
    for c in data.get("candidates", []):
        print(f"candidate {c['steps']:<4} num_draft_tokens={c['num_draft_tokens']}, gamma={c['gamma']}")
    print(f"cache          {data['cache']}  swapper: {data['cache_swapper']}")
    backends = ", ".join(f"{k}: {v}" for k, v in data["kernel_backends"].items())
    print(f"kernels        {backends}")
    print("memory         " + "\n               ".join(memory.lines()))
    for notice in data["notices"]:
        print(f"notice: {notice}")


def cmd_explain(args: argparse.Namespace) -> int:
    from specreg import catalog

    if not args.code:
        entries = _load_registry().catalog.entries().values()  # with the plugins' codes
        if args.json:
            print(json.dumps([{"code": e.code, "title": e.title} for e in entries], indent=2))
        else:
            print("\n".join(f"{e.code}  {e.title}" for e in entries))
        return EXIT_OK
    try:
        entry = catalog.lookup(args.code)  # a core code needs no registry
    except KeyError:
        known = _load_registry().catalog  # plugins register their own codes while loading
        try:
            entry = known.lookup(args.code)
        except KeyError:
            from specreg._suggest import did_you_mean

            unknown = problem(
                "SR153",
                f"no error code {args.code!r}.{did_you_mean(args.code.upper(), list(known.entries()))}",
                accepted="a code `specreg explain` lists (SR followed by three digits)",
                fix="run `specreg explain` to list every code, and pass one of them",
                field="code",
            )
            return report([unknown], EXIT_PROBLEMS, as_json=args.json)
    if args.json:
        import attrs

        print(json.dumps(attrs.asdict(entry), indent=2))
    else:
        print(entry.render_text())
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from specreg.cli.demo_args import demo_arg_problems

    problems = demo_arg_problems(args, _load_registry())
    if problems:
        return report(problems, EXIT_PROBLEMS, as_json=args.json)
    from specreg.cli.demo import run_demo_cli

    return run_demo_cli(args)


# ----------------------------------------------------------------------------------- parsing
class UsageError(Exception):
    """The command line does not parse; carries the coded problem (exit status 2)."""

    def __init__(self, found: Problem) -> None:
        super().__init__(found.render())
        self.problem = found


class Parser(argparse.ArgumentParser):
    """argparse, with its own errors raised as coded usage errors (SR152) instead of printed."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(
            problem(
                "SR152",
                f"`{self.prog}`: {message}",
                accepted=f"the command line `{self.prog} --help` shows",
                fix=f"correct the command line as `{self.prog} --help` describes",
                field=self.prog,
            )
        )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="specreg", description="Speculative-decoding plugin registry.", epilog=EXIT_STATUS_TEXT
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text, epilog=EXIT_STATUS_TEXT)

    p = command("list", "algorithms, caches, plugins and load failures (exit 1 on a failure)")
    p.add_argument("--json", action="store_true", help="answer in JSON")
    p.set_defaults(func=cmd_list)

    p = command("check", "report every problem in a config (exit 1 on problems)")
    add_config_flags(p)
    add_budget_flags(p)
    p.add_argument(
        "--no-torch-build", action="store_true",
        help="do not build the plan's objects that need torch or triton (check builds them in "
        "a child process, as check itself imports neither); they are then reported as not "
        "checked",
    )
    p.add_argument("--json", action="store_true", help="answer in JSON, errors included")
    p.set_defaults(func=cmd_check)

    p = command("plan", "the resolved widths, gamma and kernels for a config")
    add_config_flags(p)
    add_budget_flags(p)
    p.add_argument("--json", action="store_true", help="answer in JSON, errors included")
    p.set_defaults(func=cmd_plan)

    p = command("explain", "explain an error code (every code without one)")
    p.add_argument("code", nargs="?")
    p.add_argument("--json", action="store_true", help="answer in JSON, errors included")
    p.set_defaults(func=cmd_explain)

    p = command("demo", "run every algorithm on the built-in toy model")
    from specreg.cli.demo_args import add_demo_arguments

    add_demo_arguments(p)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    parser = build_parser()
    unknown = _unknown_command(parser, argv)
    if unknown is not None:
        return report([unknown], EXIT_USAGE, as_json=as_json)
    try:
        args, extras = parser.parse_known_args(argv)
    except UsageError as exc:
        return report([exc.problem], EXIT_USAGE, as_json=as_json)
    if extras:
        return report(_unknown_flags(parser, args, extras), EXIT_USAGE, as_json=as_json)
    try:
        return int(args.func(args))
    except SpecRegError as exc:
        return report(exc.problems, EXIT_PROBLEMS, as_json=as_json)


def _unknown_flags(
    parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]
) -> list[Problem]:
    """SR142 for every flag the command does not have, with the closest one."""
    from specreg._suggest import did_you_mean

    sub = _subparser(parser, args.command)
    known = sorted(o for a in sub._actions for o in a.option_strings if o.startswith("--"))
    flags = [e.partition("=")[0] for e in extras if e.startswith("-")] or extras
    return [
        problem(
            "SR142",
            f"`specreg {args.command}` has no flag {flag!r}.{did_you_mean(flag, known)}",
            accepted=f"the flags `specreg {args.command} --help` lists",
            fix="use the flag suggested, or remove it",
            field=flag,
        )
        for flag in flags
    ]


def _unknown_command(parser: argparse.ArgumentParser, argv: list[str]) -> Problem | None:
    """SR152 with the closest subcommand when the first word names none (`specreg chek`)."""
    from specreg._suggest import did_you_mean

    commands = sorted(_subcommands(parser))
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is None or word in commands:
        return None
    return problem(
        "SR152",
        f"`specreg` has no subcommand {word!r}.{did_you_mean(word, commands)}",
        accepted=", ".join(commands),
        fix=f"run one of {', '.join(commands)} (`specreg --help` describes each)",
        field="specreg",
    )


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]  # type: ignore[no-any-return]
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
