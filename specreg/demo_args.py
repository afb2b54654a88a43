"""Command-line arguments of `specreg demo` (kept apart so the parser loads without torch)."""

from __future__ import annotations

import argparse


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
        "--steps", type=int, default=48, help="tokens to generate per prompt (default 48)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the toy models and sampling")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="save acceptance-length histograms")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
