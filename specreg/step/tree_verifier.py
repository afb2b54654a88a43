"""`TreeVerifier`: the verifier a plan hands to tree drafters (`specreg_make_verifier`).

It binds what the plan knows (depth, the width of every served step count, mask mode,
thresholds, value checks and the kernel backend) once, and passes each step's tree to the core
tree kernels (`specreg.kernels.tree_*`), returning `VerifyResult`. EAGLE's verifier subclasses
it; Medusa's plan uses it as it is. A keyword a method does not take is SR930.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from specreg.backend import requested_backend
from specreg.contract.acceptance_rules import LOSSLESS, AcceptanceRule
from specreg.contract.memory import Buffer, verify_result_buffers
from specreg.contract.protocols import VerifyResult
from specreg.contract.sampling_params import SamplingParams
from specreg.kernels.tree_build import build_tree
from specreg.kernels.tree_build.types import TreeBuildResult
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_params import verify_tree_with_params
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.step import tree_verifier_checks as checks
from specreg.step.call_keywords import checked_keywords, given_keywords, refuse_without_params
from specreg.step.tree_verifier_results import as_result, chain_to_tree_result, default_positions
from specreg.step.verify_modes import merge_by_request

if TYPE_CHECKING:
    from specreg.kernels.penalties.types import Penalties


class TreeVerifier:
    """Verifies one draft tree per request (a `TreeBuildResult`), from tensors only.

    ``verify_greedy(tree, target_logits)`` or ``verify_sampling(tree, target_probs,
    draft_probs=None, keys=None)`` take the target's output for every node, [b, N, V] (row i:
    the next-token distribution after node i); ``draft_probs`` [b, N, V] (row i: q of node i's
    children) is optional. Draws read the random stream keyed by each request's key (``keys``
    [b]) and the absolute position of the depth-1 nodes (``positions`` [b], by default the
    root's position + 1). The result (`specreg.contract.protocols.VerifyResult`) holds
    ``output_tokens`` [b, num_steps + 1] (accepted drafts, the bonus, then -1),
    ``num_accepted`` [b], ``bonus`` [b] and ``accepted_index`` (the accepted nodes' flat rows).
    ``build_tree`` builds the verify tree of drafts named by their draft global ids
    (`specreg.contract.tree_sizes`). With topk = 1 the tree is a chain, and sampling with a real
    q runs `ChainVerifier` (classic rejection sampling).

    `widths_by_steps` maps each served step count (the main config's and every adaptive
    candidate's) to its verify width; `num_steps` and `num_draft_tokens` are the largest.
    `acceptance` (the plan's `config.acceptance`) is lossless by default. Relaxed thresholds
    reach the tree kernels (they override `threshold_single` / `threshold_acc`); typical and
    synthetic acceptance are chain rules, run with topk 1 through `ChainVerifier` (synthetic
    also for greedy verification). All three are lossy.
    """

    rules = ("tree_greedy", "tree_sampling", "greedy", "chain_sampling")

    def __init__(
        self,
        *,
        num_steps: int,
        topk: int,
        num_draft_tokens: int,
        mask_mode: str = "full",
        threshold_single: float = 1.0,
        threshold_acc: float = 1.0,
        check_values: bool | None = None,
        widths_by_steps: Mapping[int, int] | None = None,
        filter_order: str | None = None,
        acceptance: AcceptanceRule | None = None,
        verify_mode: str | None = None,
    ) -> None:
        from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, filter_rule

        self.verify_mode = verify_mode or "standard"
        self.acceptance = acceptance or LOSSLESS
        if self.acceptance.kind == "relaxed_thresholds":
            threshold_single = self.acceptance.threshold_single
            threshold_acc = self.acceptance.threshold_acc
        self._chain_rule = self.acceptance.kind in ("typical", "synthetic")
        self._chains: dict[int, Any] = {}
        table = {int(num_steps): int(num_draft_tokens), **(widths_by_steps or {})}
        self.topk = int(topk)
        self.widths_by_steps = dict(sorted(table.items()))
        self.num_steps = max(self.widths_by_steps)
        self.num_draft_tokens = max(self.widths_by_steps.values())
        self.widths = tuple(sorted(set(self.widths_by_steps.values())))
        self.gamma = self.num_draft_tokens - 1
        self.mask_mode = mask_mode
        self.threshold_single = threshold_single
        self.threshold_acc = threshold_acc
        self.check_values = check_values
        self.filter_order = filter_rule(filter_order or DEFAULT_FILTER_ORDER).name
        checks.check_mask_mode(mask_mode)
        checks.check_chain_rule(self.acceptance, self.topk)
        self.backend = requested_backend()

    # ------------------------------------------------------------------------------ build
    @checked_keywords
    def build_tree(
        self,
        bonus_tokens: torch.Tensor,
        seq_lens: torch.Tensor,
        *,
        parent_list: torch.Tensor,
        top_scores_index: torch.Tensor,
        draft_tokens: torch.Tensor,
        mask_mode: str | None = None,
        seq_lens_sum: int | None = None,
    ) -> TreeBuildResult:
        """The verify tree (`specreg.kernels.tree_build.build_tree`) of the selected drafts
        `draft_tokens` [b, N - 1], named by their draft global ids in `top_scores_index`, whose
        parents `parent_list` lists; `bonus_tokens` [b] the roots (the last committed tokens),
        `seq_lens` [b] the committed lengths. The width N picks the step count it verifies
        (the main config's when none serves it)."""
        width = draft_tokens.shape[-1] + 1
        steps = max(
            (s for s, n in self.widths_by_steps.items() if n == width), default=self.num_steps
        )
        return build_tree(
            bonus_tokens, parent_list, top_scores_index, draft_tokens, seq_lens,
            topk=self.topk, depth=steps, num_verify_tokens=self.widths_by_steps[steps],
            mask_mode=mask_mode or self.mask_mode, seq_lens_sum=seq_lens_sum,
            check_values=self.check_values, backend=self.backend,
        )

    # ----------------------------------------------------------------------------- verify
    def _links(self, tree: TreeBuildResult) -> tuple[torch.Tensor, ...]:
        """(candidates [b, N], retrieve_index, first-child links, next-sibling links)."""
        return (tree.draft_tokens.view(-1, tree.num_verify_tokens), tree.retrieve_index,
                tree.retrieve_next_token, tree.retrieve_next_sibling)

    def _bound(self) -> dict[str, Any]:
        """What every verify call takes from the plan: depth, value checks, backend."""
        return dict(depth=self.num_steps, check_values=self.check_values, backend=self.backend)

    def _thresholds(self) -> dict[str, float]:
        """The target-only rule's relaxed thresholds (1.0: lossless)."""
        return dict(threshold_single=self.threshold_single, threshold_acc=self.threshold_acc)

    @checked_keywords
    def verify_greedy(
        self,
        tree: TreeBuildResult,
        target_logits: torch.Tensor | None = None,
        *,
        target_predict: torch.Tensor | None = None,
        draft_lengths: Sequence[int] | torch.Tensor | None = None,
        block_v: int | None = None,
        keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        coins: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> VerifyResult:
        """Longest path matching the target's argmax (`verify_tree_greedy`): `target_logits`
        [b, N, V] (row i: the target's scores after node i), or `target_predict` [b, N] (the
        argmax already taken).

        - `draft_lengths` [b]: per request, the deepest node it verifies (0 = none).
        - `block_v`: the Triton kernel's vocabulary tile (None: chosen for the vocabulary).
        - `keys`, `positions`, `coins`, `generator`: the random stream of the synthetic
          acceptance rule's count, which verifies the chain (topk 1) through
          `ChainVerifier.verify_greedy`; greedy verification draws nothing and does not read
          them.
        """
        if self.acceptance.synthetic and target_logits is not None and target_predict is None:
            candidates = self._links(tree)[0]
            chain = self._chain(candidates.shape[1]).verify_greedy(
                candidates, target_logits, draft_lengths=draft_lengths, keys=keys,
                positions=positions, coins=coins, generator=generator,
            )
            return as_result(chain_to_tree_result(chain, self.num_steps), tree.num_verify_tokens,
                             self.acceptance.kind)
        checks.refuse_chain_rule(self.acceptance, "target_predict=", synthetic_only=True)
        found = verify_tree_greedy(
            *self._links(tree), target_logits=target_logits, **self._bound(), **given_keywords(
                target_predict=target_predict, block_v=block_v, draft_lengths=draft_lengths),
        )
        return as_result(found, tree.num_verify_tokens)

    @checked_keywords
    def verify_sampling(
        self,
        tree: TreeBuildResult,
        target_probs: torch.Tensor,
        *,
        draft_probs: torch.Tensor | None = None,
        params: SamplingParams | None = None,
        invariant: bool | torch.Tensor | None = None,
        keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        coins: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        block_v: int | None = None,
        draft_lengths: Sequence[int] | torch.Tensor | None = None,
        token_bitmask: torch.Tensor | None = None,
        penalties: Penalties | None = None,
    ) -> VerifyResult:
        """Lossless tree sampling (`verify_tree_sampling`); `target_probs` [b, N, V],
        `draft_probs` None (the target-only rule) or [b, N, V] (row i: the q node i's children
        were drawn from).

        - `keys` [b] (each request's key; missing: fresh keys from `generator`) and `positions`
          [b] (default: the tree's root positions + 1, the absolute position of the depth-1
          nodes) key every draw; `coins` [b, N - 1]: SGLang's acceptance coins, instead of
          drawn ones.
        - `draft_lengths` [b]: per request, the deepest node it verifies (0 = one plain sample
          from the root's row); `block_v` the Triton kernel's vocabulary tile.
        - `params`: each request's probabilities are filtered by its own parameters first
          (greedy ones mixed in; a seeded request's key is its seed; `verify_tree_with_params`),
          and then `token_bitmask` [b, N, words] and `penalties` apply to every node's row.
        - `invariant`: None (the plan's verify mode), True / False or a bool tensor [b]
          (`specreg.step.verify_modes`): the drafter-invariant rule (tokens equal plain keyed
          sampling; q and coins not read).
        """
        return self._sampling(tree, target_probs, draft_probs, params, invariant, given_keywords(
            keys=keys, positions=positions, coins=coins, generator=generator, block_v=block_v,
            draft_lengths=draft_lengths, token_bitmask=token_bitmask, penalties=penalties,
        ))

    def _sampling(
        self,
        tree: TreeBuildResult,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor | None,
        params: SamplingParams | None,
        invariant: bool | torch.Tensor | None,
        kwargs: dict[str, Any],
    ) -> VerifyResult:
        """`verify_sampling` once its keywords are checked (`kwargs`: those the caller gave)."""
        candidates = self._links(tree)[0]
        b, n = candidates.shape
        default_positions(tree, b, n, kwargs)
        modes = self._invariant(invariant, candidates)
        if modes is not True and modes is not False:  # one mode per request, both present
            return merge_by_request(modes, *(
                self._sampling(tree, target_probs, draft_probs, params, mode, dict(kwargs))
                for mode in (True, False)
            ))
        if modes:
            if params is None:  # p itself: the rows at temperature 1, unfiltered
                params = SamplingParams.of(b, temperature=1.0, device=candidates.device)
            kwargs.pop("coins", None)
            found = verify_tree_with_params(
                *self._links(tree), target_probs, params=params, probabilities=True,
                filter_order=self.filter_order, invariant=True, **self._bound(), **kwargs,
            )
            return as_result(found, n)
        if params is not None:
            checks.refuse_chain_rule(self.acceptance, "params=")
            found = verify_tree_with_params(
                *self._links(tree), target_probs, params=params, draft=draft_probs,
                probabilities=True, filter_order=self.filter_order, **self._bound(),
                **self._thresholds(), **kwargs,
            )
            return as_result(found, n, self.acceptance.kind)
        refuse_without_params(f"{type(self).__name__}.verify_sampling", params,
                              token_bitmask=kwargs.get("token_bitmask"),
                              penalties=kwargs.get("penalties"))
        if self.topk == 1 and (draft_probs is not None or self._chain_rule):
            return self._chain_sampling(candidates, target_probs, draft_probs, **kwargs)
        found = verify_tree_sampling(
            *self._links(tree), target_probs, draft_probs=draft_probs, **self._bound(),
            **self._thresholds(), **kwargs,
        )
        return as_result(found, n, self.acceptance.kind)

    @checked_keywords
    def verify_from_logits(
        self,
        tree: TreeBuildResult,
        target_logits: torch.Tensor,
        *,
        params: SamplingParams,
        draft_logits: torch.Tensor | None = None,
        draft_probs: torch.Tensor | None = None,
        invariant: bool | torch.Tensor | None = None,
        keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        coins: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        block_v: int | None = None,
        draft_lengths: Sequence[int] | torch.Tensor | None = None,
        token_bitmask: torch.Tensor | None = None,
        penalties: Penalties | None = None,
    ) -> VerifyResult:
        """A batch mixing greedy and sampled requests, from raw logits [b, N, V]: temperature-0
        requests verify greedily, the others by tree sampling on the filtered p and q.
        q comes from `draft_logits` [b, N, V] (filtered here by each request's parameters:
        EAGLE's `draft_logits`) or from `draft_probs` [b, N, V], each node's q already filtered
        and read as given (Medusa's sampled trees; all-zero rows run the target-only rule at
        that node); not both (SR929); neither: the target-only rule. The other keywords are
        `verify_sampling`'s (`verify_tree_with_params`; a seeded request's key is its seed)."""
        checks.refuse_chain_rule(self.acceptance, "verify_from_logits")
        return self._from_logits(tree, target_logits, params, draft_logits, draft_probs,
                                 invariant, given_keywords(
                                     keys=keys, positions=positions, coins=coins,
                                     generator=generator, block_v=block_v,
                                     draft_lengths=draft_lengths, token_bitmask=token_bitmask,
                                     penalties=penalties))

    def _from_logits(
        self,
        tree: TreeBuildResult,
        target_logits: torch.Tensor,
        params: SamplingParams,
        draft_logits: torch.Tensor | None,
        draft_probs: torch.Tensor | None,
        invariant: bool | torch.Tensor | None,
        kwargs: dict[str, Any],
    ) -> VerifyResult:
        """`verify_from_logits` once its keywords are checked."""
        b, n = tree.retrieve_index.shape
        default_positions(tree, b, n, kwargs)
        modes = self._invariant(invariant, tree.retrieve_index)
        if modes is not True and modes is not False:  # one mode per request
            return merge_by_request(modes, *(
                self._from_logits(tree, target_logits, params, draft_logits, draft_probs, mode,
                                  dict(kwargs))
                for mode in (True, False)
            ))
        if modes:
            kwargs.pop("coins", None)
        found = verify_tree_with_params(
            *self._links(tree), target_logits, params=params,
            draft=None if modes else draft_logits,
            draft_q=None if modes else draft_probs, filter_order=self.filter_order,
            invariant=modes, **self._bound(),
            **({} if modes else self._thresholds()), **kwargs,
        )
        return as_result(found, n, self.acceptance.kind)

    def _chain_sampling(
        self,
        candidates: torch.Tensor,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor | None,
        *,
        keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        coins: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        block_v: int | None = None,
        draft_lengths: Any = None,
    ) -> VerifyResult:
        """topk 1 with a real q (or a chain acceptance rule): chain verification
        (`ChainVerifier`, under the plan's acceptance rule), on the same stream: the chain's
        row 0 verifies the tree's depth-1 node, so `keys` and `positions` pass through, and
        a caller's tree `coins` (SGLang's layout: node c tested with coins[:, c - 1]) are the
        chain's acceptance coins."""
        n = candidates.shape[1]
        chain = self._chain(n).verify_sampling(
            candidates, target_probs, None if draft_probs is None else draft_probs[:, : n - 1],
            keys=keys, positions=positions,
            coins=None if coins is None else coins[:, : n - 1], generator=generator,
            draft_lengths=draft_lengths,
        )
        return as_result(chain_to_tree_result(chain, self.num_steps), n, chain.acceptance)

    def _invariant(self, invariant: Any, candidates: torch.Tensor) -> bool | torch.Tensor:
        """The call's verify modes (`tree_verifier_checks.invariant_modes`)."""
        plan_mode = self.verify_mode == "invariant"
        return checks.invariant_modes(invariant, plan_mode, self.acceptance, candidates)

    def _chain(self, width: int) -> Any:
        """The `ChainVerifier` of one chain width, built once per width (under the plan's rule)."""
        found = self._chains.get(width)
        if found is None:
            from specreg.step.chain_verifier import ChainVerifier

            found = ChainVerifier(width, backend=self.backend, check_values=self.check_values,
                                  acceptance=self.acceptance)
            self._chains[width] = found
        return found

    def memory(self) -> list[Buffer]:
        """Per request at the largest width: the `VerifyResult` of a tree of
        `num_draft_tokens` nodes and `num_steps` + 1 path slots (the tree itself is the
        drafter's)."""
        return verify_result_buffers(self.num_steps + 1, width=self.num_draft_tokens)

    def describe(self) -> str:
        return (
            f"{type(self).__name__}(num_steps={self.num_steps}, topk={self.topk}, "
            f"num_draft_tokens={self.num_draft_tokens}, mask_mode={self.mask_mode}, "
            f"widths by steps={self.widths_by_steps}, "
            f"rules={', '.join(self.rules)}, thresholds=({self.threshold_single}, "
            f"{self.threshold_acc}), filter_order={self.filter_order}, chain rejection sampling "
            "via ChainVerifier when topk=1"
            + (f", acceptance={self.acceptance.kind} (LOSSY)" if self.acceptance.lossy else "")
            + ")"
        )

    def __repr__(self) -> str:
        return self.describe()
