"""Chain verification's public wrappers: validate, choose the backend, dispatch.

Greedy leading match and lossless chain rejection sampling, shared by every chain drafter
(DSpark/DFlash blocks, EAGLE with topk=1, n-gram drafters).

Layout. `candidates` [b, n] (int32/int64): column 0 is the anchor (the last committed token),
columns 1..n-1 are the gamma = n-1 drafts. Row i of the target (`target_logits[:, i]`,
`target_probs[:, i]`, [b, n, V]) is the target's distribution for the token FOLLOWING
`candidates[:, i]`. `draft_probs[:, i]` ([b, n-1, V]) is q, the distribution draft
`candidates[:, i+1]` was sampled from.

Rules.
- Greedy: accept drafts while `candidates[:, i+1] == argmax(target_logits[:, i])` (ties go to the
  lowest index, like torch.argmax); the bonus is the argmax of the row after the accepted drafts.
- Chain sampling (classic speculative sampling): accept draft x of row i iff
  `coin_i * q(x) < p(x)` (strict: q(x) = 0 < p(x) accepts, p(x) = 0 never accepts). At the first
  rejection the correction token is drawn from `norm(max(p - q, 0))` of that row; if every draft
  is accepted the bonus is drawn from p of the last verified row. This emits tokens
  distributed exactly as the target, provided q is the distribution the drafts were sampled
  from. The acceptance test on probabilities is `u * q(x) < p(x)`, the log-space test
  `log u + log q(x) < log p(x)` without a logarithm: exact in float32 on every backend.
- Randomness: every draw reads the counter-based random stream (`specreg.kernels.random_stream`)
  keyed by (request key, role, absolute position): the acceptance uniform of draft x at
  position t is the stream's uniform of (key, ACCEPT, t, x); the emitted token is a race in
  the RESIDUAL role (after a rejection) or the SAMPLE role (the bonus) at the stopping row's
  position. One independent value per (position, token): no draw depends on the request's
  row, the batch, padding, chunking or the backend.
- The draw (correction or bonus) is an exponential race in two levels: the block
  of RACE_BLOCK = 128 token ids with the largest mass / E (E ~ Exp(1) per block), then the
  token of that block with the largest w / E (E ~ Exp(1) per token). P(block) = mass / total and
  P(token | block) = w / mass, so the token follows the weights exactly; it needs one read of
  the row (the block masses, summed in one fixed order so every backend gets the same bits),
  128 weights read again, and the stream's values of about V / 128 + 128 keys, drawn lazily for
  the one row each request stops at. The same key and position give the same token on torch
  and Triton, on any device and in any batch.
- Drafter-invariant (`verify_chain_invariant`, opt-in): the target's token of row i is the
  SAMPLE-role race of p_i at the row's absolute position, i.e. exactly what plain sampling
  (`sample_tokens`, a verify without drafts) draws there; a draft is accepted iff it equals
  that token, and the first target token no draft matched is emitted. The emitted tokens are
  then the tokens of plain sampling with the same keys, whatever the drafter, the batch or the
  backend; q is never read. A drafter that draws its own tokens by the same race on q (same
  keys, SAMPLE role, same positions) matches with probability >= (1 - d) / (1 + d), d = TV(p,
  q); deterministic drafts match with probability p(draft), as under the standard rule.
- Target only (`verify_chain_target_only`, or `draft_probs=None`): for drafters that expose no q
  (n-gram, greedy drafters, or a q that was not kept). Accept x with probability p(x)
  (`coin < p(x)`); on rejection draw from p with x's mass removed. This is the classic rule with
  q = one-hot(x), and it is lossless whatever produced x (given x, the emitted token is
  distributed as p). It is also SGLang's target-only tree rule with thresholds 1.0 on a chain.
- All-zero q rows are NOT a "target only" signal: no draft can be sampled from an empty
  distribution, and the classic rule would then accept every x with p(x) > 0, which is not
  lossless. The CPU path rejects them (SR904, pointing at the target-only rule); on GPU (no value
  checks by default) the formula is applied as written.
- Ragged verify (`verify_lens` [b], DSpark): request r verifies only its first verify_lens[r]
  positions, exactly as if its chain had length verify_lens[r]: accept_len <= verify_lens[r] - 1
  and the bonus comes from the row at the capped position (argmax, or a draw from p).
- Rounding guard: if the residual `max(p - q, 0)` has no mass (impossible after an exact
  rejection, possible with rounding or invalid GPU inputs), the token is drawn from p instead.
- Invalid token ids reaching the GPU path unchecked are never accepted and never read out of
  bounds (loads are masked); `check_values=True` raises SR903 instead (it synchronises).

Value checks (`check_values`). True: every value, before any work (token ids SR903; verify_lens,
positions, coins, and every probability finite and >= 0 with positive mass at every verified
row, SR904), on any device. False: none. None (the default): none on an accelerator; on the
CPU, for the torch path of `verify_chain_sampling`, `verify_chain_target_only`,
`verify_chain_invariant` and `sample_tokens`, what the rule reads:
- before any work, in full: the token ids at verified positions, verify_lens, positions and
  coins ([b, n] at most);
- as the rule reads them, before any result: p(x) and q(x) of every verified draft (finite,
  >= 0; a q row with q(x) = 0 is read whole, so an all-zero q row is SR904 as above), and every
  row a draw reads: p at each request's stopping row, q at a rejected row, and, for the
  invariant rule, every p row a request reaches (values finite and >= 0, a finite float32 sum,
  positive mass for p). The checks use what the draw computes anyway (the block masses) and
  one integer min (and max) of each row's bits while the row is in cache; a row that fails
  that quick test is checked exactly in its own dtype (`checks.check_read_rows`).
`verify_chain_greedy` (torch path, CPU default) checks the token ids and verify_lens in full
and the NaN of the rows each request reaches, from their argmax (a row's argmax is its first
NaN, so one value per row is read). Rows the rule does not read (before the stop, except p(x)
and q(x); after it; past verify_lens) are not checked by default: their values cannot change
the result. The lossy
rules (`specreg.kernels.relaxed`) and the Triton path check every value when values are
checked, as with True.

Family. `checks` (validation), `types` (the result and the sampling-input bundle), `reference`
(the plain per-request rules, the test oracle), `torch_impl` (vectorised over the batch: the CPU
path, with its CPU-tuned branches), `numba_impl` with `numba_kernels` (chain sampling compiled
for the CPU when numba is installed, the `cpu` extra: the torch path's tokens bit for bit, and
with the CPU-default read checks its errors, a request whose values fail a quick test handing
the call to the torch path's exact checks; taken when the backend is chosen automatically and
the rows are contiguous float32 or bfloat16; `backend='torch'` or SPECREG_KERNEL_BACKEND=torch
keeps the torch path) and `triton_impl` (one program per
request; the vocab is streamed in BLOCK_V tiles with int64 offsets; no [b, n, V] temporaries,
no host synchronisation).

For the chain families built on this one (`chain_params`, `relaxed`), the entry also exports
the walk's shared pieces, unchecked: `accept_limits`, `leading_run` and `assemble` (the result),
`emit_tokens` and `emit_lanes` (the emitted token's race on the torch path and its key lanes),
and the Triton kernels' `empty_outputs` with the device functions `emit_token` and
`write_result` (where Triton is installed).
"""

