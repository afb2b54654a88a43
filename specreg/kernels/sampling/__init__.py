"""The sampling primitives' public wrappers: coins, exponential races, residuals, draws.

- `exponential_race_sample`: one draw per row from a (possibly unnormalised) probability row by
  the exponential race `argmax(p / E)`, `E ~ Exp(1)`. Same distribution as `torch.multinomial`,
  but never raises a device-side assert (a zero row returns index 0, see the function).
- `uniform_coins`: the uniform numbers verification consumes. Unseeded they come from
  `torch.rand`; seeded they are a pure integer hash of (seed, offset, column), so every
  tensor-parallel rank and every device computes the same coins without a broadcast.
- `request_coins`: the coins of a batch with per-request seeds (`SamplingParams.seed`).
- `request_keys`: each request's key on the random stream (its seed, else the caller's key for
  it, else a fresh one): what every verifier keys its draws by.
- `inverse_cdf_sample`: the draw used for correction and bonus tokens: the first index whose
  running mass exceeds `coin * total`, never an index of zero weight.
- `residual_weights`: `max(p - q, 0)`, with the documented fallback to `p` when it has no mass.

Family: `reference` (the plain per-row rules and the coin hash on Python ints, the test oracle)
and `torch_impl` (the torch implementation, with the CPU-tuned inverse CDF). The verifiers'
two-level race on the random stream is `specreg.kernels.block_race` (its oracle
`reference.block_race_reference` stays here).
These primitives have no Triton twin: the Triton verify kernels draw inside their own programs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    check_dtype,
    check_probabilities,
    check_same_device,
    check_shape,
    check_tensor,
    should_check_values,
)
from specreg.kernels.sampling.torch_impl import (
    exponential_race_torch,
    hash_coins,
    inverse_cdf_torch,
    residual_weights_torch,
)

if TYPE_CHECKING:
    from specreg.contract.sampling_params import SamplingParams

__all__ = [
    "exponential_race_sample",
    "inverse_cdf_sample",
    "request_coins",
    "request_keys",
    "residual_weights",
    "uniform_coins",
]


def exponential_race_sample(
    probs: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    noise: torch.Tensor | None = None,
    check_values: bool | None = None,
) -> torch.Tensor:
    """Draw one index per row of `probs` [N, V] by `argmax(probs / E)`, `E ~ Exp(1)`.

    `probs` need not be normalised (the race is scale invariant). Computed in float32; `E` is
    clamped to at least float32's smallest normal number so no division by zero happens. Entries
    of zero probability never win unless the whole row is zero, in which case index 0 is returned
    (the CPU path rejects such rows, SR904). `noise` replaces `E` (same shape, values >= 0),
    e.g. for a deterministic draw. Returns int64 [N].
    """
    check_shape("probs", probs, (None, None))
    check_dtype("probs", probs, FLOAT_DTYPES)
    _check_vocab("probs", probs)
    if noise is not None:
        check_shape("noise", noise, tuple(probs.shape))
        check_dtype("noise", noise, FLOAT_DTYPES)
        check_same_device(probs=probs, noise=noise)
    if should_check_values(probs.device, check_values):
        check_probabilities("probs", probs)
        if noise is not None and not bool((noise >= 0).all()):
            raise KernelInputError(
                problem(
                    "SR904",
                    "noise holds negative values or NaN",
                    accepted="non-negative Exp(1) draws (zeros are clamped to the smallest normal float32)",
                    fix="draw noise with torch.empty_like(probs).exponential_()",
                    field="noise",
                )
            )
    return exponential_race_torch(probs, generator=generator, noise=noise)


def _check_vocab(name: str, tensor: torch.Tensor) -> None:
    if tensor.shape[-1] < 1:
        raise KernelInputError(
            problem(
                "SR900",
                f"{name} has shape {list(tensor.shape)}: an empty vocab (last dimension 0)",
                accepted="[N, V] with V >= 1",
                fix=f"pass {name} over the whole vocab",
                field=name,
            )
        )


def uniform_coins(
    shape: Sequence[int],
    *,
    device: torch.device | str,
    seed: int | None = None,
    offsets: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Uniform float32 coins of `shape`.

    Without `seed`: `torch.rand` (with `generator`). With `seed`: a deterministic hash of
    (seed, offsets[row], column index of the last dimension), in [0, 1 - 2**-24]; `offsets`
    (int, shape `shape[:-1]`, e.g. each request's sequence length) makes coins differ per request
    and per step; without offsets every row uses offset 0. Identical on every device and rank.
    """
    shape = tuple(int(s) for s in shape)
    device = torch.device(device)
    if seed is None:
        return torch.rand(shape, generator=generator, device=device, dtype=torch.float32)
    if not shape:
        raise KernelInputError(
            problem(
                "SR900",
                "seeded coins need at least one dimension (the column)",
                accepted="shape with >= 1 dimension",
                fix="ask for shape (n,) or (b, n)",
                field="shape",
            )
        )
    if offsets is None:
        offsets = torch.zeros(shape[:-1], dtype=torch.int64, device=device)
    else:
        check_tensor("offsets", offsets)
        check_shape("offsets", offsets, shape[:-1])
        check_dtype("offsets", offsets, (torch.int32, torch.int64))
        if offsets.device != device:
            raise KernelInputError(
                problem(
                    "SR902",
                    f"offsets is on {offsets.device} but the coins are asked for on {device}",
                    accepted=f"offsets on {device}",
                    fix=f"move offsets to {device}",
                    field="offsets",
                )
            )
    columns = torch.arange(shape[-1], dtype=torch.int64, device=device)
    return hash_coins(int(seed), offsets.to(torch.int64).unsqueeze(-1), columns)


