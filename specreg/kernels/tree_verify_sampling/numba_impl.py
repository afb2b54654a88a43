"""The compiled CPU path of tree sampling, target-only rule (numba): the torch path's tokens.

Optional: used on CPU when numba imports (`pip install 'specreg[cpu]'`), the torch path
otherwise (`available`); numba is imported on the first call that asks, not with the family.
It computes what `torch_impl.verify_tree_sampling_torch` computes without `draft_probs`, bit for
bit, in compiled passes over the requests (`numba_kernels`) with three torch steps between them:

1. per request, `sibling_order` (the same pointer jumping), the children's p values counted 0
   for a token already tried at their parent, the earlier-siblings matrix and the parent coins;
2. torch: `eff + earlier @ eff` and the acceptance test, the torch path's very expressions on
   tensors of its shapes (the batched product's summation order is torch's on both paths);
3. per request, the first accepted child of every parent, the walk, the tried children of the
   last node, the final row read once into its block masses (p without the tried tokens, p
   where that has no mass), the draw's key lanes and the stream's words of the block keys;
4. the winning block (`race_numba.race_blocks`), then the winning token within it, its
   weights read again, and the outputs assembled (`assemble`: integer copies; a retrieve_index
   outside [0, b*N) or repeated on the path leaves them to `assemble_result`).

The exponentials E between the passes are torch's (`random_stream.exponentials_of`, on tensors
of the torch path's shapes), so no value depends on numba's libm; the rest is integer
arithmetic, float32 adds in the torch path's order (`block_race._halving_sum`) and float64
divisions, with no fastmath. Links that torch's scatter leaves undefined or refuses (two links
into one node, a link past N: unchecked values) send the call to the torch path.

Recursive rejection (with q) stays on the torch path: its row sums are torch's reductions,
whose order this path does not reproduce. Other dtypes, non-contiguous rows and an empty batch
take the torch path too.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import torch

from specreg.kernels.numba_rows import ROW_RAW, ROW_SHIFTS, compiled
from specreg.kernels.random_stream import exponentials_of
from specreg.kernels.random_stream.types import RACE_BLOCK
from specreg.kernels.tree_verify_greedy import assemble_result
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult
from specreg.kernels.tree_verify_sampling.torch_impl import verify_tree_sampling_torch
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs


def _kernels() -> ModuleType | None:
    """The compiled passes, imported on first use; None without numba."""
    return compiled("specreg.kernels.tree_verify_sampling.numba_kernels")


def available() -> bool:
    """Whether numba imports (the compiled path can run)."""
    return _kernels() is not None


def supports(inputs: TreeSamplingInputs) -> bool:
    """Whether the compiled path takes these (validated) inputs: the target-only rule (no
    `draft_probs`), CPU, float32 or bfloat16 rows, contiguous, at least one request."""
    p = inputs.target_probs
    return (
        inputs.draft_probs is None and inputs.candidates.shape[0] > 0
        and p.device.type == "cpu" and p.dtype in ROW_SHIFTS and p.is_contiguous()
    )


def _raw(t: torch.Tensor) -> np.ndarray:
    """The raw bits of a float32 / bfloat16 tensor as an unsigned numpy array (no copy)."""
    torch_raw, numpy_raw = ROW_RAW[t.dtype]
    return t.detach().view(torch_raw).numpy().view(numpy_raw)


def _ints(t: torch.Tensor) -> np.ndarray:
    return t.to(torch.int64).contiguous().numpy()


def verify_tree_sampling_numba(inputs: TreeSamplingInputs) -> TreeVerifyResult:
    """`verify_tree_sampling_torch` of target-only inputs, compiled: the same tokens. The
    inputs are validated, numba is `available` and `supports(inputs)`."""
    kernels = _kernels()
    assert kernels is not None, "numba_impl.available() is False"
    target = inputs.target_probs
    b, n, vocab = target.shape
    p, shift = _raw(target), ROW_SHIFTS[target.dtype]
    candidates = _ints(inputs.candidates)
    next_token, next_sibling = _ints(inputs.next_token), _ints(inputs.next_sibling)
    coins = inputs.coins.to(torch.float32).contiguous().numpy()
    parent, rank = np.empty((b, n), np.int64), np.empty((b, n), np.int64)
    x_ok, bad = np.empty((b, n), np.bool_), np.empty(b, np.int64)
    eff, coin = np.empty((b, n), np.float32), np.empty((b, n), np.float32)
    earlier = np.empty((b, n, n), np.float32)
    kernels.children_pass(next_token, next_sibling, candidates, p, shift, coins, parent, rank,
                          x_ok, eff, earlier, coin, bad)  # fmt: skip
    if bad.any():
        return verify_tree_sampling_torch(inputs)
    # The torch path's expressions (`target_only_walk`), on its shapes.
    eff_t = torch.from_numpy(eff)
    tried_mass = eff_t + (torch.from_numpy(earlier) @ eff_t.unsqueeze(2)).squeeze(2)
    hit = (torch.from_numpy(coin) < tried_mass / inputs.threshold_acc) | (
        eff_t >= inputs.threshold_single
    )
    depth, blocks = inputs.depth, -(-vocab // RACE_BLOCK)
    path, count = np.empty((b, depth + 1), np.int64), np.empty(b, np.int64)
    last, n_tried = np.empty(b, np.int64), np.empty(b, np.int64)
    tried, empty = np.empty((b, max(n, 1)), np.int64), np.empty(b, np.bool_)
    masses, lanes = np.empty((b, blocks), np.float32), np.empty((b, 2), np.int64)
    words = np.empty((b, blocks), np.int64)
    kernels.walk_and_masses(p, shift, candidates, parent, rank, x_ok, hit.numpy(),
                            _ints(inputs.keys), _ints(inputs.positions), depth, path, count,
                            last, tried, n_tried, empty, masses, lanes, words)  # fmt: skip
    noise = exponentials_of(torch.from_numpy(words)).numpy()
    block, token_words = np.empty(b, np.int64), np.empty((b, RACE_BLOCK), np.int64)
    kernels.race_blocks(masses, noise, lanes, vocab, block, token_words)
    token_noise = exponentials_of(torch.from_numpy(token_words)).numpy()
    bonus = np.empty(b, np.int64)
    kernels.race_tokens(p, shift, last, tried, n_tried, empty, block, token_noise, bonus)
    predicts, accept_index = np.empty(b * n, np.int64), np.empty_like(path)
    out = np.empty_like(path)
    if not kernels.assemble(candidates, _ints(inputs.retrieve_index), path, count, bonus,
                            predicts, accept_index, out):
        return assemble_result(inputs.candidates, inputs.retrieve_index, torch.from_numpy(path),
                               torch.from_numpy(count), torch.from_numpy(bonus))  # fmt: skip
    return TreeVerifyResult(
        predicts=torch.from_numpy(predicts), accept_index=torch.from_numpy(accept_index),
        accept_token_num=torch.from_numpy(count).to(torch.int32), bonus=torch.from_numpy(bonus),
        output_tokens=torch.from_numpy(out),
    )
