"""Command-line arguments of `specreg demo` and their up-front checks (no torch: the parser and
the checks run before the demo imports anything heavy)."""

from __future__ import annotations

import argparse
import importlib.util
import os
from typing import Any

from specreg.errors import Problem, problem

#: Tokens of each demo prompt, and the positions the toy model has (ToyConfig.max_positions).
PROMPT_LEN = 24
TOY_POSITIONS = 512
#: Positions past the generated tokens a verify step may reach (the toy model's window).
VERIFY_MARGIN = 16
MAX_STEPS = TOY_POSITIONS - PROMPT_LEN - VERIFY_MARGIN
MAX_SEED = 2**63 - 1


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--algorithm",
        action="append",
        default=None,
        help="run only this algorithm (repeatable); default: every registered algorithm",
    )
    parser.add_argument(
        "--kv-cache",
        default="both",
        metavar="{none,both,CACHE}",
        help="run without a KV cache (none), with one registered cache (its name), or without "
        "and with every registered cache (both, the default)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=48,
        help=f"tokens to generate per prompt, 1 to {MAX_STEPS} (default 48)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the toy models and sampling")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="save acceptance-length histograms")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def demo_arg_problems(args: argparse.Namespace, registry: Any) -> list[Problem]:
    """Every problem with the demo's flags, found before anything runs (SR143, SR144, and the
    unknown-name codes with the demo's own --algorithm flag)."""
    from specreg._suggest import unknown_name_problem

    out: list[Problem] = []
    if not 1 <= args.steps <= MAX_STEPS:
        out.append(range_problem("--steps", args.steps, 1, MAX_STEPS, "48"))
    if not 0 <= args.seed <= MAX_SEED:
        out.append(range_problem("--seed", args.seed, 0, MAX_SEED, "0"))
    for name in args.algorithm or ():
        try:
            registry.get_algorithm(name)
        except ValueError:
            out.append(unknown_name_problem(registry, name, "algorithm", flag="--algorithm"))
    if args.plot:
        out += _plot_problems(args.plot)
    return out


def range_problem(flag: str, value: int, low: int, high: int, default: str) -> Problem:
    return problem(
        "SR143",
        f"specreg demo {flag} {value} is outside [{low}, {high}]",
        accepted=f"a whole number from {low} to {high}",
        fix=f"pass {flag} within [{low}, {high}], or leave it out for the default {default}",
        field=flag,
    )


def _plot_problems(path: str) -> list[Problem]:
    folder = os.path.dirname(os.path.abspath(path))
    out = []
    if not os.path.isdir(folder):
        out.append(
            problem(
                "SR144",
                f"--plot {path}: the folder {folder!r} does not exist",
                accepted="a file path in an existing, writable folder",
                fix=f"create the folder first (mkdir -p {os.path.dirname(path) or '.'}), or "
                "point --plot at an existing folder",
                field="--plot",
            )
        )
    elif not os.access(folder, os.W_OK):
        out.append(
            problem(
                "SR144",
                f"--plot {path}: the folder {folder!r} is not writable",
                accepted="a file path in an existing, writable folder",
                fix="point --plot at a folder you can write to",
                field="--plot",
            )
        )
    if importlib.util.find_spec("matplotlib") is None:
        out.append(
            problem(
                "SR144",
                "--plot needs matplotlib, which is not installed",
                accepted="specreg installed with the plot extra",
                fix="pip install 'specreg[plot]', or drop --plot",
                field="--plot",
            )
        )
    return out