from __future__ import annotations

import torch

from specreg.backend import requested_backend, select_backend
from specreg.errors import KernelInputError
from specreg.kernels.chain.checks import check_chain, check_from_predict
from specreg.kernels.chain.numba_impl import available as numba_available
from specreg.kernels.chain.numba_impl import supports as numba_supports
from specreg.kernels.chain.numba_impl import verify_chain_sampling_numba
from specreg.kernels.chain.torch_impl import (
    accept_limits,
    assemble,
    emit_lanes,
    emit_tokens,
    leading_run,
    verify_chain_greedy_from_predict_torch,
    verify_chain_greedy_torch,
    verify_chain_invariant_torch,
    verify_chain_sampling_torch,
)
from specreg.kernels.chain.triton_impl import (
    empty_outputs,
    verify_chain_greedy_triton,
    verify_chain_invariant_triton,
    verify_chain_sampling_triton,
)
from specreg.kernels.chain.types import BackendChoice, ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.checks import check_shape, should_check_values
from specreg.kernels.random_stream import accept_coins_torch, stream_keys
from specreg.kernels.triton_shim import triton

if triton is not None:
    from specreg.kernels.chain.triton_impl import emit_token, write_result

__all__ = [
    "accept_limits",
    "assemble",
    "emit_lanes",
    "emit_tokens",
    "empty_outputs",
    "leading_run",
    "sample_tokens",
    "verify_chain_greedy",
    "verify_chain_greedy_from_predict",
    "verify_chain_invariant",
    "verify_chain_sampling",
    "verify_chain_target_only",
]
if triton is not None:
    __all__ += ["emit_token", "write_result"]


