"""Emitted-token log-probabilities on CPU: the cost on top of the verify step they describe.

    python benchmarks/bench_logprobs.py                 # b=64, n=8, V=32768, one thread
    python benchmarks/bench_logprobs.py --b 16 --v 4096 --repeats 3 --json

Inputs are those of bench_sampling_params.py (peaked rows, drafts that agree with the draft's
argmax 70% of the time), with the mixed parameter batch of `specreg demo`. From one run, median
of --repeats, it times:

- `verify`: `verify_chain_with_params` alone;
- `logprobs`: `emitted_logprobs(result, target, params=...)` for the emitted tokens only, then
  with `top_n=5` alternatives; ratio (verify + logprobs) / verify (the issue asks <= 1.1x);
- `log_softmax_all`: what a user would write instead: temperature, the filters and a full
  log-softmax over every [b, n, V] position, then a gather.

Peak extra memory of `emitted_logprobs` is measured in a subprocess (peak RSS, Linux) as a
fraction of the target's bytes (the issue asks <= 0.1x: no [b, n, V] copy).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import torch
from bench_sampling_params import make_inputs, sort_filter, timed

from specreg.testing.demo_params import mixed_demo_params
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.logprobs import emitted_logprobs


def verify(x, params):
    return verify_chain_with_params(x["candidates"], x["target"], x["draft"], params=params)


def log_softmax_all(x, params, result):
    probs = sort_filter(x["target"], params)  # filtered [b, n, V], as a framework would
    logs = torch.log(probs)
    tokens = result.output_tokens.clamp(min=0)
    return logs.gather(2, tokens[:, :, None])


def measure_memory(b: int, n: int, vocab: int) -> dict[str, float]:
    script = f"""
import json, sys, torch
sys.path.insert(0, {sys.path[0]!r})
from bench_logprobs import make_inputs, mixed_demo_params, verify, emitted_logprobs
x = make_inputs({b}, {n}, {vocab}, 0)
params = mixed_demo_params({b})
result = verify(x, params)
emitted_logprobs(result, x['target'], params=params, top_n=5)  # warm-up, imports
def status(key):
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1]) * 1024
with open('/proc/self/clear_refs', 'w') as f:
    f.write('5')
before = status('VmHWM')
emitted_logprobs(result, x['target'], params=params, top_n=5)
after = status('VmHWM')
print(json.dumps(dict(before=before, after=after, inputs=x['target'].numel() * 4)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b", type=int, default=64)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--v", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    x = make_inputs(args.b, args.n, args.v, 0)
    params = mixed_demo_params(args.b)
    result = verify(x, params)
    t_verify = timed(lambda: verify(x, params), args.repeats)
    t_lp = timed(lambda: emitted_logprobs(result, x["target"], params=params), args.repeats)
    t_top = timed(lambda: emitted_logprobs(result, x["target"], params=params, top_n=5), args.repeats)
    t_all = timed(lambda: log_softmax_all(x, params, result), args.repeats)
    mem = measure_memory(args.b, args.n, args.v)
    extra = max(mem["after"] - mem["before"], 0) / mem["inputs"]
    emitted = float(result.accept_len.float().mean()) + 1
    print(f"CPU, {torch.get_num_threads()} threads; b={args.b} n={args.n} V={args.v}; median of "
          f"{args.repeats}; mixed parameters, {emitted:.2f} emitted tokens per request")
    print(f"verify {t_verify * 1e3:8.1f} ms")
    print(f"logprobs          {t_lp * 1e3:8.1f} ms  (verify + logprobs) / verify "
          f"x{(t_verify + t_lp) / t_verify:5.2f}")
    print(f"logprobs top_n=5  {t_top * 1e3:8.1f} ms  (verify + logprobs) / verify "
          f"x{(t_verify + t_top) / t_verify:5.2f}")
    print(f"log_softmax_all   {t_all * 1e3:8.1f} ms  logprobs / it x{t_lp / t_all:5.2f}")
    print(f"peak extra memory of logprobs (top_n=5) {extra:.3f}x of the target's bytes")
    if args.json:
        print(json.dumps(dict(b=args.b, n=args.n, v=args.v, verify=t_verify, logprobs=t_lp,
                              logprobs_top5=t_top, log_softmax_all=t_all, peak_extra_memory=extra)))


if __name__ == "__main__":
    main()
