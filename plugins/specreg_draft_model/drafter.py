"""`DraftModelDrafter`, the draft_model plan's drafter: a chain from a standalone draft model.

`plan.drafter` holds it. It never holds the model: the serving framework owns the draft model,
its weights and its KV cache, and passes a runner (`DraftModelRunner`) to `draft`. One step:

1. **Catch up.** Each request's draft KV holds committed tokens at positions
   `[0, cache_lens[r])`. The drafter feeds the committed tokens from
   `min(cache_lens[r], lengths[r] - 1)` on (at least the last one, the anchor), so the draft
   model's cache reaches the anchor: 1 token after a rejection, 2 after a fully accepted chain
   (the last draft was never fed), the whole prompt for a new request (`cache_lens` 0).
2. **Draft.** gamma tokens autoregressively: argmax at temperature 0, else drawn from
   q = softmax(logits / T), and q is returned for the verifier's rejection rule; with `params`
   (per-request temperature, top-k, top-p, min-p, seed) each request draws from its filtered q
   (`specreg.step.draft_sampling`, greedy requests taking the argmax) and the draft logits are
   returned (`ChainDraft.logits`) for the verifier's with-draft rule, which filters them as it
   filters the target. Every draw is the SAMPLE-role race on the random stream at
   (request key, the draft's absolute position `lengths + i`). Draft i is fed back for draft
   i + 1; the last one is not.
3. **Roll back.** After verification, `rollback(lengths, num_accepted, gamma)` gives the new
   `cache_lens`: the anchor's position + 1 + the accepted drafts that were fed, i.e.
   `lengths + min(num_accepted, gamma - 1)`. Positions from there on hold rejected drafts; the
   next catch-up overwrites them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import torch

from specreg.step.call_keywords import checked_keywords
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_same_device,
    check_shape,
    check_tensor,
    should_check_values,
)
from specreg.contract.memory import PER_REQUEST, Buffer


class DraftModelRunner(Protocol):
    """The framework's draft model, as `DraftModelDrafter.draft` drives it.

    `runner(tokens [b, t], start [b], counts [b])` runs request r's `tokens[r, :counts[r]]` at
    positions `start[r], start[r] + 1, ...` (counts >= 1; the rest of the row is padding),
    keeping its draft KV below `start[r]` and replacing everything from `start[r]` on, and
    returns float logits [b, V] after each request's last fed token.
    """

    def __call__(
        self, tokens: torch.Tensor, start: torch.Tensor, counts: torch.Tensor
    ) -> torch.Tensor: ...


@attrs.frozen(kw_only=True)
class ChainDraft:
    """One step's drafts: `tokens` int64 [b, gamma]; `q` float32 [b, gamma, V] (the
    distributions they were drawn from; None at temperature 0 and with `params`); `logits`
    float32 [b, gamma, V] (with `params`: the draft logits the drafts were drawn from, for
    `verify_from_logits`; else None); `cache_lens` int64 [b], the draft KV after drafting
    (every position up to the last fed draft)."""

    tokens: torch.Tensor
    q: torch.Tensor | None
    cache_lens: torch.Tensor
    gamma: int
    logits: torch.Tensor | None = None

    def candidates(self, anchor: torch.Tensor) -> torch.Tensor:
        """The chain to verify: the anchor [b] (last committed token), then the drafts."""
        return torch.cat([anchor.to(torch.int64)[:, None], self.tokens], dim=1)


def _inputs_error(message: str, field: str, accepted: str, fix: str) -> KernelInputError:
    return KernelInputError(problem("SR473", message, accepted=accepted, fix=fix, field=field))


class DraftModelDrafter:
    """Drafts with a standalone draft model for one resolved draft_model plan.

    `gammas` lists every chain length the plan serves (the main config's gamma and each
    adaptive candidate's); `gamma` is the largest. `vocab_size` is the draft checkpoint's
    (None when the plan was resolved without one); the runner's logits are checked against it.
    """

    needs = "draft_model"  # specreg.contract.protocols.DRAFTER_NEEDS

    def __init__(
        self, *, gammas: Sequence[int], vocab_size: int | None = None,
        check_values: bool | None = None,
    ) -> None:
        self.gammas = tuple(sorted({int(g) for g in gammas}))
        self.gamma = max(self.gammas)
        self.vocab_size = vocab_size
        self.check_values = check_values

    def __repr__(self) -> str:
        return f"DraftModelDrafter(gammas={list(self.gammas)}, vocab_size={self.vocab_size})"

    describe = __repr__

    def memory(self) -> list[Buffer]:
        """Per request at the largest gamma: the drafts, their q (when the vocabulary is
        known) and the draft KV length. The draft model's weights and KV are the framework's."""
        out = [
            Buffer(name="draft_tokens", device_bytes=self.gamma * 8, per=PER_REQUEST),
            Buffer(name="draft_cache_lens", device_bytes=8, per=PER_REQUEST),
        ]
        if self.vocab_size is not None:
            out.append(Buffer(
                name="draft_probs (sampling)", device_bytes=self.gamma * self.vocab_size * 4,
                per=PER_REQUEST,
            ))
        return out

    # ------------------------------------------------------------------------------ checks
    def _gamma(self, gamma: int | None) -> int:
        if gamma is None:
            return self.gamma
        if gamma not in self.gammas:
            raise _inputs_error(
                f"draft_model: gamma={gamma!r} is not a chain length this plan serves",
                "gamma", ", ".join(map(str, self.gammas)),
                "draft the main config's gamma or one adaptive candidate's",
            )
        return int(gamma)

    def _check(self, history: torch.Tensor, lengths: torch.Tensor, cache_lens: torch.Tensor) -> None:
        check_dtype("history", history, INDEX_DTYPES)
        check_shape("history", history, (None, None))
        b, width = history.shape
        for name, tensor in (("lengths", lengths), ("cache_lens", cache_lens)):
            check_tensor(name, tensor)
            check_dtype(name, tensor, INDEX_DTYPES)
            check_shape(name, tensor, (b,))
        check_same_device(history=history, lengths=lengths, cache_lens=cache_lens)
        if not should_check_values(history.device, self.check_values) or b == 0:
            return
        if bool(((lengths < 1) | (lengths > width)).any()):
            raise _inputs_error(
                f"draft_model: lengths must lie in [1, {width}] (the history's width), got "
                f"{lengths.tolist()}", "lengths", f"1 <= lengths <= {width}",
                "pass each request's committed length, anchor included",
            )
        if bool(((cache_lens < 0) | (cache_lens > lengths)).any()):
            raise _inputs_error(
                f"draft_model: cache_lens {cache_lens.tolist()} must lie in [0, lengths] "
                f"(lengths {lengths.tolist()})", "cache_lens", "0 <= cache_lens <= lengths",
                "pass the previous step's drafter.rollback(...), or zeros for new requests",
            )

    def _logits(self, logits: Any, b: int) -> torch.Tensor:
        check_dtype("draft logits", logits, FLOAT_DTYPES)
        check_shape("draft logits", logits, (b, self.vocab_size))
        return logits

    # ------------------------------------------------------------------------------ drafting
    @checked_keywords
    def pick(
        self, logits: torch.Tensor, *, temperature: float = 0.0,
        generator: torch.Generator | None = None, params: Any = None,
        keys: torch.Tensor | None = None, positions: torch.Tensor | None = None,
        filter_order: str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One draft token per request from draft logits [b, V]: (tokens int64 [b], q [b, V] or
        None). Temperature 0 takes the argmax; otherwise the token is drawn from q by the
        SAMPLE-role race at (`keys`, `positions`) (missing keys: fresh ones from `generator`).
        With `params` (a `SamplingParams` of b requests) each request draws from its own
        filtered q (`specreg.step.draft_sampling.sample_rows`) and q is that filtered q."""
        if params is not None:
            from specreg.step.draft_sampling import sample_rows
            from specreg.contract.filter_order import DEFAULT_FILTER_ORDER

            drawn = sample_rows(
                logits, params, keys=keys, positions=positions, generator=generator,
                filter_order=filter_order or DEFAULT_FILTER_ORDER,
                check_values=self.check_values,
            )
            return drawn.tokens, drawn.q
        if temperature <= 0:
            return logits.argmax(-1), None
        from specreg.kernels.chain import sample_tokens

        q = torch.softmax(logits.float() / temperature, dim=-1)
        return sample_tokens(
            q, keys=keys, positions=positions, generator=generator, check_values=False
        ), q

    @checked_keywords
    def draft(
        self,
        model: DraftModelRunner,
        history: torch.Tensor,
        lengths: torch.Tensor,
        cache_lens: torch.Tensor,
        *,
        gamma: int | None = None,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
        draft_lengths: Any = None,
        params: Any = None,
        keys: torch.Tensor | None = None,
        filter_order: str | None = None,
    ) -> ChainDraft:
        """Catch the draft KV up to the anchor, then draft `gamma` (default: the largest)
        tokens. `history` int64 [b, L] holds each request's committed tokens (the anchor last,
        at `lengths - 1`), `cache_lens` [b] the draft KV lengths (see the module doc).
        `draft_lengths` [b] (0..gamma, `specreg.step.draft_lengths`): request r proposes at most
        draft_lengths[r] drafts, its anchor filling the rest (q rows there are 0). The draft
        model runs only the steps the longest request needs (the lengths are read on the
        host); when that is fewer than gamma its last draft is fed too, so the draft KV holds
        every draft `rollback` may keep. `params` (per-request `SamplingParams`, instead of
        `temperature`), `keys` [b] (the requests' keys on the random stream; a seeded request's
        is its seed; missing ones are drawn once from `generator` for this call) and
        `filter_order` (the plan's) are `pick`'s; draft i sits at position `lengths + i`."""
        if model is None or not callable(model):
            raise _inputs_error(
                f"draft_model: drafting needs the draft model runner, got {model!r}", "model",
                "a callable runner(tokens, start, counts) -> logits [b, V]",
                "pass the framework's draft model runner as drafter.draft(runner, ...)",
            )
        g = self._gamma(gamma)
        self._check(history, lengths, cache_lens)
        b, width = history.shape
        device = history.device
        capped, steps = None, g
        if draft_lengths is not None:
            from specreg.kernels.checks import check_draft_lengths

            capped = check_draft_lengths(
                draft_lengths, b, g, device=device, check_values=self.check_values,
                what=f"a chain of {g} drafts",
            )
            steps = max(int(capped.max()) if b else 0, 1)  # one draft at least: logits exist
        lengths = lengths.to(torch.int64)
        start = torch.minimum(cache_lens.to(torch.int64), lengths - 1).clamp(min=0)
        counts = lengths - start
        span = int(counts.max()) if b else 1
        cols = start[:, None] + torch.arange(span, device=device)[None, :]
        feed = history.to(torch.int64).gather(1, cols.clamp(max=max(width - 1, 0)))
        feed = torch.where(cols < lengths[:, None], feed, torch.zeros_like(feed))
        logits = self._logits(model(feed, start, counts), b)
        if params is not None:  # a seeded request's key is its seed
            from specreg.kernels.sampling import request_keys

            keys = request_keys(params, keys, generator=generator)
        elif keys is None and temperature > 0:
            from specreg.kernels.random_stream import fresh_keys

            keys = fresh_keys(b, device, generator=generator)
        tokens, qs, rows = [], [], []
        ones = torch.ones(b, dtype=torch.int64, device=device)
        for j in range(steps):
            token, q = self.pick(
                logits, temperature=temperature, generator=generator, params=params,
                keys=keys, positions=lengths + j, filter_order=filter_order,
            )
            tokens.append(token)
            qs.append(None if params is not None else q)
            rows.append(logits.float())
            if j + 1 < g:
                logits = self._logits(model(token.clamp_min(0)[:, None], lengths + j, ones), b)
        drafts = torch.stack(tokens, dim=1)
        q_all = None if qs[0] is None else torch.stack(qs, dim=1)  # type: ignore[arg-type]
        logits_all = torch.stack(rows, dim=1) if params is not None else None
        if capped is None:
            return ChainDraft(tokens=drafts, q=q_all, cache_lens=lengths + g - 1, gamma=g,
                              logits=logits_all)
        from specreg.step.draft_lengths import cut_chain

        anchor = history.to(torch.int64).gather(1, (lengths - 1)[:, None])[:, 0]
        pad = g - steps
        drafts = cut_chain(torch.cat([drafts, drafts.new_zeros(b, pad)], 1), capped, anchor)
        kept = torch.arange(g, device=device)[None, :] < capped[:, None]
        if q_all is not None:
            q_all = torch.cat([q_all, q_all.new_zeros(b, pad, q_all.shape[2])], 1)
            q_all = torch.where(kept[:, :, None], q_all, torch.zeros_like(q_all))
        if logits_all is not None:  # rows past a request's length are never read
            logits_all = torch.cat([logits_all, logits_all.new_zeros(b, pad, logits_all.shape[2])],
                                   1)
        fed = steps if steps < g else g - 1  # the loop fed drafts 0..steps-1 when steps < g
        return ChainDraft(tokens=drafts, q=q_all, cache_lens=lengths + fed, gamma=g,
                          logits=logits_all)

    @checked_keywords
    def propose(
        self,
        history: torch.Tensor,
        lengths: torch.Tensor,
        *,
        model: DraftModelRunner | None = None,
        cache_lens: torch.Tensor | None = None,
        draft_lengths: Any = None,
    ) -> torch.Tensor:
        """Greedy drafts int64 [b, gamma] (the chain-drafter shape). A draft model drafts them,
        so `model` is required; `cache_lens` defaults to zeros (the draft KV built afresh);
        `draft_lengths` as in `draft`."""
        if cache_lens is None:
            cache_lens = torch.zeros_like(lengths)
        return self.draft(  # type: ignore[arg-type]
            model, history, lengths, cache_lens, draft_lengths=draft_lengths
        ).tokens

    def rollback(
        self, lengths: torch.Tensor, num_accepted: torch.Tensor, gamma: int | None = None
    ) -> torch.Tensor:
        """The draft KV lengths after verification: `lengths` [b] are the committed lengths the
        step drafted from, `num_accepted` [b] the drafts the verifier accepted (a negative
        count, for a request that committed nothing, keeps only the tokens before the anchor)."""
        g = self._gamma(gamma)
        check_dtype("lengths", lengths, INDEX_DTYPES)
        check_dtype("num_accepted", num_accepted, INDEX_DTYPES)
        check_shape("num_accepted", num_accepted, tuple(lengths.shape))
        check_same_device(lengths=lengths, num_accepted=num_accepted)
        kept = num_accepted.to(torch.int64).clamp(min=-1, max=g - 1)
        return lengths.to(torch.int64) + kept
