"""`BlockVerifier`: the object `specreg_make_verifier` returns for dspark and dflash.

It wraps core chain verification (`specreg.step.chain_verifier.ChainVerifier`) and adds sampling
verification from logits with ``q = softmax(corrected / T)`` and ragged verify (per-request
``verify_lens``, where the algorithm declares `supports_ragged_verify`). Its rules and ragged
support are the `AlgorithmSpec`'s; its kernel backend is fixed when the plan builds it. Drafting
lives in `specreg_dspark.drafter.BlockDrafter`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from specreg.backend import requested_backend
from specreg.step.call_keywords import checked_keywords
from specreg.step.chain_verifier import ChainVerifier
from specreg.errors import ConfigError, KernelInputError, problem
from specreg.contract.memory import Buffer
from specreg.contract.protocols import VerifyResult
from specreg.contract.sampling_params import SamplingParams
from specreg.contract.specs import AlgorithmSpec
from specreg_dspark.drafter import BlockDrafter
from specreg_dspark.sizes import BlockRuntime

if TYPE_CHECKING:
    from specreg.kernels.penalties.types import Penalties


class BlockVerifier:
    """Verification for one resolved dspark/dflash plan, at every width the plan serves.

    `rules` and `supports_ragged_verify` come from `algorithm`. `backend` ('auto' | 'torch' |
    'triton') is fixed at construction: by default what SPECREG_KERNEL_BACKEND asks for while the
    plan is resolved; so is `acceptance` (the plan's `config.acceptance`: a lossy rule,
    relaxed thresholds, typical or synthetic, reaches every chain verify call; lossless by
    default). The drafting helpers (`build_draft_block`, `propose`, `candidates`) are the
    verifier's `BlockDrafter`'s, kept here for callers that hold only the verifier.
    """

    def __init__(
        self,
        runtime: BlockRuntime,
        algorithm: AlgorithmSpec,
        *,
        widths: Sequence[int] = (),
        backend: str | None = None,
        check_values: bool | None = None,
        filter_order: str | None = None,
        acceptance: Any = None,
        verify_mode: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.rules = algorithm.verify_rules
        self.supports_ragged_verify = algorithm.supports_ragged_verify
        self.backend = requested_backend() if backend is None else backend
        self.chain = ChainVerifier(
            num_draft_tokens=max({*widths, runtime.num_draft_tokens}),
            widths=[*widths, runtime.num_draft_tokens],
            backend=self.backend,
            check_values=check_values,
            filter_order=filter_order,
            acceptance=acceptance,
            verify_mode=verify_mode,
        )
        self.num_draft_tokens = self.chain.num_draft_tokens
        self.widths = self.chain.widths
        self.gamma = self.num_draft_tokens - 1
        self.drafter = BlockDrafter(
            runtime, gammas=[w - 1 for w in self.widths], backend=self.backend,
            filter_order=filter_order,
        )
        self.build_draft_block = self.drafter.build_draft_block
        self.propose = self.drafter.propose
        self.candidates = self.drafter.candidates

    @property
    def verify_mode(self) -> str:
        """The plan's verify mode, run by the wrapped chain verifier ('standard' or
        'invariant')."""
        return self.chain.verify_mode

    # ---------------------------------------------------------------------------- verifying
    def _ragged(self, verify_lens: torch.Tensor | None) -> None:
        if verify_lens is not None and not self.supports_ragged_verify:
            raise ConfigError(
                problem(
                    "SR311",
                    f"{self.runtime.algorithm} does not support ragged verify (verify_lens)",
                    accepted="verify_lens only with dspark",
                    fix="drop verify_lens, or use --speculative-algorithm dspark",
                    field="verify_lens",
                )
            )

    @checked_keywords
    def verify_greedy(
        self,
        candidates: torch.Tensor,
        target_logits: torch.Tensor,
        *,
        verify_lens: torch.Tensor | None = None,
        draft_lengths: Sequence[int] | torch.Tensor | None = None,
    ) -> VerifyResult:
        """Leading match against the target argmax; `verify_lens` [b] (1..n) caps each request
        (dspark's ragged verify), `draft_lengths` [b] (0..n-1, 0 = no speculation) is the
        serving loop's per-request length (dspark and dflash; `specreg.step.draft_lengths`)."""
        self._ragged(verify_lens)
        return self.chain.verify_greedy(
            candidates, target_logits, verify_lens=verify_lens, draft_lengths=draft_lengths
        )

    @checked_keywords(refused=("seed",))
    def verify_sampling(
        self,
        candidates: torch.Tensor,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        *,
        params: SamplingParams | None = None,
        invariant: bool | torch.Tensor | None = None,
        keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        coins: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        verify_lens: torch.Tensor | None = None,
        draft_lengths: Sequence[int] | torch.Tensor | None = None,
        block_v: int | None = None,
        token_bitmask: torch.Tensor | None = None,
        penalties: Penalties | None = None,
        seed: None = None,
    ) -> VerifyResult:
        """Chain rejection sampling on probabilities (core rule): `ChainVerifier.verify_sampling`
        with its keywords; `verify_lens` only where the algorithm verifies ragged (dspark)."""
        self._ragged(verify_lens)
        return self.chain.verify_sampling(
            candidates, target_probs, draft_probs, params=params, invariant=invariant, keys=keys,
            positions=positions, coins=coins, generator=generator, verify_lens=verify_lens,
            draft_lengths=draft_lengths, block_v=block_v, token_bitmask=token_bitmask,
            penalties=penalties, seed=seed,
        )

    @checked_keywords(refused=("seed",))
    def verify_sampling_from_logits(
        self,
        candidates: torch.Tensor,
        target_logits: torch.Tensor,
        draft_logits: torch.Tensor,
        *,
        temperature: float | None = None,
        params: SamplingParams | None = None,
        invariant: bool | torch.Tensor | None = None,
        keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        coins: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        verify_lens: torch.Tensor | None = None,
        draft_lengths: Sequence[int] | torch.Tensor | None = None,
        block_v: int | None = None,
        token_bitmask: torch.Tensor | None = None,
        penalties: Penalties | None = None,
        seed: None = None,
    ) -> VerifyResult:
        """p = softmax(target / T), q = softmax(draft_logits / T), then chain rejection sampling.

        For DSpark `draft_logits` MUST be the corrected logits `propose`/`sample_block` returned
        (the drafts were drawn from them); base logits give a biased output. With `params` (a
        `SamplingParams`, instead of `temperature`) each request has its own temperature, top-k,
        top-p, min-p and seed, greedy requests (temperature 0) mixed in; nothing [b, n, V] is
        materialised (`ChainVerifier.verify_from_logits`), except under a lossy plan rule, which
        runs on the materialised filtered p and q (`specreg.kernels.relaxed`). The other
        keywords are `verify_sampling`'s; `seed` is refused as there: beside `params` (SR910) a
        request's seed is `params.seed`, without it the request's key, `keys=` (SR930).
        """
        inputs = dict(
            invariant=invariant, keys=keys, positions=positions, coins=coins,
            generator=generator, verify_lens=verify_lens, draft_lengths=draft_lengths,
            block_v=block_v, token_bitmask=token_bitmask, penalties=penalties,
        )
        if params is not None:  # seed= beside params is the chain verifier's SR910
            self._ragged(verify_lens)
            return self.chain.verify_from_logits(
                candidates, target_logits, draft_logits, params=params, seed=seed, **inputs
            )
        if temperature is None or not temperature > 0:
            raise KernelInputError(
                problem(
                    "SR904",
                    f"temperature={temperature!r} is not positive",
                    accepted="temperature > 0 (use verify_greedy for temperature 0)",
                    fix="call verify_greedy for greedy requests",
                    field="temperature",
                )
            )
        p = torch.softmax(target_logits.float() / temperature, dim=-1)
        q = torch.softmax(draft_logits.float() / temperature, dim=-1)
        return self.verify_sampling(candidates, p, q, seed=seed, **inputs)

    def memory(self) -> list[Buffer]:
        """Per request at the widest width: the chain verifier's (the drafting buffers are the
        plan's drafter's)."""
        return self.chain.memory()

    def describe(self) -> str:
        r = self.runtime
        return (
            f"BlockVerifier({r.algorithm}, gamma={r.gamma}, num_draft_tokens="
            f"{r.num_draft_tokens}, widths={list(self.widths)}, draft_width={r.draft_width}, "
            f"layout={r.layout}, "
            f"ragged_verify={self.supports_ragged_verify}, rules={', '.join(self.rules)}"
            + (f", acceptance={self.chain.acceptance} (LOSSY)" if self.chain.lossy else "")
            + (", verify_mode=invariant" if self.chain.verify_mode == "invariant" else "") + ")"
        )

    __repr__ = describe
