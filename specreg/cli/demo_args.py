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
        default="48",
        metavar="N",
        help=f"tokens to generate per prompt, 1 to {MAX_STEPS} (default 48)",
    )
    parser.add_argument(
        "--seed", default="0", metavar="N", help="seed of the toy models and sampling (default 0)"
    )
    parser.add_argument("--json", action="store_true", help="print the table as JSON, errors too")
    parser.add_argument(
        "--plot", metavar="FILE.png",
        help="save acceptance-length histograms, and FILE-positions.png: acceptance by position",
    )
    parser.add_argument(
        "--metrics", metavar="FILE.prom",
        help="write every row's acceptance statistics in Prometheus' text format "
        "(needs the metrics extra)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def demo_arg_problems(args: argparse.Namespace, registry: Any) -> list[Problem]:
    """Every problem with the demo's flags, found before anything runs (SR143; SR144 for an
    output file that cannot be written, an image format matplotlib does not write included;
    SR131 for --metrics without prometheus_client; the unknown-name codes with the demo's own
    --algorithm and --kv-cache flags). --steps and --seed arrive as text and are set to their
    numbers when they are sound."""
    from specreg._suggest import unknown_name_problem

    out: list[Problem] = []
    for name, flag, low, high, default in (
        ("steps", "--steps", 1, MAX_STEPS, "48"),
        ("seed", "--seed", 0, MAX_SEED, "0"),
    ):
        value = _whole_number(getattr(args, name))
        if value is None:
            out.append(not_a_number_problem(flag, getattr(args, name), low, high, default))
        elif not low <= value <= high:
            out.append(range_problem(flag, value, low, high, default))
        else:
            setattr(args, name, value)  # the demo runs with the number the text names
    for name in args.algorithm or ():
        try:
            registry.get_algorithm(name)
        except ValueError:
            out.append(unknown_name_problem(registry, name, "algorithm", flag="--algorithm"))
    args.kv_cache = str(args.kv_cache).strip().lower()
    if args.kv_cache not in ("none", "both"):
        try:
            registry.get_cache(args.kv_cache)
        except ValueError:
            out.append(unknown_name_problem(registry, args.kv_cache, "cache", flag="--kv-cache"))
    if args.plot:
        out += _plot_problems(args.plot)
    if getattr(args, "metrics", None):
        out += _metrics_problems(args.metrics)
    return out


def _metrics_problems(path: str) -> list[Problem]:
    """SR144 for --metrics' folder; SR131 without prometheus_client (the metrics extra)."""
    out = _folder_problems(path, "--metrics")
    if importlib.util.find_spec("prometheus_client") is None:
        out.append(problem(
            "SR131", "--metrics needs prometheus_client, which is not installed",
            accepted="specreg installed with the metrics extra",
            fix="pip install 'specreg[metrics]', or drop --metrics", field="--metrics",
        ))
    return out


def _whole_number(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    return int(text) if text.lstrip("-").isdigit() else None


def not_a_number_problem(flag: str, value: object, low: int, high: int, default: str) -> Problem:
    """SR143: a whole-number flag of the demo got text that is not one."""
    return problem(
        "SR143",
        f"specreg demo {flag} takes a whole number, got {value!r}",
        accepted=f"a whole number from {low} to {high}",
        fix=f"pass {flag} N with N in [{low}, {high}], or leave it out for the default {default}",
        field=flag,
    )


def range_problem(flag: str, value: int, low: int, high: int, default: str) -> Problem:
    return problem(
        "SR143",
        f"specreg demo {flag} {value} is outside [{low}, {high}]",
        accepted=f"a whole number from {low} to {high}",
        fix=f"pass {flag} within [{low}, {high}], or leave it out for the default {default}",
        field=flag,
    )


def _plot_problems(path: str) -> list[Problem]:
    """SR144 for --plot: its folder, matplotlib (the plot extra), and an extension naming an
    image format matplotlib writes (the run would otherwise end in its traceback)."""
    out = _folder_problems(path, "--plot")
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
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    stem, extension = os.path.splitext(path)
    if extension.lstrip(".").lower() not in formats:
        named = f"its extension {extension!r}" if extension else "it has no extension, which"
        out.append(
            problem(
                "SR144",
                f"--plot {path}: {named} names no image format matplotlib writes",
                accepted="a file name ending in " + ", ".join(f".{f}" for f in formats),
                fix=f"name the image with such an extension, e.g. --plot {stem or 'plot'}.png",
                field="--plot",
            )
        )
    return out


def _folder_problems(path: str, flag: str) -> list[Problem]:
    folder = os.path.dirname(os.path.abspath(path))
    out = []
    if not os.path.isdir(folder):
        out.append(
            problem(
                "SR144",
                f"{flag} {path}: the folder {folder!r} does not exist",
                accepted="a file path in an existing, writable folder",
                fix=f"create the folder first (mkdir -p {os.path.dirname(path) or '.'}), or "
                f"point {flag} at an existing folder",
                field=flag,
            )
        )
    elif not os.access(folder, os.W_OK):
        out.append(
            problem(
                "SR144",
                f"{flag} {path}: the folder {folder!r} is not writable",
                accepted="a file path in an existing, writable folder",
                fix=f"point {flag} at a folder you can write to",
                field=flag,
            )
        )
    return out
