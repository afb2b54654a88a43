"""Chain verification under per-request sampling parameters: the public wrapper.

Greedy and sampled requests mixed in one batch.

`verify_chain_with_params(candidates, target, draft, params=...)` takes the target's and the
draft's raw scores ([b, n, V] and [b, n-1, V]: logits, or probabilities with
`probabilities=True`) and a `SamplingParams` batch. Per request:

- temperature 0: the greedy rule of `verify_chain_greedy` on the target scores (draft ignored,
  no coins used), so the tokens equal plain greedy decoding;
- temperature > 0: the chain rules of `verify_chain_sampling` (classic with a draft, target-only
  without) on p = filter(target / T) and q = filter(draft / T), filtered by the same rule
  (`specreg.kernels.filtering`). The drafts must have been sampled from that filtered q; the
  emitted tokens then follow the filtered, temperature-scaled target exactly.

Every draw reads the random stream keyed by the request's key (`request_keys`: its seed when
it has one) and the absolute output position, so its tokens do not depend on the rest of the
batch, its row, or the backend. Neither path builds a filtered [b, n, V]
tensor: the torch path walks positions over the requests still accepting and filters only the
rows they reach, chunk by chunk; the Triton kernel (one program per request) computes each
reached row's statistics in tiles and reads filtered probabilities on the fly.

Value checks: True checks every value before any work; None (the default) checks nothing on
an accelerator and everything before any work on the CPU, except for logits on the torch path
without a grammar mask or penalties: the scores' rows are then checked as the rule reads them
(a row's maximum, which its filter statistics or its greedy argmax compute anyway, must be
finite: no NaN, no +inf, not all -inf), so rows no request reaches are not checked; the
parameters, token ids, verify_lens, positions and coins are checked in full before any work.

Family: `types` (the input bundle), `checks` (validation of logit inputs), `reference` (the
plain per-request rule, the test oracle), `torch_impl`, `triton_impl`, and `numba_impl` with
`numba_kernels` (the torch path's draws from the filtered rows compiled for the CPU when numba
is installed, the `cpu` extra: the same tokens bit for bit; taken when the backend is chosen
automatically, never with `backend='torch'` or SPECREG_KERNEL_BACKEND=torch, and only for
float32 / bfloat16 logits; the filter statistics stay torch's).
"""

from __future__ import annotations

import torch

from specreg.backend import requested_backend, select_backend
from specreg.errors import KernelInputError
from specreg.kernels.chain.checks import check_chain
from specreg.kernels.chain.types import BackendChoice, ChainVerifyResult
from specreg.kernels.chain_params.checks import check_score_values
from specreg.kernels.chain_params.numba_impl import available as numba_available
from specreg.kernels.chain_params.numba_impl import supports as numba_supports
from specreg.kernels.chain_params.torch_impl import verify_chain_with_params_torch
from specreg.kernels.chain_params.triton_impl import verify_chain_with_params_triton
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.kernels.checks import check_params, should_check_values
from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, FilterOrder, filter_rule
from specreg.kernels.penalties import Penalties, apply_penalties_, chain_context
from specreg.kernels.random_stream import accept_coins_torch
from specreg.kernels.sampling import request_keys
from specreg.kernels.token_mask import apply_token_bitmask_
from specreg.contract.sampling_params import SamplingParams

__all__ = ["prepare_chain_params", "verify_chain_with_params"]


def verify_chain_with_params(
    candidates: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None = None,
    *,
    params: SamplingParams,
    probabilities: bool = False,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
    token_bitmask: torch.Tensor | None = None,
    penalties: Penalties | None = None,
    invariant: bool = False,
) -> ChainVerifyResult:
    """Verify a batch whose requests carry their own sampling parameters (module docstring).

    `target` [b, n, V] and `draft` [b, n-1, V] (or None: target-only rule for sampled requests)
    are logits, or probabilities with `probabilities=True` (any float dtype). `params` holds one
    value per request. Draws read the random stream keyed by each request's key
    (`request_keys(params, keys, generator=generator)`: `params.seed` for a seeded request,
    else `keys[r]`, else a fresh key) and `positions` [b] (the absolute output position of row
    0; default 0); `coins` [b, >= n-1] replaces the acceptance uniforms. `verify_lens` [b] caps each request
    (positions past it may hold -1 and are never read). With value checks (default on CPU) a bad
    parameter is a coded error (SR910-SR915), and so is a NaN, +inf or all -inf row of logits
    (SR904; by default on the CPU only in the rows the rule reads, module docstring); without them (GPU) the request is flagged in
    `result.param_error` and accepts nothing. `filter_order` ('specreg', 'vllm' or 'sglang';
    SR130 otherwise) says how top-k, top-p and min-p combine (`specreg.kernels.filtering`).
    `token_bitmask` int32 [b, n, ceil(V / 32)] (a grammar's allowed tokens after each verified
    prefix, `specreg.kernels.token_mask`) masks `target` and `draft` IN PLACE before verifying.
    `penalties` (`specreg.kernels.penalties`: repetition, frequency, presence, logit bias)
    penalise `target` IN PLACE at every position, counting the drafts before it as output.
    `invariant=True` runs the drafter-invariant rule for sampled requests (`verify_chain_invariant`
    on the processed rows: a draft is accepted iff it is the target's own race draw), so the
    tokens equal plain keyed sampling of the processed rows; `draft` is then not read.
    """
    inputs = prepare_chain_params(
        candidates, target, draft, params=params, probabilities=probabilities, keys=keys,
        positions=positions, coins=coins, verify_lens=verify_lens, generator=generator,
        check_values=check_values, backend=backend, block_v=block_v, filter_order=filter_order,
        token_bitmask=token_bitmask, penalties=penalties, invariant=invariant,
        rule_checks_reads=True,
    )
    if select_backend(candidates, requested=backend) == "triton":
        return verify_chain_with_params_triton(inputs, block_v=block_v)
    return verify_chain_with_params_torch(inputs, compiled=_compiled_cpu(inputs, backend))


