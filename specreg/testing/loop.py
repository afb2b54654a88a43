"""A reference speculative-decoding loop driven only by a `SpecPlan`.

It sizes its buffers from `plan.num_tokens_per_req(...)`, runs the toy draft model and turns its
outputs into proposals through `plan.drafter`, verifies with `plan.verifier`, reads sparse KV rows
through `plan.cache_swapper` when the plan has one, and branches only on declared capabilities
(`plan.algorithm.drafting`), never on names. It imports no plugin: every object it drives is
reached through the plan, used through `specreg.contract.protocols`. History-drafted trees
(`HistoryTreeDrafterProtocol`) verify as trees. `steps=` runs one adaptive candidate. `params=`
(a `SamplingParams`) runs a mixed batch through the verifier's per-request-parameters method,
its sampled requests by the with-draft rule where the drafter can draw from their filtered q,
else by the target-only rule (`draft_rule=`, `specreg.testing.draft_rules`). `draft_lengths=`
(one int per request, 0 = no speculation) caps each request's drafts at every step. `keys=`
(one per request, drawn once when None) key every draw on the random stream.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import attrs
import torch

from specreg.step.acceptance_stats import AcceptanceSnapshot, AcceptanceStats
from specreg.contract.phase import Phase
from specreg.registry.plan import SpecPlan
from specreg.contract.protocols import (
    DraftModelDrafterProtocol,
    HeadsDrafterProtocol,
    HistoryTreeDrafterProtocol,
    missing_members,
)
from specreg.testing.draft_model_step import draft_with_model
from specreg.testing.draft_rules import resolve_rule, sampled_draft_chain
from specreg.testing.drafter_checks import check_proposals
from specreg.testing.heads_step import heads_step
from specreg.testing.history_tree_step import history_tree_step
from specreg.testing.kv import DenseReader, KVReader, SwapReader
from specreg.testing.step_parts import Batch, TokenConstraint, lengths_keyword, proposed_counts
from specreg.testing.toy_model import ToyLM
from specreg.testing.tree_step import tree_step

if TYPE_CHECKING:
    from specreg.contract.protocols import (
        BlockDrafterProtocol,
        ChainDrafterProtocol,
        ChainVerifierProtocol,
    )
    from specreg.contract.sampling_params import SamplingParams


@attrs.define
class GenerationResult:
    """What one generation run produced and measured."""

    tokens: torch.Tensor  # int64 [b, prompt_len + num_new]
    emitted_per_verify: list[int]  # tokens each verify emitted per request (accepted + bonus)
    target_forwards: int
    reader_stats: dict[str, float]
    backend: str
    acceptance: AcceptanceSnapshot | None = None  # per-position acceptance (specreg.step.acceptance_stats)
    verify_rule: str = "greedy"  # greedy, sampling, with_draft or target_only (draft_rules)

    @property
    def mean_accepted_length(self) -> float:
        per = self.emitted_per_verify
        return sum(per) / len(per) if per else 0.0


def params_method(verifier: object) -> Callable[..., Any] | None:
    """The verifier's method that verifies raw logits under per-request `SamplingParams`
    (a `params` keyword), or None when it has none. Chain-shaped verifiers take
    `(candidates, target_logits, draft_logits, *, params, positions)`, tree-shaped ones
    `(tree, target_logits, *, params)`."""
    for name in ("verify_from_logits", "verify_sampling_from_logits"):
        method = getattr(verifier, name, None)
        if callable(method) and "params" in inspect.signature(method).parameters:
            return cast("Callable[..., Any]", method)
    return None


def _softmax(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    return torch.softmax(logits.float() / temperature, dim=-1)


class SpeculativeLoop:
    """Generates with speculative decoding for one plan, target and draft model."""

    def __init__(
        self,
        plan: SpecPlan,
        target: ToyLM,
        draft: ToyLM,
        *,
        sampling: bool = False,
        temperature: float = 1.0,
        seed: int = 0,
        reader: KVReader | None = None,
        steps: int | None = None,
        params: SamplingParams | None = None,
        constraint: TokenConstraint | None = None,
        draft_lengths: Any = None,
        draft_rule: str = "auto",
        keys: torch.Tensor | None = None,
    ) -> None:
        if plan.verifier is None:
            raise ValueError(f"plan for {plan.algorithm.name!r} has no verifier")
        self.params = params
        self.draft_lengths = draft_lengths
        self.params_verify = params_method(plan.verifier) if params is not None else None
        if params is not None and self.params_verify is None:
            raise ValueError(
                f"plan for {plan.algorithm.name!r} has a verifier without per-request sampling "
                "parameters (no verify_from_logits/verify_sampling_from_logits taking params=)"
            )
        if params is not None and sampling:
            raise ValueError("params= sets sampling per request; drop sampling=True")
        if constraint is not None and params is None:
            raise ValueError("constraint= masks the per-request-parameters verify: pass params=")
        self.constraint = constraint
        if plan.algorithm.drafting != "chain" and plan.drafter is None:
            raise ValueError(f"plan for {plan.algorithm.name!r} has no drafter")
        self.plan = plan
        self.sizes = plan.resolution.main if steps is None else plan.candidate(steps).sizes
        self.steps = int(plan.config.num_steps or 1) if steps is None else steps
        self.target = target
        self.draft = draft
        self.sampling = sampling
        self.temperature = temperature
        self.generator = torch.Generator().manual_seed(seed)
        self.keys = keys  # each request's key on the random stream (drawn once when None)
        self.verify_width = self.sizes.verify_width
        self.draft_decode_width = self.sizes.width(Phase.DRAFT_DECODE, is_draft_worker=True)
        # buffers are sized from the plan's maxima, which cover every candidate
        self.max_verify_width = plan.num_tokens_per_req(Phase.TARGET_VERIFY)
        if self.max_verify_width > target.config.window:
            raise ValueError(
                f"the toy model's window ({target.config.window}) must cover the verify width "
                f"({self.max_verify_width})"
            )
        self.markov_head = _markov_head_for(plan, draft)
        # a model-free chain drafter whose plan asked for trees (ngram's SGLang trees, suffix's)
        self._history_trees = plan.drafter is not None and not missing_members(
            plan.drafter, HistoryTreeDrafterProtocol
        ) and bool(getattr(plan.drafter, "proposes_trees", False))
        self.verify_rule = resolve_rule(
            plan, draft_rule, params=params, sampling=sampling,
            history_trees=self._history_trees, constrained=constraint is not None,
        )
        self.with_draft = self.verify_rule == "with_draft"
        self.reader = reader or (
            SwapReader(plan.cache_swapper, target) if plan.cache_swapper is not None else DenseReader(target)
        )

    # ----------------------------------------------------------------------------- target side
    def verify_logits(self, batch: Batch, paths: torch.Tensor, depths: torch.Tensor) -> torch.Tensor:
        """Target logits for every verify node.

        paths: int64 [b, N, N] the node's tokens from the root (the last committed token) down
        to itself, padded with -1; depths: int64 [b, N] (0 = root). Returns float32 [b, N, V].
        """
        b, n = depths.shape
        w = self.target.config.window
        root_pos = batch.lengths - 1  # the root is the last committed token
        positions = root_pos[:, None] + depths  # [b, N]
        # local window of each node: its path reversed, then the committed tokens before the root
        offsets = torch.arange(w)
        path_idx = depths[..., None] - offsets  # index into the node's path; <0 means committed
        from_path = torch.gather(paths, 2, path_idx.clamp(min=0).clamp(max=n - 1))
        committed_pos = root_pos[:, None, None] + path_idx  # position of the committed token
        from_committed = torch.gather(
            batch.seqs, 1, committed_pos.clamp(0, batch.seqs.shape[1] - 1).reshape(b, -1)
        ).reshape(b, n, w)
        windows = torch.where(path_idx > 0, from_path, from_committed)
        windows = torch.where((path_idx <= 0) & (committed_pos < 0), torch.full_like(windows, -1), windows)
        flat_windows = windows.reshape(b * n, w)
        flat_pos = positions.reshape(-1)
        selected = self.target.select(flat_windows[:, 0].clamp(min=0), flat_pos).reshape(b, n, -1)
        rows, valid = self.reader.read(
            batch.seqs, batch.lengths, selected, self.target.sparse_context_len(positions)
        )
        logits = self.target.logits(flat_windows, flat_pos, rows.reshape(b * n, *rows.shape[2:]),
                                    valid.reshape(b * n, -1))
        return logits.reshape(b, n, -1)

    # ----------------------------------------------------------------------------- chain drafting
    def _draft_chain(self, batch: Batch, gamma: int) -> tuple[torch.Tensor, torch.Tensor]:
        """gamma tokens autoregressively from the draft model: (candidates [b, n], q [b, gamma, V]).

        With a model-free `plan.drafter`, its proposals are used and q is one-hot on them
        (a deterministic proposal), which keeps rejection sampling exact."""
        b = batch.size
        if self.plan.drafter is not None and not missing_members(
            self.plan.drafter, DraftModelDrafterProtocol
        ):
            return draft_with_model(self, batch, gamma)  # a drafter driving a draft model
        if self.plan.drafter is not None:
            drafter = cast("ChainDrafterProtocol", self.plan.drafter)
            drafts = drafter.propose(batch.seqs, batch.lengths, **lengths_keyword(self))
            check_proposals(
                drafts, b, drafter.gamma, self.target.config.vocab_size, self.plan.algorithm.name
            )
            drafts = drafts[:, :gamma]  # a candidate verifies a prefix of the chain
            q = torch.nn.functional.one_hot(drafts, self.target.config.vocab_size).float()
            return torch.cat([batch.last_tokens()[:, None], drafts], dim=1), q
        if self.with_draft:
            assert self.params is not None
            return sampled_draft_chain(self.draft, batch, gamma, self.params,
                                       keys=self.keys,
                                       filter_order=self.plan.config.filter_order)
        from specreg.kernels.chain import sample_tokens

        ext = torch.cat([batch.seqs, torch.zeros(b, gamma + 1, dtype=torch.long)], dim=1)
        candidates = [batch.last_tokens()]
        qs = []
        for j in range(gamma):
            lengths = batch.lengths + j
            q = _softmax(self.draft.next_logits(ext, lengths), self.temperature)
            # the SAMPLE-role race at (the request's key, the draft's position)
            token = sample_tokens(q, keys=self.keys, positions=lengths,
                                  check_values=False) if self.sampling else q.argmax(-1)
            ext[torch.arange(b), lengths] = token
            candidates.append(token)
            qs.append(q)
        return torch.stack(candidates, 1), torch.stack(qs, 1)

    # ----------------------------------------------------------------------------- block drafting
    def _draft_block(self, batch: Batch, gamma: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One draft forward over the block [anchor, mask, ...], then the drafter's proposal
        step (a Markov walk when the checkpoint has a head) picks the draft tokens."""
        b = batch.size
        w = self.draft.config.window
        drafter = cast("BlockDrafterProtocol", self.plan.drafter)
        anchor = batch.last_tokens()
        block_ids, block_pos = drafter.build_draft_block(
            anchor, batch.lengths - 1, vocab_size=self.draft.config.vocab_size
        )
        width = block_ids.shape[1]
        assert width == self.sizes.width(Phase.TARGET_VERIFY, is_draft_worker=True)
        mask_id = drafter.mask_token_id
        assert mask_id is not None  # build_draft_block raised SR304 otherwise
        # The toy draft reads slot k as "anchor then k mask tokens" and predicts the token after
        # it. In the bonus-anchor layout slot 0 only conditions and slot k >= 1 predicts the
        # token at its own position, so slot k there reads like dense slot k - 1.
        shift = 0 if drafter.sample_from_anchor else 1
        context = self.draft.windows_for(batch.seqs, batch.lengths)  # [b, w], anchor first
        windows = torch.full((b, width, w), -1, dtype=torch.long)
        for k in range(width):
            slot = max(k - shift, 0)  # the dense slot this one reads like
            block_part = block_ids[:, : slot + 1].flip(1)
            block_part = torch.where(block_part == mask_id, torch.full_like(block_part, -1), block_part)
            take = min(slot + 1, w)
            windows[:, k, :take] = block_part[:, :take]
            rest = w - take
            if rest > 0:
                windows[:, k, take:] = context[:, 1 : 1 + rest]
        flat_w = windows.reshape(b * width, w)
        flat_p = (block_pos - shift).clamp(min=0).reshape(-1).long()
        selected = self.draft.select(anchor.repeat_interleave(width), flat_p)
        rows, valid = self.draft.dense_rows(
            batch.seqs, torch.arange(b).repeat_interleave(width), selected
        )
        base_logits = self.draft.logits(flat_w, flat_p, rows, valid).reshape(b, width, -1)
        if not drafter.sample_from_anchor:
            base_logits = base_logits[:, 1:]  # bonus-anchor layout: the anchor slot conditions only
        drawn = {"params": self.params} if self.with_draft else {
            "temperature": self.temperature if self.sampling else 0.0}
        if "keys" in inspect.signature(drafter.propose).parameters:
            drawn.update(keys=self.keys, positions=batch.lengths)  # slot k at lengths + k
        drafts, corrected = drafter.propose(
            base_logits, anchor, head=self.markov_head, generator=self.generator, gamma=gamma,
            **drawn, **lengths_keyword(self),
        )
        if self.with_draft:  # the logits the drafts were drawn from: the verifier filters them
            return drafter.candidates(anchor, drafts), corrected
        q = _softmax(corrected, self.temperature) if corrected is not None else None
        return drafter.candidates(anchor, drafts), q

    # ----------------------------------------------------------------------------- verify + commit
    def _verify_chain(
        self, batch: Batch, candidates: torch.Tensor, q: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, n = candidates.shape
        paths = torch.full((b, n, n), -1, dtype=torch.long)
        for i in range(n):
            paths[:, i, : i + 1] = candidates[:, : i + 1]
        depths = torch.arange(n).expand(b, n)
        logits = self.verify_logits(batch, paths, depths)
        verifier = cast("ChainVerifierProtocol", self.plan.verifier)
        capped = lengths_keyword(self)
        if self.params_verify is not None:
            result = self.params_verify(
                candidates, logits, q if self.with_draft else None, params=self.params,
                keys=self.keys, positions=batch.lengths, **capped,
                **self.mask_inputs(paths, depths),
            )
        elif self.sampling:
            result = verifier.verify_sampling(
                candidates, _softmax(logits, self.temperature), q, keys=self.keys,
                positions=batch.lengths, **capped,
            )
        else:
            result = verifier.verify_greedy(candidates, logits, **capped)
        return result.output_tokens, result.num_accepted.long() + 1

    def mask_inputs(self, paths: torch.Tensor, depths: torch.Tensor) -> dict[str, Any]:
        """The verify's `token_bitmask=` for nodes with these paths when the loop is
        constrained by a grammar, else nothing."""
        if self.constraint is None:
            return {}
        return {"token_bitmask": self.constraint.bitmask(paths, depths)}

    def _commit(self, batch: Batch, tokens: torch.Tensor, counts: torch.Tensor) -> None:
        if self.constraint is not None:
            self.constraint.commit(tokens, counts)
        b, width = tokens.shape
        cols = torch.arange(width)[None, :]
        positions = batch.lengths[:, None] + cols
        keep = cols < counts[:, None]
        rows = torch.arange(b)[:, None].expand(b, width)
        batch.seqs[rows[keep], positions[keep]] = tokens[keep]
        old = batch.lengths.clone()
        batch.lengths += counts
        self.reader.commit(batch.seqs, old, batch.lengths)

    # ----------------------------------------------------------------------------- driver
    @torch.inference_mode()
    def generate(self, prompts: torch.Tensor, num_new: int) -> GenerationResult:
        b, prompt_len = prompts.shape
        capacity = prompt_len + num_new + self.max_verify_width + 1
        batch = Batch(torch.zeros(b, capacity, dtype=torch.long), torch.full((b,), prompt_len))
        batch.seqs[:, :prompt_len] = prompts
        self.reader.start(batch.seqs, batch.lengths)
        if self.keys is None:
            from specreg.kernels.random_stream import fresh_keys

            self.keys = fresh_keys(b, "cpu", generator=self.generator)
        emitted: list[int] = []
        stats = AcceptanceStats()
        forwards = 0
        drafting = self.plan.algorithm.drafting
        gamma = self.sizes.gamma
        while int((batch.lengths - prompt_len).min()) < num_new:
            if drafting == "tree":
                tokens, counts = self._step_tree(batch)
            elif self._history_trees:
                tokens, counts = history_tree_step(self, batch)
            else:
                draft = self._draft_block if drafting == "block" else self._draft_chain
                candidates, q = draft(batch, gamma)
                assert candidates.shape[1] == self.verify_width, (candidates.shape, self.verify_width)
                tokens, counts = self._verify_chain(batch, candidates, q)
            forwards += 1
            active = (batch.lengths - prompt_len) < num_new  # finished requests stay put
            counts = torch.where(active, counts, torch.zeros_like(counts))
            emitted.extend(int(c) for c in counts[active])
            proposed = proposed_counts(self, tokens.shape[1] - 1, b)
            stats.record_counts((counts - 1).clamp(min=0), proposed, counted=active)
            self._commit(batch, tokens, counts)
        out = torch.stack([batch.seqs[r, : prompt_len + num_new] for r in range(b)])
        backend = self.plan.kernel_backends()["cpu"]
        return GenerationResult(
            out, emitted, forwards, self.reader.stats(), backend, stats.snapshot(),
            self.verify_rule,
        )

    # ----------------------------------------------------------------------------- tree drafting
    def _step_tree(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        if not missing_members(self.plan.drafter, HeadsDrafterProtocol):
            return heads_step(self, batch)  # heads on the target's hidden states (Medusa)
        return tree_step(self, batch)


def _markov_head_for(plan: SpecPlan, draft: ToyLM) -> Any:
    """A seeded head when the plan's block drafter makes one (the toy stands in for the
    checkpoint's weights)."""
    if plan.algorithm.drafting != "block":
        return None
    torch.manual_seed(1234)
    drafter = cast("BlockDrafterProtocol", plan.drafter)
    head = drafter.make_head(vocab_size=draft.config.vocab_size, hidden_size=draft.config.dim)
    if head is None:
        return None
    with torch.no_grad():
        for param in head.parameters():
            param.mul_(0.3)
    return head.requires_grad_(False).eval()


def run_generation(
    plan: SpecPlan,
    target: ToyLM,
    draft: ToyLM,
    prompts: torch.Tensor,
    num_new: int,
    **kwargs: Any,
) -> GenerationResult:
    """Convenience wrapper: one `SpeculativeLoop(...).generate(...)` call."""
    return SpeculativeLoop(plan, target, draft, **kwargs).generate(prompts, num_new)
