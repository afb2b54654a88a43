"""The docs as a reader sees them at 1280 px, in a real headless browser (Debian's chromium).

The site is built with `mkdocs build --strict`; each checked page gets a small script that
records, after layout, every table's and code block's scroll width against its visible width
and how many lines each identifier in a table cell takes, read back with `--dump-dom`. A
screenshot of each page at 1280 px is taken too. Chromium is installed with apt-get when
missing; the test is skipped, with the reason, only where it cannot be installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
MEASURE = (Path(__file__).parent / "measure_overflow.js").read_text(encoding="utf-8")
WIDTH = 1280
PAGES = {
    "quickstart": "index.html",
    "widths": "reference/widths/index.html",
    "tutorial": "writing-plugins/index.html",
}


def _install_chromium() -> str:
    """Why chromium could not be installed ('' when it was)."""
    if shutil.which("apt-get") is None:
        return "no apt-get on this machine"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "apt-get needs root to install chromium"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if result.returncode != 0:
            return f"{' '.join(command)} failed: {result.stderr.strip()[-300:]}"
    return ""


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        reason = _install_chromium()
        found = shutil.which("chromium")
        if found is None:
            pytest.skip(f"no headless browser: chromium is missing and {reason or 'not found'}")
    return found


@pytest.fixture(scope="module")
def measured(chromium, tmp_path_factory) -> dict[str, dict]:
    """Build the site strictly, then measure and screenshot each page at 1280 px."""
    site = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    shots = tmp_path_factory.mktemp("screenshots")
    out = {}
    for name, rel in PAGES.items():
        page = site / rel
        html = page.read_text(encoding="utf-8")
        page.write_text(html.replace("</head>", f"<script>{MEASURE}</script></head>", 1), encoding="utf-8")
        common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                  f"--window-size={WIDTH},900", "--virtual-time-budget=5000"]
        dom = subprocess.run([*common, "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=60)
        match = re.search(r'<script type="application/json" id="specreg-measure">(.*?)</script>',
                          dom.stdout, flags=re.DOTALL)
        assert match, f"{name}: the measuring script did not run: {dom.stderr[-500:]}"
        shot = shots / f"{name}.png"
        subprocess.run([*common, f"--screenshot={shot}", page.as_uri()],
                       capture_output=True, timeout=60)
        out[name] = {**json.loads(match.group(1)), "screenshot": shot}
    return out


def _png_width(path: Path) -> int:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">I", data[16:20])[0]


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page_fits_1280_px(measured, name):
    page = measured[name]
    assert page["viewport"] == WIDTH
    assert _png_width(page["screenshot"]) == WIDTH
    assert page["page"] <= WIDTH, f"{name} scrolls sideways: {page['page']} px"
    for table in page["tables"]:
        assert table["scroll"] <= table["client"], (
            f"{name}: a table is cut off ({table['scroll']} px in {table['client']} px): "
            f"{table['head'][:80]}"
        )


def test_widths_table_shows_the_draft_worker_columns(measured):
    tables = measured["widths"]["tables"]
    assert tables and "target_verify (draft)" in tables[0]["head"]
    assert tables[0]["table"] <= tables[0]["client"]


def test_quickstart_install_commands_show_their_end(measured):
    shell = [c for c in measured["quickstart"]["code"] if c["shell"]]
    assert any("&& specreg demo" in c["text"] for c in shell), "the install-and-demo command is gone"
    for block in shell:
        assert block["scroll"] <= block["client"], f"hidden off-screen: {block['text'][:120]}"


def test_tutorial_hook_names_do_not_wrap_mid_word(measured):
    cells = measured["tutorial"]["cellCode"]
    hooks = [c for c in cells if c["text"].startswith("specreg_")]
    assert {"specreg_make_drafter", "specreg_resolve_candidates"} <= {c["text"] for c in hooks}
    assert [c["text"] for c in cells if c["lines"] != 1] == []
