"""`BlockVerifier`: the object `specreg_make_verifier` returns for dspark and dflash.

It wraps core chain verification (`specreg.kernels.chain.ChainVerifier`) and adds what a block
drafter needs: the draft-block builder, the proposal step (Markov walk for DSpark, independent
slots for DFlash), sampling verification from logits with ``q = softmax(corrected / T)``, and
ragged verify (per-request ``verify_lens``, DSpark only).
"""

from __future__ import annotations

import torch

from specreg.errors import ConfigError, KernelInputError, problem
from specreg.kernels.chain import ChainVerifier, ChainVerifyResult
from specreg.kernels.checks import check_shape
from specreg.kernels.sampling_params import SamplingParams
from specreg_dspark.config import BlockRuntime
from specreg_dspark.kernels.draft_block import build_draft_block
from specreg_dspark.markov import ExponentialRaceSampler, MarkovHead, greedy_sampler


class BlockVerifier:
    """Verification (and proposal helpers) for one resolved dspark/dflash plan."""

    rules = ("greedy", "chain_sampling")

    def __init__(
        self, runtime: BlockRuntime, *, backend: str | None = None, check_values: bool | None = None
    ) -> None:
        self.runtime = runtime
        self.num_draft_tokens = runtime.num_draft_tokens
        self.gamma = runtime.gamma
        self.supports_ragged_verify = runtime.algorithm == "dspark"
        self.chain = ChainVerifier(
            num_draft_tokens=runtime.num_draft_tokens, backend=backend, check_values=check_values
        )

    # ------------------------------------------------------------------------------ drafting
    def build_draft_block(
        self, anchor: torch.Tensor, anchor_positions: torch.Tensor, *, vocab_size: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Input ids and positions [b, draft_width] of the draft forward."""
        if self.runtime.mask_token_id is None:
            raise ConfigError(
                problem(
                    "SR304",
                    f"{self.runtime.algorithm} cannot build a draft block: mask_token_id is "
                    "unknown (no draft config was given)",
                    accepted="a plan resolved with the draft checkpoint's config.json",
                    fix="resolve with --speculative-draft-config PATH/config.json",
                    field="mask_token_id",
                )
            )
        return build_draft_block(
            anchor,
            anchor_positions,
            width=self.runtime.draft_width,
            mask_token_id=self.runtime.mask_token_id,
            vocab_size=vocab_size,
        )

    def propose(
        self,
        base_logits: torch.Tensor,
        anchor: torch.Tensor,
        *,
        head: MarkovHead | None = None,
        hidden: torch.Tensor | None = None,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Draft tokens [b, gamma] and the logits they were drawn from [b, gamma, V] (None when
        greedy). DSpark walks the Markov `head`; DFlash (no head) samples each slot of the
        first gamma block rows independently. The bonus-anchor layout passes base logits with
        the anchor's slot already skipped."""
        check_shape("base_logits", base_logits, (anchor.shape[0], None, None))
        if base_logits.shape[1] < self.gamma:
            raise KernelInputError(
                problem(
                    "SR900",
                    f"base_logits has {base_logits.shape[1]} block rows, fewer than gamma="
                    f"{self.gamma}",
                    accepted=f"base_logits [b, >= {self.gamma}, V]",
                    fix="pass the draft forward's logits for the whole block",
                    field="base_logits",
                )
            )
        base_logits = base_logits[:, : self.gamma]
        greedy = temperature <= 0
        if head is not None:
            if greedy:
                return head.greedy_block(base_logits, anchor, hidden), None
            sampler = ExponentialRaceSampler(temperature, generator=generator)
            return head.sample_block(base_logits, anchor, hidden, sampler)
        if self.runtime.algorithm == "dspark":
            raise ConfigError(
                problem(
                    "SR303",
                    "DSpark proposals need the Markov head (head=...)",
                    accepted="a MarkovHead built from the checkpoint",
                    fix="pass head=make_markov_head(...), or use dflash for a head-less draft",
                    field="markov_rank",
                )
            )
        logits = base_logits.float()
        flat = logits.reshape(-1, logits.shape[-1])
        if greedy:
            return greedy_sampler(flat).view(logits.shape[:2]), None
        tokens = ExponentialRaceSampler(temperature, generator=generator)(flat)
        return tokens.view(logits.shape[:2]), logits

    @staticmethod
    def candidates(anchor: torch.Tensor, draft_tokens: torch.Tensor) -> torch.Tensor:
        """[anchor, drafts...] as int64 [b, gamma + 1]: the chain the target verifies."""
        return torch.cat([anchor.to(torch.int64)[:, None], draft_tokens.to(torch.int64)], dim=1)

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

    def verify_greedy(
        self,
        candidates: torch.Tensor,
        target_logits: torch.Tensor,
        *,
        verify_lens: torch.Tensor | None = None,
    ) -> ChainVerifyResult:
        """Leading match against the target argmax; `verify_lens` [b] (1..n) caps each request."""
        self._ragged(verify_lens)
        return self.chain.verify_greedy(candidates, target_logits, verify_lens=verify_lens)

    def verify_sampling(
        self,
        candidates: torch.Tensor,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        *,
        verify_lens: torch.Tensor | None = None,
        seed: int | None = None,
        offsets: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> ChainVerifyResult:
        """Chain rejection sampling on probabilities (core rule)."""
        self._ragged(verify_lens)
        return self.chain.verify_sampling(
            candidates, target_probs, draft_probs,
            verify_lens=verify_lens, seed=seed, offsets=offsets, generator=generator,
        )

    def verify_sampling_from_logits(
        self,
        candidates: torch.Tensor,
        target_logits: torch.Tensor,
        draft_logits: torch.Tensor,
        *,
        temperature: float | None = None,
        verify_lens: torch.Tensor | None = None,
        seed: int | None = None,
        offsets: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        params: SamplingParams | None = None,
    ) -> ChainVerifyResult:
        """p = softmax(target / T), q = softmax(draft_logits / T), then chain rejection sampling.

        For DSpark `draft_logits` MUST be the corrected logits `propose`/`sample_block` returned
        (the drafts were drawn from them); base logits give a biased output. With `params`
        (instead of `temperature`) each request has its own temperature, top-k, top-p, min-p
        and seed, greedy requests (temperature 0) mixed in; nothing [b, n, V] is materialised.
        """
        if params is not None:
            self._ragged(verify_lens)
            return self.chain.verify_from_logits(
                candidates, target_logits, draft_logits, params=params, verify_lens=verify_lens,
                offsets=offsets, generator=generator,
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
        return self.verify_sampling(
            candidates, p, q, verify_lens=verify_lens, seed=seed, offsets=offsets,
            generator=generator,
        )

    def describe(self) -> str:
        r = self.runtime
        return (
            f"BlockVerifier({r.algorithm}, gamma={r.gamma}, num_draft_tokens="
            f"{r.num_draft_tokens}, draft_width={r.draft_width}, layout={r.layout}, "
            f"ragged_verify={self.supports_ragged_verify}, rules={', '.join(self.rules)})"
        )

    __repr__ = describe
