"""`ChainVerifier`: the verifier a plan hands to chain and block drafters (`specreg_make_verifier`).

It binds what the plan knows (the verify widths, the kernel backend fixed when the plan is
resolved, the value-check policy) once, and passes each step's inputs through to the chain
kernels (`specreg.kernels.chain`, `specreg.kernels.chain_params`), returning
`specreg.contract.protocols.VerifyResult`. Each method's signature names every keyword it takes; any
other is SR930 (`specreg.step.call_keywords`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from specreg.step import chain_verifier_checks as checks
from specreg.backend import requested_backend
from specreg.step.call_keywords import checked_keywords, given_keywords, refuse_without_params
from specreg.contract.memory import PER_REQUEST, Buffer, verify_result_buffers
from specreg.contract.protocols import VerifyResult

if TYPE_CHECKING:
    import torch

    from specreg.contract.acceptance_rules import AcceptanceRule
    from specreg.kernels.chain.types import ChainVerifyResult
    from specreg.kernels.penalties.types import Penalties
    from specreg.contract.sampling_params import SamplingParams


class ChainVerifier:
    """The verifier specreg hands to chain and block drafters (`specreg_make_verifier`).

    It accepts a chain of any width in `widths` (the main config's and every adaptive
    candidate's; by default only `num_draft_tokens`) and returns `specreg.contract.protocols.VerifyResult`.
    `backend` (None: `SPECREG_KERNEL_BACKEND` as read now) is fixed at construction and passed
    to every kernel call; so is `filter_order` (how top-k, top-p and min-p combine for requests
    with `params`; the plan's `config.filter_order`, `specreg.contract.filter_order`).
    `acceptance` (the plan's `config.acceptance`, `specreg.contract.acceptance_rules`; None or lossless:
    the lossless rule) switches sampling verification to a lossy rule
    (`specreg.kernels.relaxed`), per-request `params` included; greedy verification stays exact
    under thresholds and typical acceptance, and takes the synthetic count under synthetic
    acceptance. Results of the lossy rule name it in `VerifyResult.acceptance`.
    `verify_mode` (the plan's `config.verify_mode`): 'invariant' verifies sampled chains by the
    drafter-invariant rule (`specreg.kernels.chain.verify_chain_invariant`: tokens equal plain
    keyed sampling); each sampling call may also pass `invariant=True` / `False`, or a bool
    tensor [b] choosing per request (`specreg.step.verify_modes`).
    """

    rules: tuple[str, ...] = ("greedy", "chain_sampling")

    def __init__(
        self,
        num_draft_tokens: int,
        *,
        widths: Sequence[int] | None = None,
        backend: str | None = None,
        check_values: bool | None = None,
        filter_order: str | None = None,
        acceptance: AcceptanceRule | None = None,
        verify_mode: str | None = None,
    ) -> None:
        from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, filter_rule

        accepted = checks.verify_widths(num_draft_tokens, widths)
        self.num_draft_tokens = num_draft_tokens
        self.widths = accepted
        self.gamma = num_draft_tokens - 1
        self.backend = requested_backend() if backend is None else backend
        self.check_values = check_values
        self.filter_order = filter_rule(filter_order or DEFAULT_FILTER_ORDER).name
        self.acceptance = acceptance.kind if acceptance is not None else "lossless"
        self._rule = None
        if acceptance is not None and acceptance.lossy:
            from specreg.kernels.relaxed.types import RuleParams

            self._rule = RuleParams.of(acceptance, self.gamma)
        self._synthetic = self.acceptance == "synthetic"
        self.verify_mode = verify_mode or "standard"

    @property
    def lossy(self) -> bool:
        """Whether sampling verification runs a lossy acceptance rule (never by default)."""
        return self._rule is not None

    def _check_width(self, candidates: torch.Tensor) -> None:
        checks.check_width(candidates, self.widths)

    def _run(
        self, kernel: Callable[..., ChainVerifyResult], candidates: torch.Tensor, *args: Any,
        lossy: bool = False, **kwargs: Any,
    ) -> VerifyResult:
        """Check the width, call `kernel` with this verifier's settings, wrap the result
        (`lossy`: the plan's rule ran, so the result names it in `acceptance`).
        `draft_lengths` (per request, 0 = no speculation; `specreg.step.draft_lengths`) becomes the
        kernels' `verify_lens`."""
        self._check_width(candidates)
        lengths = kwargs.pop("draft_lengths", None)
        if lengths is not None:
            from specreg.step.draft_lengths import verify_lens_of

            kwargs["verify_lens"] = verify_lens_of(
                lengths, kwargs.get("verify_lens"), candidates.shape[0], candidates.shape[1],
                device=candidates.device, check_values=self.check_values,
            )
        found = kernel(candidates, *args, check_values=self.check_values, **kwargs)
        return VerifyResult(
            num_accepted=found.accept_len, output_tokens=found.output_tokens, bonus=found.bonus,
            width=candidates.shape[1], param_error=found.param_error,
            acceptance=self.acceptance if lossy else "lossless",
        )

    @checked_keywords
    def verify_greedy(
        self,
        candidates: torch.Tensor,
        target_logits: torch.Tensor,
        *,
        verify_lens: torch.Tensor | None = None,
        draft_lengths: Sequence[int] | torch.Tensor | None = None,
        block_v: int | None = None,
        keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        coins: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> VerifyResult:
        """Leading match of the drafts against the target's argmax (`verify_chain_greedy`).

        `candidates` int64 [b, n]: each request's root, then its n - 1 drafts; `target_logits`
        [b, n, V]: row i is the target's scores after candidate i.

        - `verify_lens` [b] (1..n) or `draft_lengths` [b] (0..n - 1, 0 = no speculation;
          `specreg.step.draft_lengths`): how much of each request's chain to verify.
        - `block_v`: the Triton kernel's vocabulary tile (None: chosen for the vocabulary).
        - `keys`, `positions`, `coins`, `generator`: the random stream of the synthetic
          acceptance rule's count (`verify_chain_synthetic_greedy`); greedy verification draws
          nothing and does not read them.
        """
        if self._synthetic:
            from specreg.kernels.relaxed import verify_chain_synthetic_greedy

            return self._run(verify_chain_synthetic_greedy, candidates, target_logits,
                             rule=self._rule, lossy=True, **given_keywords(
                                 verify_lens=verify_lens, draft_lengths=draft_lengths,
                                 keys=keys, positions=positions, coins=coins,
                                 generator=generator))
        from specreg.kernels.chain import verify_chain_greedy

        return self._run(verify_chain_greedy, candidates, target_logits, backend=self.backend,
                         **given_keywords(verify_lens=verify_lens, draft_lengths=draft_lengths,
                                          block_v=block_v))

    @checked_keywords
    def verify_greedy_from_predict(
        self,
        candidates: torch.Tensor,
        target_predict: torch.Tensor,
        *,
        verify_lens: torch.Tensor | None = None,
        draft_lengths: Sequence[int] | torch.Tensor | None = None,
        vocab_size: int | None = None,
    ) -> VerifyResult:
        """`verify_greedy` from the target's argmax already taken (`target_predict` int64
        [b, n]; `verify_chain_greedy_from_predict`). `vocab_size`: checks the candidates'
        token ids against it."""
        self._refuse_lossy("verify_greedy_from_predict", synthetic_only=True)
        from specreg.kernels.chain import verify_chain_greedy_from_predict

        return self._run(verify_chain_greedy_from_predict, candidates, target_predict,
                         **given_keywords(verify_lens=verify_lens, draft_lengths=draft_lengths,
                                          vocab_size=vocab_size))

    @checked_keywords(refused=("seed",))
    def verify_sampling(
        self,
        candidates: torch.Tensor,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor | None,
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
        """Chain rejection sampling (`verify_chain_sampling`): each draft is accepted with
        probability min(1, p / q), the first rejected one is replaced by a draw from the
        residual, and a fully accepted chain gets a bonus token from p.

        `target_probs` [b, n, V] (row i: p after candidate i), `draft_probs` [b, n - 1, V]
        (row i: the q draft i + 1 was drawn from), or None for the target-only rule (the drafts
        were not drawn from a distribution: history lookups).

        - `params` (`SamplingParams`, one per request): each request's temperature, top-k,
          top-p and min-p filter its probabilities first, greedy requests (temperature 0)
          mixed in (`verify_chain_with_params`, probabilities=True; under a lossy plan rule
          `verify_chain_relaxed_with_params`). With it, `token_bitmask` [b, n, words] (a
          grammar's int32 bitmask) and `penalties` (`Penalties`) apply to every row.
        - `invariant`: None (the plan's verify mode), True / False, or a bool tensor [b]
          choosing per request (`specreg.step.verify_modes`); the drafter-invariant rule accepts a
          draft exactly when it is the token plain keyed sampling emits there (q not read).
        - `keys` [b] (each request's key: its seed, or one drawn once for it) and `positions`
          [b] (the absolute position of the token row 0 verifies) key every draw; missing keys
          are drawn from `generator`. `coins` [b, n - 1]: the acceptance coins, instead of
          drawn ones.
        - `verify_lens` / `draft_lengths` and `block_v` as in `verify_greedy`.
        - `seed` is refused: with `params` put it in `SamplingParams.of(..., seed=)` (SR910),
          without pass it as the request's key, `keys=` (SR930).
        """
        owner = f"{type(self).__name__}.verify_sampling"
        refuse_without_params(owner, params, token_bitmask=token_bitmask, penalties=penalties,
                              seed=seed)
        return self._sampling(candidates, target_probs, draft_probs, params=params,
                              invariant=invariant, **given_keywords(
                                  keys=keys, positions=positions, coins=coins,
                                  generator=generator, verify_lens=verify_lens,
                                  draft_lengths=draft_lengths, block_v=block_v,
                                  token_bitmask=token_bitmask, penalties=penalties, seed=seed))

    def _sampling(
        self,
        candidates: torch.Tensor,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor | None,
        *,
        params: SamplingParams | None,
        invariant: bool | torch.Tensor | None,
        **inputs: Any,
    ) -> VerifyResult:
        """`verify_sampling` once its keywords are checked (`inputs`: those the caller gave)."""
        modes = self._invariant(invariant, candidates)
        if modes is not True and modes is not False:  # one mode per request, both present
            from specreg.step.verify_modes import merge_by_request

            return merge_by_request(modes, *(self._sampling(
                candidates, target_probs, draft_probs, params=params, invariant=mode, **inputs)
                for mode in (True, False)))
        if params is not None:
            return self._with_params(candidates, target_probs, draft_probs, params,
                                     probabilities=True, invariant=modes, **inputs)
        if modes:
            from specreg.kernels.chain import verify_chain_invariant

            inputs.pop("coins", None)
            return self._run(verify_chain_invariant, candidates, target_probs,
                             backend=self.backend, **inputs)
        if self._rule is not None:
            from specreg.kernels.relaxed import verify_chain_relaxed

            return self._run(verify_chain_relaxed, candidates, target_probs, draft_probs,
                             rule=self._rule, backend=self.backend, lossy=True, **inputs)
        from specreg.kernels.chain import verify_chain_sampling

        return self._run(verify_chain_sampling, candidates, target_probs, draft_probs,
                         backend=self.backend, **inputs)

    @checked_keywords(refused=("seed",))
    def verify_target_only(
        self,
        candidates: torch.Tensor,
        target_probs: torch.Tensor,
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
        """`verify_sampling` with `draft_probs=None` (the target-only rule), the same
        keywords."""
        return self.verify_sampling(
            candidates, target_probs, None, params=params, invariant=invariant, keys=keys,
            positions=positions, coins=coins, generator=generator, verify_lens=verify_lens,
            draft_lengths=draft_lengths, block_v=block_v, token_bitmask=token_bitmask,
            penalties=penalties, seed=seed,
        )

    @checked_keywords(refused=("seed",))
    def verify_from_logits(
        self,
        candidates: torch.Tensor,
        target_logits: torch.Tensor,
        draft_logits: torch.Tensor | None = None,
        *,
        params: SamplingParams,
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
        """A batch mixing greedy and sampled requests, from raw logits (nothing [b, n, V]
        materialised; `specreg.kernels.chain_params`): temperature-0 requests verify greedily,
        the others by chain sampling on the filtered p and q (target-only without
        `draft_logits` [b, n - 1, V]). A lossy plan rule runs on the filtered p and q
        (`specreg.kernels.relaxed`); greedy requests stay plain greedy. The keywords are
        `verify_sampling`'s (`params` required; a seeded request's key is its seed)."""
        return self._from_logits(
            candidates, target_logits, draft_logits, params=params, invariant=invariant,
            **given_keywords(keys=keys, positions=positions, coins=coins, generator=generator,
                             verify_lens=verify_lens, draft_lengths=draft_lengths,
                             block_v=block_v, token_bitmask=token_bitmask, penalties=penalties,
                             seed=seed),
        )

    def _from_logits(
        self,
        candidates: torch.Tensor,
        target_logits: torch.Tensor,
        draft_logits: torch.Tensor | None,
        *,
        params: SamplingParams,
        invariant: bool | torch.Tensor | None,
        **inputs: Any,
    ) -> VerifyResult:
        """`verify_from_logits` once its keywords are checked."""
        modes = self._invariant(invariant, candidates)
        if modes is not True and modes is not False:  # one mode per request, both present
            from specreg.step.verify_modes import merge_by_request

            return merge_by_request(modes, *(
                self._from_logits(candidates, target_logits, draft_logits, params=params,
                                  invariant=mode, **inputs)
                for mode in (True, False)
            ))
        return self._with_params(
            candidates, target_logits, draft_logits, params, probabilities=False,
            invariant=modes, **inputs,
        )

    def _with_params(
        self, candidates, target, draft, params, *, probabilities, invariant=None, seed=None,
        **inputs,
    ) -> VerifyResult:
        self._check_width(candidates)
        checks.refuse_seed_with_params(seed)
        if self._rule is not None and not invariant:  # invariant beside it: SR133 already
            from specreg.kernels.relaxed import verify_chain_relaxed_with_params

            return self._run(verify_chain_relaxed_with_params, candidates, target, draft,
                             params=params, rule=self._rule, probabilities=probabilities,
                             backend=self.backend, filter_order=self.filter_order, lossy=True,
                             **inputs)
        from specreg.kernels.chain_params import verify_chain_with_params

        return self._run(verify_chain_with_params, candidates, target, draft, params=params,
                         probabilities=probabilities, backend=self.backend,
                         filter_order=self.filter_order, **({"invariant": True} if invariant
                                                            else {}), **inputs)

    def _invariant(self, invariant: Any, candidates: torch.Tensor) -> bool | torch.Tensor:
        """The call's verify modes (`specreg.step.chain_verifier_checks.verify_modes`)."""
        return checks.verify_modes(invariant, candidates, self.verify_mode,
                                   self.acceptance if self._rule is not None else None)

    def _refuse_lossy(self, path: str, *, synthetic_only: bool = False) -> None:
        """SR196 where the plan's lossy rule cannot reach `path` (no silent fallback)."""
        if self._rule is not None and (self._synthetic or not synthetic_only):
            checks.refuse_lossy(self.acceptance, path)

    def memory(self) -> list[Buffer]:
        """Per request at the widest width: the candidates it verifies and its `VerifyResult`."""
        n = self.num_draft_tokens
        return [
            Buffer(name="candidates", device_bytes=n * 8, per=PER_REQUEST),
            *verify_result_buffers(n),
        ]

    def describe(self) -> str:
        return (
            f"ChainVerifier(num_draft_tokens={self.num_draft_tokens}, gamma={self.gamma}, "
            f"widths={list(self.widths)}, "
            f"rules={', '.join(self.rules)}, target-only rule when draft_probs is None, "
            f"backend={self.backend}, filter_order={self.filter_order}"
            + (", verify_mode=invariant" if self.verify_mode == "invariant" else "")
            + (f", acceptance={self.acceptance} (LOSSY)" if self.lossy else "") + ")"
        )

    def __repr__(self) -> str:
        return self.describe()
