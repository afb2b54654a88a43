"""Every Triton kernel compiles for sm80 and sm90 (no GPU needed), on the specialisations the
interpreter tests launch it with: the listed tests run in a subprocess under
`tests.support.triton_compile`, which compiles each launch for both targets and still interprets
it, so the tests' own assertions hold too."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: One or more interpreter tests per kernel (the report below says which kernels they reach).
LAUNCHING_TESTS = (
    "tests/kernels/test_argmax_triton.py::test_triton_row_argmax_reads_strided_and_batched_rows",
    "tests/kernels/test_chain_triton.py::test_greedy_triton_equals_torch",
    "tests/kernels/test_random_stream.py::test_triton_tiles_and_int32_keys_give_the_same_values",
    "tests/kernels/test_chain_triton.py::test_sampling_triton_non_contiguous_inputs",
    "tests/kernels/test_sampling_params.py::test_triton_row_stats_equal_torch",
    "tests/kernels/test_sampling_params.py::test_triton_chain_with_params_equals_torch",
    "tests/dspark/test_kernels.py",
    "tests/kernels/test_tree_build.py::test_triton_matches_torch",
    "tests/kernels/test_tree_verify.py::test_greedy_triton_matches_torch",
    "tests/kernels/test_tree_verify.py::test_sampling_triton_matches_torch",
    "tests/hisparse/test_triton.py::test_triton_equals_torch_over_a_call_sequence",
    "tests/hisparse/test_triton.py::test_planned_copy_triton_equals_torch",
    "tests/kernels/test_logprobs.py::test_chain_logprobs_equal_plain_decoding",
    "tests/kernels/test_grammar_masks.py::test_bitmask_kernel_equals_reference",
    "tests/kernels/test_penalties.py::test_torch_and_triton_equal_the_reference",
    "tests/kernels/test_relaxed_params.py::test_defaults_equal_the_lossless_params_verify_with_masks_and_penalties",
    "tests/kernels/test_chain_invariant.py::test_invariant_triton_equals_torch_and_the_reference",
    "tests/step/test_draft_sampling.py::test_triton_q_equals_torch_under_the_interpreter",
)


def test_every_kernel_compiles_for_sm80_and_sm90(tmp_path):
    report_path = tmp_path / "compiled.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["SPECREG_COMPILE_REPORT"] = str(report_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "0",
         "-p", "tests.support.triton_compile", "-k", "triton", *LAUNCHING_TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads(report_path.read_text())
    kernels = set(report["kernels"])
    assert len(kernels) >= 13, report["kernels"]
    # Every launch is of a `*_kernel`: the naming rule the coverage check stands on.
    assert set(report["launched"]) <= kernels, set(report["launched"]) - kernels
    missing = {
        kernel: report["compiled"].get(kernel)
        for kernel in kernels
        if set(report["compiled"].get(kernel, {})) != {"80", "90"}
        or 0 in report["compiled"][kernel].values()
    }
    assert not missing, f"kernels never compiled for both targets: {missing}"
