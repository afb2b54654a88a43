"""Running `specreg` as a user types it (a real subprocess) and reading its coded answers."""

from __future__ import annotations

import os
import re
import subprocess
import sys

BUILTIN = "eagle,dspark,hisparse"


def specreg(*args: str, plugins: str | None = BUILTIN, site=None, cwd=None):
    """`python -m specreg ARGS` with SPECREG_PLUGINS set to `plugins` (None: unset) and `site`
    on PYTHONPATH; the CompletedProcess, text mode."""
    env = {k: v for k, v in os.environ.items() if k != "SPECREG_PLUGINS"}
    if plugins is not None:
        env["SPECREG_PLUGINS"] = plugins
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "specreg", *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def fix_line(text: str, code: str) -> str:
    """The fix sentence of the problem with `code` in `text`."""
    match = re.search(rf"\[{code}\][^\n]*?Fix: (.*?)\(specreg explain {code}\)", text)
    assert match, f"no {code} with a fix in:\n{text}"
    return match.group(1)


def plan_json(*args: str) -> dict:
    """`specreg plan ARGS --json`, which must succeed, as data."""
    import json

    result = specreg("plan", *args, "--json", plugins=None)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
