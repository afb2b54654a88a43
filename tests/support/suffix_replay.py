"""Token streams replayed through a suffix-decoding cache with arctic-inference's request API
(`start_request`, `add_active_response`, `speculate`, `stop_request`), call by call.

`replay(cache, speculate, streams, settings)` drives it as the real-text benchmark
(`benchmarks/bench_real_text.py`, its `ArcticRows`) drives arctic-inference's
`SuffixDecodingCache`: `settings.batch` requests at a time, one batch after another (the
global tree keeps the earlier responses). A request starts with its stream's first `prompt`
tokens; at every step each row of the batch, in order, adds the tokens it emitted since its
last call (`add_active_response`; a finished row too, once) and, while it has fewer than
`prompt + new` tokens, speculates on its last `max_tree_depth` tokens; then every draft is
verified greedily against the stream (a replay target's argmax is the stream's next token), so
a row emits the longest path of its draft that the stream follows, plus one token. When every
row has `prompt + new` tokens the batch's requests stop. A finished row's speculation is left
out: it changes no state and the benchmark drops its draft unverified.

`steer` (one draft per call) makes the given drafts decide what each row emits instead of the
cache's own: arctic-inference's committed drafts steer specreg's drafter, so both see the same
calls even where they draft differently.

`replay_tokens(cache, speculate, requests, depth)` drives the seeded random streams: requests
one after another, one speculation per output token, each followed by that token.

Requires the standard library only: the generating script runs it beside arctic-inference.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Settings:
    """The benchmark's suffix options and replay shape (vLLM's and arctic's option names)."""

    prompt: int
    new: int
    k: int  # max_spec_tokens: the draft length
    batch: int
    max_tree_depth: int
    max_cached_requests: int
    max_spec_factor: float
    min_token_prob: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def stream_length(self) -> int:
        """The benchmark's row width: the longest history a row reaches, plus a full draft."""
        return self.prompt + self.new + self.k + 2


class Cache(Protocol):
    def start_request(self, req_id: Hashable, prompt: Sequence[int]) -> None: ...
    def add_active_response(self, req_id: Hashable, tokens: Sequence[int]) -> None: ...
    def stop_request(self, req_id: Hashable) -> None: ...


#: (token ids, parents) of one draft; a parent indexes an earlier slot, -1 the matched context.
Draft = tuple[list[int], list[int]]
#: speculate(req_id, context) -> the draft to verify (a `Draft`; anything where it is not
#: verified: steered, or `replay_tokens`) and what is kept of the call
Speculate = Callable[[Hashable, list[int]], tuple[Any, Any]]


@dataclass
class Replay:
    """What each call kept, in call order, with (batch, step, row, length) for each, and the
    acceptance of the drafts that steered: tokens emitted and verify steps."""

    records: list[Any]
    calls: list[tuple[int, int, int, int]]
    emitted: int
    steps: int


def accepted(draft: Draft, stream: Sequence[int], length: int, k: int) -> int:
    """Draft tokens a greedy verifier accepts when the target emits `stream`: the longest
    path from the matched context whose tokens are the stream's next ones (of the first k)."""
    tokens, parents = draft
    at, n = -1, 0
    while length + n < len(stream):
        want = stream[length + n]
        nxt = next((i for i in range(min(len(tokens), k))
                    if parents[i] == at and tokens[i] == want), None)
        if nxt is None:
            break
        at, n = nxt, n + 1
    return n


def replay(cache: Cache, speculate: Speculate, streams: Sequence[Sequence[int]],
           settings: Settings, steer: Sequence[Draft] | None = None) -> Replay:
    s = settings
    end = s.prompt + s.new
    records: list[Any] = []
    calls: list[tuple[int, int, int, int]] = []
    emitted = steps = 0
    next_id = 0
    for batch, first in enumerate(range(0, len(streams), s.batch)):
        group = [list(x) for x in streams[first : first + s.batch]]
        assert all(len(x) >= s.stream_length for x in group), "a stream is too short"
        ids: list[int] = []
        lengths = [s.prompt] * len(group)
        seen = list(lengths)
        step = 0
        while min(lengths) < end:
            drafts: dict[int, Draft] = {}
            for r, stream in enumerate(group):
                if r == len(ids):  # the benchmark starts a row's request at its first call
                    cache.start_request(next_id, stream[: lengths[r]])
                    ids.append(next_id)
                    next_id += 1
                if lengths[r] > seen[r]:
                    cache.add_active_response(ids[r], stream[seen[r] : lengths[r]])
                    seen[r] = lengths[r]
                if lengths[r] >= end:
                    continue
                context = stream[max(0, lengths[r] - s.max_tree_depth) : lengths[r]]
                draft, record = speculate(ids[r], context)
                if steer is not None:
                    draft = steer[len(records)]
                drafts[r] = draft
                calls.append((batch, step, r, lengths[r]))
                records.append(record)
            for r, draft in drafts.items():
                n = accepted(draft, group[r], lengths[r], s.k) + 1
                emitted += n
                steps += 1
                lengths[r] += n
            step += 1
        for req in ids:
            cache.stop_request(req)
    if steer is not None:
        assert len(records) == len(steer), "the replay no longer makes the recorded calls"
    return Replay(records=records, calls=calls, emitted=emitted, steps=steps)


def replay_tokens(cache: Cache, speculate: Speculate,
                  requests: Sequence[tuple[Sequence[int], Sequence[int]]],
                  depth: int) -> list[Any]:
    """(prompt, output) requests one after another: before each output token, a speculation
    on the last `depth` tokens; what each call kept, in call order."""
    records: list[Any] = []
    for rid, (prompt, output) in enumerate(requests):
        cache.start_request(rid, list(prompt))
        history = list(prompt)
        for token in output:
            records.append(speculate(rid, history[-depth:])[1])
            cache.add_active_response(rid, [token])
            history.append(token)
        cache.stop_request(rid)
    return records
