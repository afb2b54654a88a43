"""specreg/cli/torch_free.py: code run inside `heavy_imports_refused()` cannot import torch or
triton, the attempt is recorded, and every module the block imported is forgotten after it."""

from __future__ import annotations

import subprocess
import sys


def test_imports_inside_are_refused_recorded_and_forgotten():
    code = (
        "import sys\n"
        "from specreg.cli.torch_free import heavy_imports_refused\n"
        "with heavy_imports_refused() as refuser:\n"
        "    import json.tool  # a light module: imported, then forgotten\n"
        "    try:\n"
        "        import torch.nn\n"
        "        raise SystemExit('torch was imported')\n"
        "    except ModuleNotFoundError as exc:\n"
        "        assert exc.name == 'torch', exc.name  # the parent package first\n"
        "assert refuser.attempted\n"
        "assert 'torch' not in sys.modules and 'json.tool' not in sys.modules\n"
        "import torch  # the finder is gone: torch imports again\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_block_that_imports_nothing_heavy_records_no_attempt():
    from specreg.cli.torch_free import heavy_imports_refused

    with heavy_imports_refused() as refuser:
        import specreg.step.chain_verifier  # noqa: F401 - torch-free, as check relies on
    assert not refuser.attempted
