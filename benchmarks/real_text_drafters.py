"""The model-based drafters of the real-text benchmark: draft_model, EAGLE (chain and tree),
Medusa, DFlash and DSpark, each through its resolved plan and the reference loop's own steps,
over a replay target.

No pretrained draft network is downloaded: every drafter's network is a `CountLM`
(specreg.testing.count_models) fitted on the benchmark's training files, never on the replayed
streams. What stands in for what, per row:

- `draft_model`: the count trigram LM is the standalone draft model (its cache rolled back by the
  plan's `DraftModelDrafter`, `specreg.testing.draft_model_step`);
- `eagle`: the same LM is EAGLE's draft network, scoring every branch's path
  (`specreg.testing.tree_step`; chain: topk 1, tree: topk 4); a real EAGLE head reads the
  target's hidden states, which a replay target does not have;
- `medusa`: head d is the count model's skip-gram offset d (the token d + 1 places past the last
  committed one, from the same two tokens), the static tree built by the plan's `MedusaDrafter`
  (`specreg.testing.heads_step`);
- `dflash`: the same skip-gram offsets are the per-slot logits of the block's draft forward,
  proposed by the plan's `BlockDrafter` (DFlash: each slot's argmax);
- `dspark`: the same block logits, walked through DSpark's vanilla Markov head (the plan's
  `BlockDrafter.make_head`, `MarkovHead.greedy_block`, its fused greedy step): slot k's logits
  plus ``markov_w2(markov_w1(prev))``, prev the draft token before it (the anchor for slot 0).
  The head's weights are not trained: they are `CountLM.bigram_factors(rank)`, a truncated SVD
  of the count model's bigram PMI ``log P(w | prev) - log P(w)`` on the same training files, so
  the head adds the low-rank bigram correction from the previous draft token that a trained
  head learns. The plan is resolved from a draft config as a DSpark checkpoint states it
  (`markov_rank`, `markov_head_type` "vanilla", `mask_token_id`), and the row runs specreg's
  DSpark drafter and verifier, the code a server runs.

`ReplayView` is the loop's view (`specreg.testing.step_parts.LoopView`) over a replay target:
`verify_logits` scores every node at its position in the stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from specreg.contract.phase import Phase
from specreg.testing.count_models import CountLM
from specreg.testing.draft_model_step import draft_with_model
from specreg.testing.heads_step import heads_step
from specreg.testing.replay import ReplayTarget
from specreg.testing.step_parts import Batch
from specreg.testing.tree_step import tree_step

Step = Callable[["ReplayView", Batch], tuple[torch.Tensor, torch.Tensor]]


class ReplayView:
    """What one step of the reference loop reads, over a replay target (greedy only)."""

    params = None
    params_verify = None
    sampling = False
    with_draft = False  # greedy: drafts are argmaxes, no filtered q
    temperature = 1.0
    keys = None  # greedy: nothing is drawn on the random stream

    def __init__(self, plan: Any, model: CountLM, target: ReplayTarget,
                 head: Any = None) -> None:
        self.plan, self.draft, self.target = plan, model, target
        self.markov_head = head  # DSpark's Markov head, None for every other plan
        sizes = plan.resolution.main
        self.steps = int(plan.config.num_steps)
        self.verify_width = sizes.verify_width
        self.draft_decode_width = sizes.width(Phase.DRAFT_DECODE, is_draft_worker=True)
        self.generator = torch.Generator().manual_seed(0)

    def verify_logits(self, batch: Batch, paths: torch.Tensor, depths: torch.Tensor) -> torch.Tensor:
        """Each node's target logits: the replay target at the node's position (its path is the
        stream's wherever a verifier can reach it)."""
        return self.target.logits((batch.lengths - 1)[:, None] + depths)

    def chain_logits(self, batch: Batch, width: int) -> torch.Tensor:
        return self.target.logits((batch.lengths - 1)[:, None] + torch.arange(width)[None, :])


def _draft_model_step(view: ReplayView, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    candidates, _ = draft_with_model(view, batch, view.verify_width - 1)
    out = view.plan.verifier.verify_greedy(candidates, view.chain_logits(batch, view.verify_width))
    return out.output_tokens, out.num_accepted.long() + 1


def _dflash_step(view: ReplayView, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    drafter = view.plan.drafter
    gamma = view.verify_width - 1
    slots = view.draft.head_logits(batch.seqs, batch.lengths, gamma)
    anchor = batch.last_tokens()
    drafts, _ = drafter.propose(slots, anchor, head=None, temperature=0.0, gamma=gamma)
    candidates = drafter.candidates(anchor, drafts)
    out = view.plan.verifier.verify_greedy(candidates, view.chain_logits(batch, gamma + 1))
    return out.output_tokens, out.num_accepted.long() + 1


def _dspark_step(view: ReplayView, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    drafter = view.plan.drafter
    gamma = view.verify_width - 1
    slots = view.draft.head_logits(batch.seqs, batch.lengths, gamma)
    anchor = batch.last_tokens()
    drafts, _ = drafter.propose(slots, anchor, head=view.markov_head, temperature=0.0,
                                gamma=gamma)
    candidates = drafter.candidates(anchor, drafts)
    out = view.plan.verifier.verify_greedy(candidates, view.chain_logits(batch, gamma + 1))
    return out.output_tokens, out.num_accepted.long() + 1


#: The rank of the DSpark row's Markov head (the draft config's markov_rank).
MARKOV_RANK = 64


def dspark_config(k: int, vocab: int, rank: int = MARKOV_RANK) -> dict[str, Any]:
    """DSpark at draft length k with the draft config a vanilla-head checkpoint states."""
    return {"algorithm": "dspark", "num_draft_tokens": k + 1,
            "draft_config": {"vocab_size": vocab, "mask_token_id": vocab - 1,
                             "markov_rank": rank, "markov_head_type": "vanilla"}}


def markov_head(plan: Any, model: CountLM) -> Any:
    """The plan's Markov head (None for a head-less plan), its weights the count model's
    low-rank bigram PMI at the plan's markov_rank."""
    make = getattr(plan.drafter, "make_head", None)
    head = make(vocab_size=model.vocab_size, hidden_size=0) if make is not None else None
    if head is None:
        return None
    w1, w2 = model.bigram_factors(head.rank)
    with torch.no_grad():
        head.markov_w1.weight.copy_(w1)
        head.markov_w2.weight.copy_(w2)
    return head.requires_grad_(False).eval()


def model_rows(k: int, vocab: int, *, markov_rank: int = MARKOV_RANK
               ) -> dict[str, tuple[dict[str, Any], Step]]:
    """Row name -> (the plan's config at draft length k, its step)."""
    return {
        "draft_model (count LM)": ({"algorithm": "draft_model", "num_steps": k}, _draft_model_step),
        "eagle chain (count LM)": ({"algorithm": "eagle", "num_steps": k, "topk": 1,
                                    "num_draft_tokens": k + 1}, tree_step),
        "eagle tree k4 (count LM)": ({"algorithm": "eagle", "num_steps": min(k, 8), "topk": 4,
                                      "num_draft_tokens": k + 1}, tree_step),
        "medusa (count heads)": ({"algorithm": "medusa", "num_steps": k, "topk": 2,
                                  "num_draft_tokens": k + 1}, heads_step),
        "dflash (count heads)": ({"algorithm": "dflash", "num_draft_tokens": k + 1}, _dflash_step),
        "dspark (count heads+SVD)": (dspark_config(k, vocab, markov_rank), _dspark_step),
    }


def run_model_row(registry: Any, config: dict[str, Any], step: Step, model: CountLM,
                  streams: list[list[int]], vocab: int, prompt: int, new: int,
                  batch: int) -> tuple[float, float, int]:
    """(mean accepted length, drafting seconds per emitted token, verify steps) of one plan over
    the streams, `batch` requests at a time; every emitted token is checked against the stream."""
    import time

    plan = registry.resolve(config)
    head = markov_head(plan, model)
    emitted = steps = 0
    spent = 0.0
    width = plan.resolution.main.verify_width
    for first in range(0, len(streams), batch):
        group = torch.tensor([s[: prompt + new + width + 2] for s in streams[first : first + batch]])
        target = ReplayTarget(group, vocab)
        b = group.shape[0]
        seqs = torch.zeros(b, group.shape[1] + width + 1, dtype=torch.long)
        seqs[:, :prompt] = group[:, :prompt]  # the drafter sees committed tokens only
        view = ReplayView(plan, model, target, head)
        state = Batch(seqs, torch.full((b,), prompt, dtype=torch.long))
        while int(state.lengths.min()) < prompt + new:
            start = time.perf_counter()
            tokens, counts = step(view, state)
            spent += time.perf_counter() - start
            active = state.lengths < prompt + new
            for r in torch.nonzero(active).flatten().tolist():
                at, n = int(state.lengths[r]), int(counts[r])
                got, want = tokens[r, :n].tolist(), group[r, at : at + n].tolist()
                assert got == want, (config, r, got, want)  # replay: greedy output is the stream
                seqs[r, at : at + n] = tokens[r, :n]
            emitted += int(counts[active].sum())
            steps += int(active.sum())
            state.lengths = torch.where(active, state.lengths + counts, state.lengths)
    return emitted / steps, spent / emitted, steps
