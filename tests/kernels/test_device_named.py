"""Every tensor the torch kernel paths allocate names its device: the reference-comparison tests
of each kernel family run in a subprocess under `tests.support.device_check`, which raises on a
factory call without `device=` from specreg's or a plugin's code (a CPU tensor on a CUDA run)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The torch implementations against their references: chain, sampling parameters, filtering,
#: EAGLE's tree kernels, HiSparse's swap, DSpark's and lookup's kernels, CPU-tuned and batched
#: branches.
TORCH_PATH_TESTS = (
    "tests/kernels/test_kernel_references.py",
    "tests/eagle/test_eagle_reference.py",
    "tests/hisparse/test_reference.py",
    "tests/dspark/test_dspark_reference.py",
    "tests/lookup/test_lookup_kernels.py",
    "tests/kernels/test_logprobs.py",
    "tests/kernels/test_grammar_masks.py::test_bitmask_kernel_equals_reference",
    "tests/kernels/test_grammar_masks.py::test_bad_masks_are_coded",
    "tests/kernels/test_penalties.py::test_torch_and_triton_equal_the_reference",
    "tests/kernels/test_filtering_pivot.py::test_pivot_prefix_is_the_sorted_row_down_to_the_pivot",
    "tests/kernels/test_filtering_pivot.py::test_ties_at_the_pivot_past_the_ranked_columns_are_all_kept",
)


def test_torch_kernel_paths_name_their_device():
    env = dict(os.environ)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         "-p", "tests.support.device_check", "-k", "not triton", *TORCH_PATH_TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:]
    assert " passed" in done.stdout


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
