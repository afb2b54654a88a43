"""The core tree-verify Triton kernels lower to PTX for H100/H200-class targets (and the sampling kernel for A100, sm80 too) (no GPU
needed): catches what the interpreter accepts but the compiler does not (loop-carried types,
tuples from device functions, int64 promotions, constexpr branches)."""

import os
import subprocess
import sys
import textwrap

_COMPILE_SCRIPT = textwrap.dedent(
    """
    import os
    os.environ.pop("TRITON_INTERPRET", None)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from specreg.kernels.tree_verify_greedy import triton_impl as greedy
    from specreg.kernels.tree_verify_sampling import triton_impl as sampling

    target = GPUTarget("cuda", 90, 32)
    links = {"cand_ptr": "*i64", "ridx_ptr": "*i64", "nt_ptr": "*i64", "ns_ptr": "*i64"}
    outputs = {"predicts_ptr": "*i64", "acc_ptr": "*i64", "num_ptr": "*i32", "bonus_ptr": "*i64",
               "out_ptr": "*i64"}
    signature = {**links, "predict_ptr": "*i64", **outputs, "depth": "i32", "N": "constexpr"}
    triton.compile(ASTSource(greedy._tree_greedy_kernel, signature, constexprs={"N": 16}),
                   target=target)
    signature = {**links, "p_ptr": "*fp32", "q_ptr": "*fp32", "coins_ptr": "*fp32",
                 "child_ptr": "*fp32", "keys_ptr": "*i64", "positions_ptr": "*i64", **outputs,
                 "vocab": "i32", "depth": "i32", "thr_single": "fp32", "thr_acc": "fp32",
                 "N": "constexpr", "HAS_Q": "constexpr", "CAP": "constexpr",
                 "BLOCK_V": "constexpr", "DRAW_TILE": "constexpr"}
    for arch in (80, 90):
        for has_q in (False, True):
            triton.compile(ASTSource(sampling._tree_sampling_kernel, signature, constexprs={
                "N": 16, "HAS_Q": has_q, "CAP": 16, "BLOCK_V": 1024, "DRAW_TILE": 1024}),
                target=GPUTarget("cuda", arch, 32))
    print("ok")
    """
)


def test_tree_verify_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_SCRIPT], capture_output=True, text=True, timeout=300,
        env=env,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