def residual_weights(
    p: torch.Tensor, q: torch.Tensor | None = None, *, exclude: torch.Tensor | None = None
) -> torch.Tensor:
    """Float32 `max(p - q, 0)` over the last dim; rows with no residual mass fall back to `p`.

    `q=None` with `exclude` (int64 [N], one token per row) means q is one-hot at `exclude`: the
    residual is p with that token's mass removed (an `exclude` outside [0, V), e.g. -1, removes
    nothing). The fallback only triggers when p <= q everywhere, which an exact rejection makes
    impossible (a rejection implies some p > q); it guards rounding and invalid inputs, and is the
    same rule the Triton kernels apply.
    """
    check_tensor("p", p)
    return residual_weights_torch(p, q, exclude=exclude)


def inverse_cdf_sample(weights: torch.Tensor, coins: torch.Tensor) -> torch.Tensor:
    """Index per row: the first i with `weights[i] > 0` and `cumsum(weights)[i] > coin * total`.

    `weights` [N, V] non-negative (need not sum to one), `coins` [N] in [0, 1). A zero-weight index
    is never returned: rounding that would run past the end lands on the last positive index.
    An all-zero row returns 0. Returns int64 [N].
    """
    check_shape("weights", weights, (None, None))
    check_dtype("weights", weights, FLOAT_DTYPES)
    _check_vocab("weights", weights)
    check_shape("coins", coins, (weights.shape[0],))
    check_dtype("coins", coins, FLOAT_DTYPES)
    check_same_device(weights=weights, coins=coins)
    return inverse_cdf_torch(weights, coins)


def request_coins(
    params: SamplingParams,
    columns: int,
    *,
    offsets: torch.Tensor | None,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """float32 [b, columns] uniforms: for a seeded request a hash of (its seed, its offset,
    column), so its coins do not depend on the rest of the batch or its place in it; for an
    unseeded one `torch.rand` with `generator`. `offsets` [b] default 0 (pass each request's
    sequence length so that coins differ per step)."""
    b = params.batch_size
    device = params.seed.device
    if offsets is None:
        offsets = torch.zeros(b, dtype=torch.int64, device=device)
    else:
        check_shape("offsets", offsets, (b,))
        check_dtype("offsets", offsets, (torch.int32, torch.int64))
    cols = torch.arange(columns, dtype=torch.int64, device=device)
    seeded = hash_coins(params.seed[:, None], offsets.to(torch.int64)[:, None], cols)
    drawn = torch.rand((b, columns), generator=generator, device=device, dtype=torch.float32)
    return torch.where((params.seed >= 0)[:, None], seeded, drawn)


def request_keys(
    params: SamplingParams,
    keys: torch.Tensor | None = None,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """int64 [b]: each request's key on the random stream. A seeded request
    (`params.seed >= 0`: vLLM's `SamplingParams.seed`, SGLang's `sampling_seed`) is keyed by
    its seed, so its tokens are a function of the seed alone; an unseeded one by `keys[r]` (the
    key its caller drew once for it) or, without `keys`, a fresh key from `generator`."""
    from specreg.kernels.random_stream import fresh_keys

    b = params.batch_size
    device = params.seed.device
    if keys is None:
        keys = fresh_keys(b, device, generator=generator)
    else:
        check_shape("keys", keys, (b,))
        check_dtype("keys", keys, (torch.int32, torch.int64))
        check_same_device(seed=params.seed, keys=keys)
    seeded = params.seed.to(torch.int64)
    return torch.where(params.seed >= 0, seeded, keys.to(torch.int64)).contiguous()
