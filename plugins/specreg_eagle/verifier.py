"""`EagleVerifier`, the eagle plan's verifier: builds EAGLE draft trees and verifies them.

`plan.verifier` holds it for eagle / eagle3. It binds what the plan knows (depth, widths, mask
mode, thresholds, value checks and the kernel backend, fixed when it is built) and passes the
tensors through to the kernel families in `specreg_eagle.kernels`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from specreg.contract.acceptance_rules import LOSSLESS, AcceptanceRule
from specreg.backend import requested_backend
from specreg.step.call_keywords import checked_keywords, given_keywords, refuse_without_params
from specreg.errors import KernelInputError, problem
from specreg.contract.memory import Buffer, verify_result_buffers
from specreg.contract.protocols import VerifyResult
from specreg.contract.sampling_params import SamplingParams
from specreg.step.verify_modes import merge_by_request, requested_modes
from specreg_eagle.drafter import EagleDrafter, TreeDraft
from specreg_eagle.kernels.tree_build import build_tree
from specreg_eagle.kernels.tree_build.types import TreeBuildResult
from specreg_eagle.kernels.verify_greedy import verify_tree_greedy
from specreg_eagle.kernels.verify_greedy.types import TreeVerifyResult
from specreg_eagle.kernels.verify_sampling import verify_tree_sampling, verify_tree_with_params
from specreg_eagle.sizes import MASK_MODES

if TYPE_CHECKING:
    from specreg.kernels.penalties.types import Penalties


class EagleVerifier:
    """Builds EAGLE draft trees and verifies them, from tensors only.

    A generation loop drives it in two calls per step (b requests, N = num_draft_tokens):

    1. ``tree = verifier.build_tree(bonus_tokens, seq_lens, score_list=..., token_list=...,
       parents_list=...)`` with the per-step draft outputs of ``select_top_k_tokens`` (or with
       ``parent_list=, top_scores_index=, draft_tokens=`` already organised).
       ``bonus_tokens`` [b] is the last committed token of each request (the tree root),
       ``seq_lens`` [b] the committed length. ``tree.draft_tokens.view(b, N)`` are the tokens to
       run through the target, at ``tree.positions`` with attention mask ``tree.tree_mask``.
    2. ``out = verifier.verify_greedy(tree, target_logits)`` or
       ``out = verifier.verify_sampling(tree, target_probs, draft_probs=None, keys=None)`` with
       the target's output for every tree node, [b, N, V] (row i = the next-token distribution
       after node i). ``draft_probs`` [b, N, V] (row i = q of node i's children) is optional.
       Draws read the random stream keyed by each request's key (``keys`` [b]: its seed, or a
       key drawn once for the request) and the absolute position of the tree's depth-1 nodes
       (``positions`` [b], by default the tree's root position + 1).

    ``out`` is a `specreg.contract.protocols.VerifyResult`: ``out.output_tokens`` [b, num_steps + 1]
    int64 holds each request's accepted drafts then the bonus token, padded with -1;
    ``out.num_accepted`` [b] int32 the number of accepted drafts (emit ``num_accepted + 1``
    tokens); ``out.bonus`` [b] the token after them (the next step's root);
    ``out.accepted_index`` the accepted nodes' flat rows (to keep their KV / hidden states).
    With topk = 1 the tree is a chain and sampling with a real q uses specreg's `ChainVerifier`
    (classic rejection sampling).

    With adaptive candidates, `widths_by_steps` maps each served step count to its verify
    width; `num_steps` and `num_draft_tokens` are the largest, and a tree built with fewer steps
    verifies with the same object. The plan's drafter (`EagleDrafter`) builds trees step by
    step from the draft model's logits; `build_tree` remains for already-collected lists.

    `acceptance` (the plan's `config.acceptance`, `specreg.contract.acceptance_rules`) is lossless by
    default. Relaxed thresholds reach the tree kernels (they override `threshold_single` /
    `threshold_acc`); typical and synthetic acceptance are chain rules, run with topk 1 through
    `ChainVerifier` (synthetic also for greedy verification). All three are lossy.
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
        if mask_mode not in MASK_MODES:
            raise KernelInputError(
                problem("SR211", f"tree mask mode {mask_mode!r} is not known",
                        accepted=", ".join(MASK_MODES), fix="pass one of the accepted modes",
                        field="mask_mode")
            )
        if self._chain_rule and self.topk != 1:
            raise KernelInputError(
                problem("SR315", f"{self.acceptance.kind} acceptance is a chain rule, and "
                        f"topk={self.topk} drafts a tree",
                        accepted="typical or synthetic acceptance with topk 1",
                        fix="set --speculative-eagle-topk 1, or use the accept thresholds",
                        field="acceptance")
            )
        self.backend = requested_backend()
        self._drafter = EagleDrafter(
            topk=self.topk, widths_by_steps=self.widths_by_steps, mask_mode=mask_mode,
            check_values=check_values, filter_order=self.filter_order,
        )

    # ------------------------------------------------------------------------------ build
    @checked_keywords
    def build_tree(
        self,
        bonus_tokens: torch.Tensor,
        seq_lens: torch.Tensor,
        *,
        score_list: Sequence[torch.Tensor] | None = None,
        token_list: Sequence[torch.Tensor] | None = None,
        parents_list: Sequence[torch.Tensor] | None = None,
        parent_list: torch.Tensor | None = None,
        top_scores_index: torch.Tensor | None = None,
        draft_tokens: torch.Tensor | None = None,
        mask_mode: str | None = None,
        seq_lens_sum: int | None = None,
    ) -> TreeBuildResult:
        """The verify tree from the raw draft lists or the organised tree (see the class doc).

        The number of draft steps (``len(score_list)``, else the main config's) picks the
        candidate's verify width."""
        if score_list is not None:
            draft = TreeDraft(
                steps=len(score_list), input_ids=bonus_tokens, hidden=bonus_tokens,
                scores=bonus_tokens, score_list=tuple(score_list),
                token_list=tuple(token_list or ()), parents_list=tuple(parents_list or ()),
            )
            return self._drafter.tree(
                draft, bonus_tokens, seq_lens, mask_mode=mask_mode, seq_lens_sum=seq_lens_sum
            )
        if parent_list is None or top_scores_index is None or draft_tokens is None:
            raise KernelInputError(
                problem("SR213", "build_tree needs the draft lists or the organised tree",
                        accepted="score_list/token_list/parents_list, or parent_list/"
                        "top_scores_index/draft_tokens",
                        fix="pass the outputs of the draft loop", field="score_list")
            )
        width = draft_tokens.shape[-1] + 1
        steps = max(
            (s for s, n in self.widths_by_steps.items() if n == width), default=self.num_steps
        )
        return build_tree(
            bonus_tokens, parent_list, top_scores_index, draft_tokens, seq_lens,
            topk=self.topk, depth=steps, num_verify_tokens=self._drafter.width_for(steps),
            mask_mode=mask_mode or self.mask_mode, seq_lens_sum=seq_lens_sum,
            check_values=self.check_values, backend=self.backend,
        )

    # ----------------------------------------------------------------------------- verify
    def _links(self, tree: TreeBuildResult) -> tuple[torch.Tensor, ...]:
        n = tree.num_verify_tokens
        return (
            tree.draft_tokens.view(-1, n),
            tree.retrieve_index,
            tree.retrieve_next_token,
            tree.retrieve_next_sibling,
        )

    def _bound(self) -> dict[str, Any]:
        """What every verify call takes from the plan: depth, value checks, backend."""
        return dict(depth=self.num_steps, check_values=self.check_values, backend=self.backend)

    def _thresholds(self) -> dict[str, float]:
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
            return _as_result(chain_to_tree_result(chain, self.num_steps), tree.num_verify_tokens,
                              self.acceptance.kind)
        self._refuse_chain_rule("target_predict=", synthetic_only=True)
        found = verify_tree_greedy(
            *self._links(tree), target_logits=target_logits, **self._bound(), **given_keywords(
                target_predict=target_predict, block_v=block_v, draft_lengths=draft_lengths),
        )
        return _as_result(found, tree.num_verify_tokens)

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
        _default_positions(tree, b, n, kwargs)
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
            return _as_result(found, n)
        if params is not None:
            self._refuse_chain_rule("params=")
            found = verify_tree_with_params(
                *self._links(tree), target_probs, params=params, draft=draft_probs,
                probabilities=True, filter_order=self.filter_order, **self._bound(),
                **self._thresholds(), **kwargs,
            )
            return _as_result(found, n, self.acceptance.kind)
        refuse_without_params(f"{type(self).__name__}.verify_sampling", params,
                              token_bitmask=kwargs.get("token_bitmask"),
                              penalties=kwargs.get("penalties"))
        if self.topk == 1 and (draft_probs is not None or self._chain_rule):
            return self._chain_sampling(candidates, target_probs, draft_probs, **kwargs)
        found = verify_tree_sampling(
            *self._links(tree), target_probs, draft_probs=draft_probs, **self._bound(),
            **self._thresholds(), **kwargs,
        )
        return _as_result(found, n, self.acceptance.kind)

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
        self._refuse_chain_rule("verify_from_logits")
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
        _default_positions(tree, b, n, kwargs)
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
        return _as_result(found, n, self.acceptance.kind)

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
        return _as_result(chain_to_tree_result(chain, self.num_steps), n, chain.acceptance)

    def _invariant(self, invariant: Any, candidates: torch.Tensor) -> bool | torch.Tensor:
        """The call's verify modes (`specreg.step.verify_modes.requested_modes`: the call's
        `invariant`, a bool or one bool per request, else the plan's verify mode); SR133 beside
        a lossy acceptance rule."""
        chosen = requested_modes(
            invariant, self.verify_mode == "invariant", candidates.shape[0], candidates.device
        )
        if chosen is not False and self.acceptance.lossy:
            raise KernelInputError(problem(
                "SR133", f"the invariant rule was asked for under the plan's lossy "
                f"{self.acceptance.kind} acceptance rule",
                accepted="the invariant rule with lossless acceptance",
                fix="resolve the plan without the lossy acceptance setting", field="invariant",
            ))
        return chosen

    def _chain(self, width: int) -> Any:
        """The `ChainVerifier` of one chain width, built once per width (under the plan's rule)."""
        found = self._chains.get(width)
        if found is None:
            from specreg.step.chain_verifier import ChainVerifier

            found = ChainVerifier(width, backend=self.backend, check_values=self.check_values,
                                  acceptance=self.acceptance)
            self._chains[width] = found
        return found

    def _refuse_chain_rule(self, path: str, *, synthetic_only: bool = False) -> None:
        """SR316: typical / synthetic acceptance does not reach `path` (no silent fallback)."""
        if not self._chain_rule or (synthetic_only and not self.acceptance.synthetic):
            return
        raise KernelInputError(
            problem("SR316", f"{self.acceptance.kind} acceptance (lossy) does not reach {path}",
                    accepted="verify_sampling without params=, verify_greedy with target_logits",
                    fix="filter the probabilities and call verify_sampling without params=",
                    field="acceptance")
        )

    def memory(self) -> list[Buffer]:
        """Per request at the largest width: the `VerifyResult` of a tree of
        `num_draft_tokens` nodes and `num_steps` + 1 path slots (the tree itself is the
        drafter's)."""
        return verify_result_buffers(self.num_steps + 1, width=self.num_draft_tokens)

    def describe(self) -> str:
        return (
            f"EagleVerifier(num_steps={self.num_steps}, topk={self.topk}, "
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


def _default_positions(tree: TreeBuildResult, b: int, n: int, kwargs: dict[str, Any]) -> None:
    """`positions` (when the caller gave none): the absolute position of each tree's depth-1
    nodes, its root's position + 1 (`tree.positions` is seq_len + depth)."""
    if kwargs.get("positions") is None:
        kwargs["positions"] = tree.positions.view(b, n)[:, 0].to(torch.int64) + 1


def chain_to_tree_result(chain: object, num_steps: int) -> TreeVerifyResult:
    """A `ChainVerifyResult` of a chain of n = num_steps + 1 nodes as a `TreeVerifyResult`."""
    out = chain.output_tokens.to(torch.int64)
    b, n = out.shape
    slots = num_steps + 1
    if n < slots:
        out = torch.cat([out, out.new_full((b, slots - n), -1)], 1)
    out = out[:, :slots]
    count = chain.accept_len.to(torch.int64)
    k = torch.arange(slots, device=out.device).unsqueeze(0)
    rows = torch.arange(b, device=out.device).unsqueeze(1) * n
    accept_index = torch.where(k <= count.unsqueeze(1), rows + k, torch.full_like(out, -1))
    predicts = torch.full((b * n,), -1, dtype=torch.int64, device=out.device)
    on = accept_index >= 0
    predicts[accept_index[on]] = out[on]
    return TreeVerifyResult(
        predicts=predicts, accept_index=accept_index,
        accept_token_num=chain.accept_len.to(torch.int32), bonus=chain.bonus.to(torch.int64),
        output_tokens=out,
    )


def _as_result(found: TreeVerifyResult, width: int, acceptance: str = "lossless") -> VerifyResult:
    """`acceptance`: the lossy rule that produced `found` ('lossless' otherwise; SR199 reads it)."""
    return VerifyResult(
        num_accepted=found.accept_token_num, output_tokens=found.output_tokens,
        bonus=found.bonus, width=width, accepted_index=found.accept_index,
        predicts=found.predicts, param_error=found.param_error, acceptance=acceptance,
    )
