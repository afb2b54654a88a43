"""`import specreg` and the hookspecs stay light: no torch, no triton."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module", ["specreg", "specreg.hookspecs", "specreg.registry.registry", "specreg.cli.command", "specreg.catalog"]
)
def test_import_does_not_load_torch_or_triton(module):
    code = (
        f"import sys, {module}\n"
        "heavy = [m for m in ('torch', 'triton') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_loading_the_builtin_plugins_does_not_load_torch():
    code = (
        "import sys, specreg\n"
        "r = specreg.Registry.load()\n"
        "assert {'eagle', 'dspark'} <= {a.name for a in r.algorithms()}, r.failures\n"
        "assert 'hisparse' in {c.name for c in r.caches()}, r.failures\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
