"""SGLang's eagle_sample through the `tree_verify` substitution, on CPU, against the alternatives.

    python benchmarks/bench_sglang_tree_verify.py            # b=64, N=8, V=32000, depth 4
    python benchmarks/bench_sglang_tree_verify.py --b 16 --v 4096 --repeats 5

Runs itself inside the pinned SGLang environment (tests/adapters/envs.py builds it once; set
SPECREG_FRAMEWORK_CACHE to choose where), with SPECREG_SGLANG=enforce and
SPECREG_SGLANG_SUBSTITUTE=tree_verify, so SGLang's own plugin loader installs the substitution.
One torch thread; each time is the best CPU time of `--repeats` interleaved calls (floors.py).

Printed, from one run:
- greedy and sampling (temperature 0.8, top-k 50, top-p 0.9, min-p 0.05): eagle_sample through
  the substitution against the same specreg kernels called directly on the same tensors (the
  cost of SGLang's call site plus the substitution's wrapping; target <= 1.05x);
- against what a specreg user calls instead: greedy from logits (argmax of the reached rows
  only) and `verify_tree_with_params` (filtering fused into verification);
- against SGLang's own path where it runs on a CPU: its greedy kernel only as Triton under the
  interpreter (its default CPU path writes nothing); its sampling path cannot run on a CPU (the
  renorm and tree-sampling kernels are None there).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
PARAMS = (0.8, 50, 0.9, 0.05)  # temperature, top-k, top-p, min-p


def in_framework_env(argv: list[str]) -> int:
    """Re-run this script in the pinned SGLang environment with the substitution switched on."""
    sys.path.insert(0, str(ROOT))
    from tests.adapters.envs import ensure_env
    from tests.support.models import MODEL_CONFIGS

    env = ensure_env()
    model = Path(tempfile.mkdtemp()) / "llama"  # a tiny config: SGLang's server arguments read it
    model.mkdir()
    (model / "config.json").write_text(json.dumps(MODEL_CONFIGS["llama"]))
    extra = {"SPECREG_BENCH_MODEL": str(model), "SPECREG_SGLANG": "enforce",
             "SPECREG_SGLANG_SUBSTITUTE": "tree_verify",
             "TRITON_INTERPRET": "1", "SPECREG_BENCH_IN_ENV": "1"}
    return subprocess.call([str(env.python), __file__, *argv], env=env.subprocess_env(**extra))


def inputs(b: int, n: int, vocab: int, depth: int, seed: int):
    import torch

    from tests.adapters.sglang_tree_verify import random_trees, verify_input

    gen = torch.Generator().manual_seed(seed)
    cand, index, nt, ns, predict = random_trees(gen, b, n, 8)
    cand = cand * (vocab // 8)  # tokens spread over the vocab
    logits = torch.randn((b * n, vocab), generator=gen)
    logits.view(b, n, vocab).scatter_(2, (predict * (vocab // 8))[:, :, None], 6.0)
    return SimpleNamespace(cand=cand, index=index, nt=nt, ns=ns, logits=logits,
                           vi=verify_input(b, cand, nt, ns, depth), depth=depth)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--b", type=int, default=64)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--v", type=int, default=32000)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if not os.environ.get("SPECREG_BENCH_IN_ENV"):
        sys.exit(in_framework_env(sys.argv[1:]))

    import logging

    logging.getLogger().setLevel(logging.ERROR)
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from floors import interleaved_best
    from sglang.srt.plugins import load_plugins

    load_plugins()
    import sglang.srt.speculative.eagle_utils as eu
    from sglang.kernels.ops.speculative.spec_tree import verify_tree_greedy_triton
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from specreg.kernels.tree_verify_greedy import verify_tree_greedy
    from specreg.kernels.tree_verify_params import verify_tree_with_params
    from specreg.kernels.tree_verify_sampling import verify_tree_sampling

    from specreg.adapters import sglang_tree_kernels as kernels
    from specreg.adapters import substitution_runtime
    from specreg.kernels.random_stream import fresh_keys
    from specreg.contract.sampling_params import SamplingParams
    from tests.adapters.sglang_tree_verify import publish_server_args, sampling_info

    assert substitution_runtime.active() == ("tree_verify",), substitution_runtime.active()
    publish_server_args(os.environ["SPECREG_BENCH_MODEL"])

    b, n, vocab, depth = args.b, args.n, args.v, args.depth
    x = inputs(b, n, vocab, depth, seed=0)
    seq_lens = torch.full((b,), 100)

    def eagle(info):
        batch = SimpleNamespace(device="cpu", forward_mode=ForwardMode.DECODE, seq_lens=seq_lens,
                                sampling_info=info, return_logprob=False)
        return lambda: eu.eagle_sample(x.vi, batch, SimpleNamespace(next_token_logits=x.logits))

    greedy_info = sampling_info(b, vocab, greedy=True)
    sampled_info = sampling_info(b, vocab, greedy=False, params=PARAMS)
    links = (x.cand, x.index, x.nt, x.ns)

    def greedy_direct():
        predict = torch.argmax(x.logits, dim=-1).view(b, n)
        return verify_tree_greedy(*links, depth=depth, target_predict=predict)

    def buffers():
        return (torch.zeros(b * n, dtype=torch.int32),
                torch.full((b, depth + 1), -1, dtype=torch.int32),
                torch.zeros(b, dtype=torch.int32))

    predict = torch.argmax(x.logits, dim=-1).view(b, n)

    def greedy_sglang_triton():
        verify_tree_greedy_triton(*buffers(), *links, torch.argmax(x.logits, dim=-1).view(b, n))

    def greedy_kernel_sub():  # the substituted name, as eagle_sample calls it
        return eu.verify_tree_greedy_func(*buffers(), *links, predict, topk=2)

    def greedy_kernel_direct():
        buffers()
        return verify_tree_greedy(*links, depth=depth, target_predict=predict)

    temperature, top_k, top_p, min_p = PARAMS

    def sampling_direct():
        probs = torch.softmax(x.logits / temperature, dim=-1)
        probs = kernels.top_k_renorm_prob(probs, torch.full((b * n,), top_k))
        probs = kernels.top_p_renorm_prob(probs, torch.full((b * n,), top_p))
        probs = kernels.filter_probs(probs, min_p=torch.full((b * n,), min_p))
        coins = torch.rand(b, n)  # SGLang's acceptance coins; the final draw: a fresh key
        return verify_tree_sampling(*links, probs.view(b, n, vocab), depth=depth, coins=coins,
                                    keys=fresh_keys(b, "cpu"), positions=seq_lens + 1)

    probs = torch.softmax(x.logits / temperature, dim=-1).view(b, n, vocab)
    coins, final = torch.rand(b, n), torch.rand(b)

    def sampling_kernel_sub():  # unseeded: the substitution draws a fresh key per request
        return eu.tree_speculative_sampling_target_only(
            *buffers(), *links, coins, final, probs, None, 1.0, 1.0, True)

    def sampling_kernel_direct():
        buffers()
        return verify_tree_sampling(*links, probs, depth=depth, coins=coins,
                                    keys=fresh_keys(b, "cpu"), positions=seq_lens + 1)

    params = SamplingParams.of(b, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)

    def fused():
        return verify_tree_with_params(*links, x.logits.view(b, n, vocab), depth=depth,
                                       params=params)

    def fused_greedy():
        return verify_tree_greedy(*links, depth=depth, target_logits=x.logits.view(b, n, vocab))

    times = interleaved_best({
        "greedy_sub": eagle(greedy_info), "greedy_direct": greedy_direct,
        "greedy_from_logits": fused_greedy,
        "sampling_sub": eagle(sampled_info), "sampling_direct": sampling_direct,
        "sampling_fused": fused,
    }, args.repeats)
    # the kernels alone, in a group of their own: next to the calls above, whose large blocks
    # come and go, the first of them would pay for fresh pages
    times.update(interleaved_best({
        "greedy_kernel_sub": greedy_kernel_sub, "greedy_kernel_direct": greedy_kernel_direct,
    }, args.repeats * 5))
    times.update(interleaved_best({
        "sampling_kernel_sub": sampling_kernel_sub,
        "sampling_kernel_direct": sampling_kernel_direct,
    }, args.repeats * 3))
    triton_s = interleaved_best({"triton": greedy_sglang_triton}, max(1, args.repeats // 3))
    ms = {k: v * 1e3 for k, v in {**times, **triton_s}.items()}
    print(f"bench_sglang_tree_verify: b={b} N={n} V={vocab} depth={depth}, 1 thread, best of "
          f"{args.repeats} (CPU time)")
    print(f"greedy: eagle_sample substituted {ms['greedy_sub']:.3f} ms, specreg direct "
          f"(argmax + verify_tree_greedy) {ms['greedy_direct']:.3f} ms")
    print(f"greedy eagle_sample substituted / direct = "
          f"{times['greedy_sub'] / times['greedy_direct']:.3f}x (SGLang's call site included)")
    print(f"greedy wrapping: substituted kernel {ms['greedy_kernel_sub']:.3f} ms / specreg kernel "
          f"{ms['greedy_kernel_direct']:.3f} ms = "
          f"{times['greedy_kernel_sub'] / times['greedy_kernel_direct']:.3f}x (target <= 1.05x)")
    print(f"greedy substituted / specreg from logits ({ms['greedy_from_logits']:.3f} ms) = "
          f"{times['greedy_sub'] / times['greedy_from_logits']:.2f}x")
    print(f"greedy SGLang Triton under the interpreter {ms['triton']:.1f} ms: "
          f"substituted / SGLang = "
          f"{times['greedy_sub'] / triton_s['triton']:.4f}x (SGLang's default CPU greedy writes "
          "nothing, so it has no time to compare)")
    print(f"sampling (T={temperature}, top_k={top_k}, top_p={top_p}, min_p={min_p}): eagle_sample "
          f"substituted {ms['sampling_sub']:.3f} ms, specreg direct (softmax, renorms, min-p, "
          f"verify_tree_sampling) {ms['sampling_direct']:.3f} ms")
    print(f"sampling eagle_sample substituted / direct = "
          f"{times['sampling_sub'] / times['sampling_direct']:.3f}x (SGLang's call site included)")
    print(f"sampling wrapping: substituted kernel {ms['sampling_kernel_sub']:.3f} ms / specreg "
          f"kernel {ms['sampling_kernel_direct']:.3f} ms = "
          f"{times['sampling_kernel_sub'] / times['sampling_kernel_direct']:.3f}x "
          "(target <= 1.05x)")
    print(f"sampling substituted / specreg verify_tree_with_params ({ms['sampling_fused']:.3f} ms)"
          f" = {times['sampling_sub'] / times['sampling_fused']:.2f}x")
    print("sampling SGLang's own path: does not run on a CPU (top_k_renorm_prob and "
          "tree_speculative_sampling_target_only are None without CUDA)")


if __name__ == "__main__":
    main()