def prepare_chain_params(
    candidates: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None = None,
    *,
    params: SamplingParams,
    probabilities: bool = False,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
    token_bitmask: torch.Tensor | None = None,
    penalties: Penalties | None = None,
    invariant: bool = False,
    rule_checks_reads: bool = False,
) -> ChainParamsInputs:
    """`verify_chain_with_params`'s steps before the rule runs: every check, the grammar mask
    and the penalties (both IN PLACE on `target` / `draft`), the per-request keys and
    acceptance coins. The lossy
    rules under sampling parameters (`specreg.kernels.relaxed`) share it.

    `rule_checks_reads=True` says the caller's torch rule checks the logit rows it reads
    (`ChainParamsInputs.check_reads`): with the CPU default (`check_values=None`), the torch
    backend and logits, every other value is checked here and the scores' rows are left to
    the rule, unless a grammar mask or penalties are given (a refusal must come before they
    change the scores in place). Otherwise every value is checked here when values are
    checked."""
    filter_rule(filter_order)
    b, n, vocab = check_chain(
        candidates, target, "target", verify_lens=verify_lens, draft_probs=draft, coins=coins,
        keys=keys, positions=positions, probabilities=False, check_values=False,
    )
    device = candidates.device
    values = should_check_values(device, check_values)
    check_params(params, b, vocab, device, values=values)
    check_reads = (  # not when masks or penalties change the scores in place before the rule
        rule_checks_reads and values and check_values is None and not probabilities
        and token_bitmask is None and penalties is None and _torch_backend(candidates, backend)
    )
    if values and probabilities:
        check_chain(
            candidates, target, "target", verify_lens=verify_lens, draft_probs=draft,
            coins=coins, positions=positions, probabilities=True, check_values=True,
        )
    elif values:
        check_score_values(candidates, target, draft, verify_lens, coins, positions, vocab,
                           scores=not check_reads)
    if token_bitmask is not None:
        mask_chain_scores(target, draft, token_bitmask, verify_lens=verify_lens,
                          probabilities=probabilities, values=values, backend=backend,
                          block_v=block_v)
    if penalties is not None:
        apply_penalties_(target, penalties, chain_context(candidates), check_values=values,
                         backend=backend)
    keys = request_keys(params, keys, generator=generator)
    positions = (
        torch.zeros(b, dtype=torch.int64, device=device) if positions is None
        else positions.to(torch.int64).contiguous()
    )
    if coins is None:
        coins = accept_coins_torch(keys, positions, candidates[:, 1:])
    return ChainParamsInputs(
        candidates=candidates, target=target, draft=draft, params=params, coins=coins,
        keys=keys, positions=positions, verify_lens=verify_lens, probabilities=probabilities,
        filter_order=filter_order, invariant=invariant, check_reads=check_reads,
    )


def _compiled_cpu(inputs: ChainParamsInputs, backend: BackendChoice) -> bool:
    """Whether the torch path's draws run compiled (`numba_impl`): the backend is chosen
    automatically ('auto', or None with SPECREG_KERNEL_BACKEND unset or 'auto'; an explicit
    'torch' keeps every step in torch), numba imports, and `numba_impl.supports(inputs)`."""
    requested = requested_backend() if backend is None else backend
    return requested == "auto" and numba_supports(inputs) and numba_available()


def _torch_backend(candidates: torch.Tensor, backend: BackendChoice) -> bool:
    """Whether the call runs the torch path (a bad `backend` reads False: the wrapper raises
    its SR116 after the value checks, as it always did)."""
    try:
        return select_backend(candidates, requested=backend) == "torch"
    except KernelInputError:
        return False


def mask_chain_scores(
    target: torch.Tensor, draft: torch.Tensor | None, bitmask: torch.Tensor, *,
    verify_lens: torch.Tensor | None, probabilities: bool, values: bool, backend: BackendChoice,
    block_v: int | None,
) -> None:
    """Mask target [b, n, V] and draft [b, n-1, V] in place with the grammar's bitmask
    [b, n, W]; rows past `verify_lens` are never read, so they may allow nothing."""
    b, n, _ = target.shape
    verified = None
    if verify_lens is not None:
        positions = torch.arange(n, device=target.device)
        verified = positions[None, :] < verify_lens.to(target.device)[:, None]
    check = bool(values)
    apply_token_bitmask_(target, bitmask, probabilities=probabilities, check_values=check,
                         backend=backend, block_v=block_v, verified=verified)
    if draft is not None:
        apply_token_bitmask_(
            draft, bitmask[:, : n - 1], probabilities=probabilities, check_values=False,
            backend=backend, block_v=block_v, field="token_bitmask (draft positions)",
        )
