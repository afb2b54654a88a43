"""Seeded serving traces in vLLM 0.33's persistent batch, replayed step by step against a
proposer: rows reused by new requests, requests finishing and joining, batches shrinking.

`make_trace(seed)` draws a small serving run: a drafter configuration (k, the suffix trees'
depth, the global cache's size, the n-gram sizes, the model's maximum length), the batch's row
count, and requests (a prompt, most of them starting with one shared BOS token; the tokens the
target will emit; an arrival step; how many steps the prefill takes). The texts are cut from a
few shared phrases, so requests repeat their prompts, themselves and each other.

`replay(trace, propose)` runs it as vLLM 0.33's GPU model runner does (`gpu_input_batch.py`,
`gpu_model_runner.py`): each step first removes the requests that finished at the previous
one, adds the arrivals (a new request takes the lowest freed row, else the next row; its
prompt is written over whatever the row held), condenses (the highest rows move down into the
holes left, tokens copied), then writes each row's sampled tokens after its tokens and calls
`propose(batch, sampled)`. Rows still in prefill sample nothing; a decoding row samples the
drafts it proposed last step as far as they agree with the target's tokens, then one more
(vLLM's greedy verification), so the trace is steered by the drafts `propose` returns. Stale
tokens stay in the buffer past each row's length, as in vLLM.

The tests replay a trace with the oracle's committed drafts steering it (the real vLLM
proposer, or arctic-inference's cache, produced them on the same trace) and compare what
specreg's proposer drafts at every step. Requires numpy and attrs only: the generating script
runs it inside the framework environment, where specreg is not installed.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs
import numpy as np

BOS = 1


@attrs.frozen(kw_only=True)
class TraceConfig:
    """The drafters' options and the batch's shape for one trace (vLLM's names in comments)."""

    k: int  # num_speculative_tokens
    max_tree_depth: int  # suffix_decoding_max_tree_depth
    max_cached_requests: int  # suffix_decoding_max_cached_requests (-1: no limit, 0: none)
    max_spec_factor: float  # suffix_decoding_max_spec_factor
    min_token_prob: float  # suffix_decoding_min_token_prob
    min_ngram: int  # prompt_lookup_min
    max_ngram: int  # prompt_lookup_max
    max_num_reqs: int  # scheduler_config.max_num_seqs: the batch's rows
    max_model_len: int  # model_config.max_model_len: a request stops there

    def as_dict(self) -> dict[str, float | int]:
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class TraceRequest:
    """One request: its prompt, the tokens the target emits for it, when it arrives and how many
    steps its prefill takes (the last one samples its first token)."""

    req_id: str
    prompt: tuple[int, ...]
    output: tuple[int, ...]
    arrival: int
    prefill_steps: int


@attrs.frozen(kw_only=True)
class Trace:
    seed: int
    config: TraceConfig
    requests: tuple[TraceRequest, ...]


class Batch:
    """The parts of vLLM's InputBatch a proposer reads: the custom_class seam passes
    `token_ids_cpu` and `num_tokens_no_spec`; vLLM's own suffix proposer also reads `req_ids`,
    `req_id_to_index` and `num_prompt_tokens`."""

    def __init__(self, rows: int, width: int) -> None:
        self.token_ids_cpu = np.zeros((rows, width), dtype=np.int32)
        self.num_tokens_no_spec = np.zeros(rows, dtype=np.int32)
        self.num_prompt_tokens = np.zeros(rows, dtype=np.int32)
        self.slots: list[str | None] = []

    @property
    def req_ids(self) -> list[str]:
        return [r for r in self.slots if r is not None]

    @property
    def req_id_to_index(self) -> dict[str, int]:
        return {r: i for i, r in enumerate(self.slots) if r is not None}

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    def add(self, req_id: str, prompt: tuple[int, ...], holes: list[int]) -> None:
        """vLLM's add_request: the lowest freed row, else the next one."""
        if holes:
            index = holes.pop(0)
            self.slots[index] = req_id
        else:
            index = len(self.slots)
            self.slots.append(req_id)
        self.token_ids_cpu[index, : len(prompt)] = prompt
        self.num_tokens_no_spec[index] = len(prompt)
        self.num_prompt_tokens[index] = len(prompt)

    def remove(self, req_id: str, holes: list[int]) -> None:
        index = self.slots.index(req_id)
        self.slots[index] = None
        holes.append(index)
        holes.sort()

    def condense(self, holes: list[int]) -> None:
        """vLLM's condense: the highest rows move down into the lowest holes."""
        last = len(self.slots) - 1
        while holes:
            while last >= 0 and self.slots[last] is None:
                last -= 1
            if holes[0] >= last:
                break
            empty = holes.pop(0)
            n = int(self.num_tokens_no_spec[last])
            self.slots[empty], self.slots[last] = self.slots[last], None
            self.token_ids_cpu[empty, :n] = self.token_ids_cpu[last, :n]
            self.num_tokens_no_spec[empty] = self.num_tokens_no_spec[last]
            self.num_prompt_tokens[empty] = self.num_prompt_tokens[last]
        holes.clear()
        while self.slots and self.slots[-1] is None:
            self.slots.pop()


def _text(rng: random.Random, phrases: list[list[int]], vocab: int, length: int) -> list[int]:
    out: list[int] = []
    while len(out) < length:
        if rng.random() < 0.2:
            out.append(rng.randrange(2, vocab))
        else:
            out.extend(rng.choice(phrases))
    return out[:length]


def make_trace(seed: int) -> Trace:
    rng = random.Random(seed)
    vocab = rng.randrange(6, 40)
    depth = rng.choice([2, 3, 4, 6, 8, 24])
    config = TraceConfig(
        k=rng.randrange(1, min(5, depth) + 1), max_tree_depth=depth,
        max_cached_requests=rng.choice([-1, 0, 1, 2, 3, 10000]),
        max_spec_factor=rng.choice([0.5, 1.0, 1.0, 2.0]),
        min_token_prob=rng.choice([0.0, 0.1, 0.1, 0.3, 0.5]),
        min_ngram=rng.randrange(1, 3), max_ngram=rng.randrange(2, 5),
        max_num_reqs=rng.randrange(1, 5), max_model_len=rng.choice([16, 24, 64, 64, 64]),
    )
    phrases = [[rng.randrange(2, vocab) for _ in range(rng.randrange(2, 6))]
               for _ in range(rng.randrange(2, 6))]
    requests: list[TraceRequest] = []
    arrival = 0
    for n in range(rng.randrange(2, 9)):
        arrival += rng.choice([0, 0, 1, 2, 4])
        while True:
            head = [BOS] if rng.random() < 0.8 else []
            prompt = head + _text(rng, phrases, vocab, rng.randrange(1 - len(head) + 1, 14))
            room = config.max_model_len - len(prompt)
            output = _text(rng, phrases, vocab, rng.randrange(1, max(2, min(room, 22)) + 1))
            output = output[: max(1, room)]
            # A prompt equal to another request's tokens at some step is a request the seam
            # cannot tell from that one's continuation: the traces leave that case out.
            if not any(_holds_at_some_step(other, prompt) or
                       _holds_at_some_step(TraceRequest(req_id="", prompt=tuple(prompt),
                                                        output=tuple(output), arrival=0,
                                                        prefill_steps=1), list(other.prompt))
                       for other in requests):
                break
        requests.append(TraceRequest(req_id=f"r{n}", prompt=tuple(prompt), output=tuple(output),
                                     arrival=arrival, prefill_steps=rng.choice([1, 1, 1, 2, 3])))
    return Trace(seed=seed, config=config, requests=tuple(requests))


def _holds_at_some_step(request: TraceRequest, tokens: list[int]) -> bool:
    """Whether `request`'s tokens (its prompt and some of its output) are ever `tokens`."""
    full = request.prompt + request.output
    return len(request.prompt) <= len(tokens) <= len(full) and list(full[: len(tokens)]) == tokens


Propose = Callable[[Batch, list[list[int]]], list[list[int]]]


def replay(trace: Trace, propose: Propose) -> int:
    """Runs `trace` to its end, calling `propose(batch, sampled)` every step; returns the number
    of steps. `propose` returns one draft list per row of the batch (len(sampled) rows)."""
    config = trace.config
    batch = Batch(config.max_num_reqs, config.max_model_len)
    waiting = list(trace.requests)
    by_id = {r.req_id: r for r in trace.requests}
    emitted: dict[str, int] = {}  # tokens of the output emitted so far
    prefill_left: dict[str, int] = {}
    drafts: dict[str, list[int]] = {}
    finished: list[str] = []
    step = 0
    while waiting or batch.num_reqs:
        holes: list[int] = []
        for req_id in finished:
            batch.remove(req_id, holes)
        finished = []
        while waiting and waiting[0].arrival <= step and batch.num_reqs < config.max_num_reqs:
            request = waiting.pop(0)
            batch.add(request.req_id, request.prompt, holes)
            emitted[request.req_id] = 0
            prefill_left[request.req_id] = request.prefill_steps
        batch.condense(holes)
        if not batch.num_reqs:  # nothing runs until the next arrival
            if not waiting:
                break
            step = waiting[0].arrival
            continue
        sampled: list[list[int]] = []
        for row, req_id in enumerate(batch.slots):
            assert req_id is not None
            request = by_id[req_id]
            done = emitted[req_id]
            if prefill_left[req_id] > 0:
                prefill_left[req_id] -= 1
                new = [] if prefill_left[req_id] else [request.output[0]]
            else:
                rest = request.output[done:]
                accepted = 0
                for draft, token in zip(drafts.get(req_id, []), rest[:-1], strict=False):
                    if draft != token:
                        break
                    accepted += 1
                new = list(rest[: accepted + 1])
            n = int(batch.num_tokens_no_spec[row])
            batch.token_ids_cpu[row, n : n + len(new)] = new
            batch.num_tokens_no_spec[row] = n + len(new)
            emitted[req_id] = done + len(new)
            sampled.append(new)
            if emitted[req_id] >= len(request.output):
                finished.append(req_id)
        proposed = propose(batch, sampled)
        assert len(proposed) == len(sampled), (len(proposed), len(sampled))
        drafts = {req_id: list(d) for req_id, d in zip(batch.slots, proposed, strict=True)}
        step += 1
    return step


def _scenario(config: TraceConfig, *requests: tuple[tuple[int, ...], tuple[int, ...], int]
              ) -> Trace:
    return Trace(seed=-1, config=config, requests=tuple(
        TraceRequest(req_id=f"r{n}", prompt=prompt, output=output, arrival=arrival,
                     prefill_steps=1)
        for n, (prompt, output, arrival) in enumerate(requests)))


_DEFAULTS = TraceConfig(k=4, max_tree_depth=24, max_cached_requests=10000, max_spec_factor=1.0,
                        min_token_prob=0.1, min_ngram=1, max_ngram=3, max_num_reqs=1,
                        max_model_len=64)

#: The cases the issue names, as serving runs: name -> trace.
SCENARIOS: dict[str, Trace] = {
    # request A emits 7 8 9; B (prompt 60 61) then samples 7: the global tree holds A's 7 8 9
    # only if A's first sampled token went in
    "first_sampled_token_in_global_tree": _scenario(
        _DEFAULTS, ((50, 51), (7, 8, 9), 0), ((60, 61), (7, 8, 9, 5), 0)),
    "first_sampled_token_in_global_tree_factor_2": _scenario(
        attrs.evolve(_DEFAULTS, max_spec_factor=2.0),
        ((50, 51), (7, 8, 9), 0), ((60, 61), (7, 8, 9, 5), 0)),
    # A = 1 5 6 7 5 6 leaves its row to B (prompt 1 3 4 2 3 4 2 3, first output 4): the same
    # first token, and the row grew by 3 tokens
    "reused_row_same_first_token": _scenario(
        attrs.evolve(_DEFAULTS, k=3), ((1, 5, 6, 7), (5, 6), 0),
        ((1, 3, 4, 2, 3, 4, 2, 3), (4, 2, 3, 4, 7), 0)),
    # on 1 0 1 0 1 0 1 0 1 the matches of length 3, 4 and 5 all score 2: the longest wins
    "score_ties_go_to_the_longer_match": _scenario(
        _DEFAULTS, ((1, 0, 1, 0, 1, 0, 1, 0), (1, 0, 1, 0, 1, 2), 0)),
    # three rows; the first finishes first, so the third moves down into its row, and the
    # batch shrinks to one; a fourth request then takes a freed row
    "rows_move_down_and_the_batch_shrinks": _scenario(
        attrs.evolve(_DEFAULTS, max_num_reqs=3, k=3),
        ((1, 2, 3), (4,), 0), ((1, 2, 5), (6, 2, 5, 6, 2, 5, 6), 0),
        ((1, 2, 3, 4, 2), (3, 4, 2, 3, 4, 9), 0), ((1, 2, 5, 6), (2, 5, 6, 2), 3)),
    # two samples of one prompt (vLLM's n = 2): the same prompt in two rows
    "two_samples_of_one_prompt": _scenario(
        attrs.evolve(_DEFAULTS, max_num_reqs=2, k=3),
        ((1, 4, 5, 6, 4, 5), (6, 4, 5, 6, 7), 0), ((1, 4, 5, 6, 4, 5), (7, 4, 5, 6, 4), 0)),
    # a small global cache: the oldest response leaves it
    "global_tree_evicts_the_oldest_response": _scenario(
        attrs.evolve(_DEFAULTS, max_cached_requests=1, max_num_reqs=2, k=3),
        ((1, 2), (8, 9, 10, 11), 0), ((1, 3), (12, 13, 14), 0), ((1, 4), (8, 9, 10), 2),
        ((1, 5), (12, 13, 14), 6)),
    # requests run into the model's maximum length: at most max_model_len - tokens - 1 drafts
    "requests_reach_max_model_len": _scenario(
        attrs.evolve(_DEFAULTS, max_model_len=12, max_num_reqs=2),
        ((1, 2, 3, 4, 2, 3), (4, 2, 3, 4, 2, 3), 0), ((1, 2, 3), (4, 2, 3, 4, 2, 3, 4, 2), 0)),
}
