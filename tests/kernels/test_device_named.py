"""Every tensor the torch kernel paths allocate names its device: the reference-comparison tests
of each kernel family run under `tests.support.device_check` in every run (tests/conftest.py
wraps their calls), which raises on a factory call without `device=` from specreg's or a
plugin's code (a CPU tensor on a CUDA run)."""

import subprocess
import sys
from pathlib import Path

from tests.support.device_check import TORCH_PATH_TESTS, checks

ROOT = Path(__file__).resolve().parents[2]


def test_the_torch_path_tests_exist_and_run_under_the_check():
    """Every listed test collects (a renamed one would silently leave the check), and each
    collected id but the Triton cases is one the run wraps in the check."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-n", "0", *TORCH_PATH_TESTS],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    for path in TORCH_PATH_TESTS:
        assert any(i == path or i.startswith(path + "::") or i.startswith(path + "[")
                   for i in ids), path
    checked = [i for i in ids if checks(i)]
    assert len(checked) >= 100, len(checked)
    assert all("triton" in i.lower() for i in ids if not checks(i))
    assert not checks("tests/kernels/test_chain_sampling.py::test_target_only_known_answers")


def test_the_check_fails_on_a_missing_device(tmp_path):
    """Negative control: a planted `torch.empty(n)` under plugins/ is caught, naming its line."""
    planted = ROOT / "plugins" / "_device_check_planted.py"
    planted.write_text("import torch\n\n\ndef alloc():\n    return torch.empty(3)\n")
    try:
        script = (
            "import sys; sys.path.insert(0, 'plugins')\n"
            "from tests.support.device_check import DeviceNamed\n"
            "import _device_check_planted as m\n"
            "with DeviceNamed():\n"
            "    try:\n"
            "        m.alloc()\n"
            "    except AssertionError as e:\n"
            "        print(e)\n"
        )
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
    finally:
        planted.unlink()
    assert "empty() without device= at plugins/_device_check_planted.py:5" in done.stdout, (
        done.stdout + done.stderr
    )