def verify_chain_greedy(
    candidates: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Greedy leading-match verification of `candidates` [b, n] against `target_logits` [b, n, V].

    `target_logits` may be bf16, fp16, fp32 or fp64 (probabilities work too: argmax is the same).
    `verify_lens` [b] (values 1..n) caps request r at its first verify_lens[r] positions.
    `check_values`: True checks the token ids and every value for NaN before any work
    (synchronises); None (default) checks nothing on an accelerator and, on the CPU, the token
    ids and the NaN of the rows each request reaches (module docstring, "Value checks").
    `backend`: None reads `SPECREG_KERNEL_BACKEND` ('auto' picks by device), or force 'torch' /
    'triton'.
    """
    check_reads = _checks_reads(candidates, check_values, backend)
    check_chain(
        candidates, target_logits, "target_logits",
        verify_lens=verify_lens, probabilities=False, check_values=check_values,
        all_rows=not check_reads,
    )
    if select_backend(candidates, requested=backend) == "triton":
        return verify_chain_greedy_triton(
            candidates, target_logits, verify_lens=verify_lens, block_v=block_v
        )
    return verify_chain_greedy_torch(
        candidates, target_logits, verify_lens=verify_lens, check_reads=check_reads
    )


def verify_chain_greedy_from_predict(
    candidates: torch.Tensor,
    target_predict: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None = None,
    vocab_size: int | None = None,
    check_values: bool | None = None,
) -> ChainVerifyResult:
    """Greedy verification from the target's argmax already computed (`target_predict` [b, n]).

    Runs as torch ops on any device (small: [b, n]) without host synchronisation. With
    `vocab_size` and value checks on, token ids in both inputs must lie in [0, vocab_size).
    """
    check_from_predict(
        candidates, target_predict, verify_lens=verify_lens, vocab_size=vocab_size,
        check_values=check_values,
    )
    return verify_chain_greedy_from_predict_torch(
        candidates, target_predict, verify_lens=verify_lens
    )


def verify_chain_sampling(
    candidates: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    *,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Lossless chain rejection sampling (see the module docstring for the rule).

    `target_probs` [b, n, V] and `draft_probs` [b, n-1, V] are probabilities (any float dtype,
    compared in float32); `draft_probs=None` selects the target-only rule. Every random draw
    comes from the counter-based stream keyed by `keys` int64 [b] (each request's key: its seed,
    or a key drawn once for the request) and `positions` int64 [b] (the absolute output
    position of the token row 0 verifies; default 0): the acceptance uniform of each draft
    (ACCEPT role, per position and draft token) and the correction / bonus race (RESIDUAL /
    SAMPLE role at the stopping row's position). Without `keys` each request gets a fresh
    64-bit key from `generator` (reproducible only through the generator). `coins` [b, >= n-1]
    replaces the acceptance uniforms with a caller's own (a framework's, for parity).
    `verify_lens` [b] caps the verified positions. `check_values`: True checks every value
    before any work, False none, None (default) none on an accelerator and, on the CPU, what
    the rule reads (module docstring, "Value checks"). On the CPU with numba installed and the
    backend chosen automatically, the compiled path runs where it applies (module docstring,
    "Family"); `backend='torch'` forces the torch path (the same tokens).
    """
    inputs = sampling_inputs(
        candidates, target_probs, draft_probs, keys=keys, positions=positions, coins=coins,
        verify_lens=verify_lens, generator=generator, check_values=check_values,
        backend=backend, rule_checks_reads=True,
    )
    if select_backend(candidates, requested=backend) == "triton":
        return verify_chain_sampling_triton(inputs, block_v=block_v)
    if _compiled_cpu(inputs, backend):
        return verify_chain_sampling_numba(inputs)
    return verify_chain_sampling_torch(inputs)


def verify_chain_target_only(
    candidates: torch.Tensor, target_probs: torch.Tensor, **kwargs: object
) -> ChainVerifyResult:
    """Lossless chain sampling for drafters without a q: accept x with probability p(x), on
    rejection draw from p with x removed. The keywords of `verify_chain_sampling` (keys,
    positions, coins, verify_lens, generator, check_values, backend, block_v)."""
    return verify_chain_sampling(candidates, target_probs, None, **kwargs)  # type: ignore[arg-type]


def verify_chain_invariant(
    candidates: torch.Tensor,
    target_probs: torch.Tensor,
    *,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """The drafter-invariant rule (module docstring): the tokens equal plain keyed sampling
    (`sample_tokens`) with the same `keys` and `positions`, whatever the drafts. Inputs as
    `verify_chain_sampling`'s, without q or coins (the rule reads neither)."""
    inputs = sampling_inputs(
        candidates, target_probs, None, keys=keys, positions=positions, coins=None,
        verify_lens=verify_lens, generator=generator, check_values=check_values,
        backend=backend, rule_checks_reads=True,
    )
    if select_backend(candidates, requested=backend) == "triton":
        return verify_chain_invariant_triton(inputs, block_v=block_v)
    return verify_chain_invariant_torch(inputs)


def sample_tokens(
    probs: torch.Tensor,
    *,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> torch.Tensor:
    """Plain sampling on the random stream: int64 [b], one token per row of `probs` [b, V]
    (probabilities, any float dtype), the SAMPLE-role race at (keys[r], positions[r]). A
    framework's plain sampler calls this so that its tokens equal what the drafter-invariant
    verifiers emit with speculation on. It is `verify_chain_invariant` with no drafts."""
    check_shape("probs", probs, (None, None))
    candidates = torch.zeros((probs.shape[0], 1), dtype=torch.int64, device=probs.device)
    return verify_chain_invariant(
        candidates, probs[:, None], keys=keys, positions=positions, generator=generator,
        check_values=check_values, backend=backend, block_v=block_v,
    ).bonus


def sampling_inputs(
    candidates: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    *,
    keys: torch.Tensor | None,
    positions: torch.Tensor | None,
    coins: torch.Tensor | None,
    verify_lens: torch.Tensor | None,
    generator: torch.Generator | None,
    check_values: bool | None,
    backend: BackendChoice = None,
    rule_checks_reads: bool = False,
) -> ChainSamplingInputs:
    """`verify_chain_sampling`'s inputs, checked, with the stream's keys and acceptance coins
    filled in: shared by every rule that verifies a chain from probabilities (the lossless one
    and the lossy ones).

    `rule_checks_reads=True` says the caller's torch rule checks the probabilities it reads
    (`ChainSamplingInputs.check_reads`): with the CPU default (`check_values=None`) and the
    torch backend, only the [b, n] inputs are checked here and the probability rows are left
    to the rule. Otherwise every value is checked here when values are checked."""
    check_reads = rule_checks_reads and _checks_reads(candidates, check_values, backend)
    check_chain(
        candidates, target_probs, "target_probs",
        verify_lens=verify_lens, draft_probs=draft_probs, coins=coins, keys=keys,
        positions=positions, probabilities=True, check_values=check_values,
        all_rows=not check_reads,
    )
    keys, positions = stream_keys(
        candidates.shape[0], candidates.device, keys, positions, generator=generator
    )
    if coins is None:
        coins = accept_coins_torch(keys, positions, candidates[:, 1:])
    return ChainSamplingInputs(
        candidates=candidates, target_probs=target_probs, draft_probs=draft_probs, coins=coins,
        keys=keys, positions=positions, verify_lens=verify_lens, check_reads=check_reads,
    )


def _compiled_cpu(inputs: ChainSamplingInputs, backend: BackendChoice) -> bool:
    """Whether chain sampling takes the compiled CPU path (`numba_impl`): the backend is chosen
    automatically ('auto', or None with SPECREG_KERNEL_BACKEND unset or 'auto'; an explicit
    'torch' keeps the torch path), numba imports, and `numba_impl.supports(inputs)`."""
    requested = requested_backend() if backend is None else backend
    return requested == "auto" and numba_supports(inputs) and numba_available()


def _checks_reads(
    candidates: object, check_values: bool | None, backend: BackendChoice
) -> bool:
    """Whether the rule checks the values it reads (the CPU default of the torch path) instead
    of every value being checked before it runs. A bad `backend` reads False: the wrapper
    raises its SR116 after the value checks, as it always did."""
    if check_values is not None or not isinstance(candidates, torch.Tensor):
        return False
    if not should_check_values(candidates.device, None):
        return False
    try:
        return select_backend(candidates, requested=backend) == "torch"
    except KernelInputError:
        return False
