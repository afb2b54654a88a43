"""`BlockDrafter`: the object `plan.drafter` holds for dspark and dflash (a `BlockDrafterProtocol`).

It builds the draft block of one draft forward ([anchor, MASK, ...]) and proposes the drafts from
the block's logits: through the Markov head for DSpark (a walk that corrects each slot from the
previous draft token), independently per slot for DFlash. `make_head` builds the head module the
checkpoint's weights load into. With adaptive candidates, `propose(..., gamma=s)` proposes the
first s drafts of the same block. With `params=` (per-request `SamplingParams`) each block
position is drawn from the filtered q the with-draft verify rule reads
(`specreg.step.draft_sampling`), greedy requests taking the argmax. Its kernel backend and filter
order are fixed when the plan builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from specreg.backend import requested_backend
from specreg.step.call_keywords import checked_keywords
from specreg.errors import ConfigError, KernelInputError, problem
from specreg.kernels.checks import check_shape
from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, filter_rule
from specreg.contract.memory import PER_REQUEST, Buffer
from specreg_dspark.kernels.draft_block import build_draft_block
from specreg_dspark.kernels.markov_head import MarkovHead, greedy_sampler, make_markov_head
from specreg_dspark.sizes import BlockRuntime

if TYPE_CHECKING:
    from specreg.contract.sampling_params import SamplingParams


class BlockDrafter:
    """Draft-block construction and proposal for one resolved dspark/dflash plan.

    `backend` ('auto' | 'torch' | 'triton') is fixed at construction: by default what
    SPECREG_KERNEL_BACKEND asks for while the plan is resolved.
    """

    needs = "target_hidden_states"  # specreg.contract.protocols.DRAFTER_NEEDS

    def __init__(
        self, runtime: BlockRuntime, *, gammas: Sequence[int] = (), backend: str | None = None,
        filter_order: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.backend = requested_backend() if backend is None else backend
        self.filter_order = filter_rule(filter_order or DEFAULT_FILTER_ORDER).name
        self.gammas = tuple(sorted({*gammas, runtime.gamma}))
        self.gamma = max(self.gammas)
        self.draft_width = runtime.draft_width
        self.mask_token_id = runtime.mask_token_id
        self.sample_from_anchor = runtime.sample_from_anchor

    @checked_keywords
    def make_head(self, *, vocab_size: int, hidden_size: int) -> MarkovHead | None:
        """The Markov head the checkpoint declares (untrained: load its weights), or None."""
        if self.runtime.markov_rank <= 0:
            return None
        return make_markov_head(
            self.runtime.markov_head_type or "vanilla",
            vocab_size=vocab_size, rank=self.runtime.markov_rank, hidden_size=hidden_size,
        )

    def _gamma(self, gamma: int | None) -> int:
        if gamma is None:
            return self.runtime.gamma
        if gamma not in self.gammas:
            raise KernelInputError(
                problem(
                    "SR313",
                    f"gamma={gamma!r} is not one this plan serves",
                    accepted=", ".join(str(g) for g in self.gammas),
                    fix="propose the main config's gamma or one adaptive candidate's",
                    field="gamma",
                )
            )
        return gamma

    @checked_keywords
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
                    fix="resolve with --speculative-draft-model-path FOLDER (the draft checkpoint's, holding "
                    "config.json)",
                    field="mask_token_id",
                )
            )
        return build_draft_block(
            anchor,
            anchor_positions,
            width=self.runtime.draft_width,
            mask_token_id=self.runtime.mask_token_id,
            vocab_size=vocab_size,
            backend=self.backend,
        )

    @checked_keywords
    def propose(
        self,
        base_logits: torch.Tensor,
        anchor: torch.Tensor,
        *,
        head: Any = None,
        hidden: torch.Tensor | None = None,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
        gamma: int | None = None,
        draft_lengths: Any = None,
        params: SamplingParams | None = None,
        keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Draft tokens [b, gamma] and the logits they were drawn from [b, gamma, V] (None when
        greedy). DSpark walks the Markov `head`; DFlash (no head) samples each slot of the
        first gamma block rows independently. The bonus-anchor layout passes base logits with
        the anchor's slot already skipped. `draft_lengths` [b] (0..gamma,
        `specreg.step.draft_lengths`): request r proposes its first draft_lengths[r] drafts, the
        anchor filling the rest (never verified; their logits rows are not used). `params` (a
        `SamplingParams` of b requests, instead of `temperature`): request r's drafts are drawn
        from filter(logits / T_r) under its own top-k, top-p and min-p, as the verifier filters
        q (`specreg.step.draft_sampling`), greedy requests taking the argmax; the logits are always
        returned (hand them to `verify_sampling_from_logits(..., params=)`). Every sampled slot
        is the SAMPLE-role race on the random stream at (the request's key `keys[r]`, slot k's
        absolute position `positions[r] + k`); a seeded request's key is its seed, missing keys
        are drawn once from `generator`; without `positions` every request draws under a fresh
        key (a key reused at one position would repeat its draws step after step)."""
        if params is not None and temperature != 0.0:
            raise KernelInputError(
                problem(
                    "SR927",
                    f"propose got params= and temperature={temperature!r}: with params the "
                    "temperature is per request",
                    accepted="params= alone, or temperature= alone",
                    fix="drop temperature= and put each request's temperature in "
                    "SamplingParams.of(..., temperature=...)",
                    field="temperature",
                )
            )
        if draft_lengths is not None:
            from specreg.kernels.checks import check_draft_lengths
            from specreg.step.draft_lengths import cut_chain

            wanted = self._gamma(gamma)
            capped = check_draft_lengths(
                draft_lengths, anchor.shape[0], wanted, device=anchor.device,
                what=f"a block of {wanted} drafts",
            )
            drafts, logits = self.propose(  # every keyword but draft_lengths, forwarded
                base_logits, anchor, head=head, hidden=hidden, temperature=temperature,
                generator=generator, gamma=gamma, params=params, keys=keys, positions=positions,
            )
            return cut_chain(drafts, capped, anchor), logits
        wanted = self._gamma(gamma)
        check_shape("base_logits", base_logits, (anchor.shape[0], None, None))
        if base_logits.shape[1] < wanted:
            raise KernelInputError(
                problem(
                    "SR900",
                    f"base_logits has {base_logits.shape[1]} block rows, fewer than gamma="
                    f"{wanted}",
                    accepted=f"base_logits [b, >= {wanted}, V]",
                    fix="pass the draft forward's logits for the whole block",
                    field="base_logits",
                )
            )
        base_logits = base_logits[:, :wanted]
        if params is not None:
            from specreg.step.draft_sampling import check_draft_inputs

            check_draft_inputs(base_logits[:, 0], params)  # before any head step runs
        greedy = temperature <= 0 and params is None
        if head is not None and greedy:
            return head.greedy_block(base_logits, anchor, hidden, backend=self.backend), None
        sampler = None
        if not greedy:
            sampler = self._keyed_sampler(
                anchor.shape[0], anchor.device, temperature, params, keys, positions, generator
            )
        if head is not None:
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
        assert sampler is not None
        # one position of every request at a time, in slot order: rows are requests
        rows = torch.stack([sampler(logits[:, k]) for k in range(wanted)], dim=1)
        return rows, logits

    def _keyed_sampler(
        self, b: int, device: torch.device, temperature: float, params: SamplingParams | None,
        keys: torch.Tensor | None, positions: torch.Tensor | None,
        generator: torch.Generator | None,
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """Logits [b, V] of block slot k (the k-th call) -> tokens [b]: the SAMPLE-role race
        at (key, positions + k) on softmax(logits / T), or on each request's filtered q with
        `params`."""
        from specreg.step.draft_sampling import sample_rows
        from specreg.kernels.chain import sample_tokens
        from specreg.kernels.random_stream import fresh_keys
        from specreg.kernels.sampling import request_keys

        if positions is None:  # a key reused at one position would repeat its draws each step
            keys = fresh_keys(b, device, generator=generator)
            positions = torch.zeros(b, dtype=torch.int64, device=device)
        elif params is not None:
            keys = request_keys(params, keys, generator=generator)
        elif keys is None:
            keys = fresh_keys(b, device, generator=generator)
        slot = [0]

        def sample(logits: torch.Tensor) -> torch.Tensor:
            at = positions.to(torch.int64) + slot[0]
            slot[0] += 1
            if params is not None:
                return sample_rows(logits, params, keys=keys, positions=at,
                                   filter_order=self.filter_order, backend=self.backend).tokens
            q = torch.softmax(logits.float() / temperature, dim=-1)
            return sample_tokens(q, keys=keys, positions=at, check_values=False)

        return sample

    @staticmethod
    def candidates(anchor: torch.Tensor, draft_tokens: torch.Tensor) -> torch.Tensor:
        """[anchor, drafts...] as int64 [b, gamma + 1]: the chain the target verifies."""
        return torch.cat([anchor.to(torch.int64)[:, None], draft_tokens.to(torch.int64)], dim=1)

    def memory(self, *, vocab_size: int = 0) -> list[Buffer]:
        """Per request at the largest gamma: the draft block, the drafts, the chain to verify,
        and the float32 [gamma, vocab] logits a sampled proposal returns (the Markov head's
        corrected logits for DSpark). The plan has no vocab size: pass `vocab_size` to count
        them, else they state 0 bytes and name the size in `per`."""
        width, gamma = self.draft_width, self.gamma
        return [
            Buffer(name="draft_block_ids+positions", device_bytes=2 * width * 8, per=PER_REQUEST),
            Buffer(name="draft_tokens", device_bytes=gamma * 8, per=PER_REQUEST),
            Buffer(name="candidates", device_bytes=(gamma + 1) * 8, per=PER_REQUEST),
            Buffer(name="draft_logits (sampling)", device_bytes=gamma * vocab_size * 4,
                   per=f"{PER_REQUEST}: {gamma} x vocab float32"
                   + ("" if vocab_size else " (vocab not in the plan, counted as 0)")),
        ]

    def describe(self) -> str:
        r = self.runtime
        return (
            f"BlockDrafter({r.algorithm}, gammas={list(self.gammas)}, draft_width="
            f"{r.draft_width}, layout={r.layout}, markov_head="
            f"{r.markov_head_type or 'none'} rank {r.markov_rank})"
        )

    __repr__ = describe
