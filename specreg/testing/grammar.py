"""Grammar-constrained generation on the toy models, with a real grammar engine (xgrammar).

Structured output with speculation, end to end: `GrammarConstraint` keeps one xgrammar matcher
per request and, for every node the loop verifies (a chain position or a tree node, given as its
token path from the root), fills the int32 bitmask row of the tokens the grammar allows after
that path (`fill_next_token_bitmask`, then `rollback`), which the plan's verifier takes as
`token_bitmask=`; after the verify, the matchers accept what was emitted, and a token the
grammar refuses is recorded as a violation (never silently skipped). `constrained_greedy`
decodes without speculation under the same grammar (the oracle), and
`constrained_distribution` gives the exact distribution of the first two emitted tokens by
enumeration, for the chi-square check (`specreg.testing.lossless.check_constrained`).

The toy vocabulary: the first ids are JSON fragments (`JSON_TOKENS`), the rest filler strings the
schema never allows; the grammar is `DEMO_SCHEMA`, an object of a boolean, an integer and a list
of integers, and every request's response starts with the prefill `DEMO_PREFILL` (`{"c":[`), so
that the first emitted tokens have several allowed values. After the response ends (the matcher
accepted the stop token) only the stop token is allowed, as a server that pads finished requests.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import torch

from specreg.kernels.token_mask import bitmask_words
from specreg.kernels.token_mask.reference import masked_row
from specreg.contract.sampling_params import SamplingParams
from specreg.testing.loop import GenerationResult, SpeculativeLoop
from specreg.testing.lossless import P_VALUE_THRESHOLD, chi_square_p_value
from specreg.testing.toy_model import ToyLM

if TYPE_CHECKING:
    from specreg.registry.plan import SpecPlan

#: The JSON fragments at the start of the toy vocabulary; the stop token is the last of them.
JSON_TOKENS = (
    "{", "}", "[", "]", ":", ",", '"a"', '"b"', '"c"', "true", "false",
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "-", "<eos>",
)
STOP_TOKEN = len(JSON_TOKENS) - 1
DEMO_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "boolean"},
        "b": {"type": "integer"},
        "c": {"type": "array", "items": {"type": "integer"}},
    },
    "additionalProperties": False,
}
DEMO_PREFILL = ("{", '"c"', ":", "[")


def toy_vocabulary(vocab_size: int) -> list[str]:
    """The toy model's token strings: the JSON fragments, then fillers the grammar never allows."""
    if vocab_size < len(JSON_TOKENS):
        raise ValueError(f"the toy vocabulary needs at least {len(JSON_TOKENS)} tokens")
    return [*JSON_TOKENS, *(f"~{i}" for i in range(vocab_size - len(JSON_TOKENS)))]


def token_id(text: str) -> int:
    return JSON_TOKENS.index(text)


def compile_demo_grammar(vocab_size: int) -> Any:
    """`DEMO_SCHEMA` compiled by xgrammar for the toy vocabulary (ImportError without it)."""
    import xgrammar as xgr

    info = xgr.TokenizerInfo(
        toy_vocabulary(vocab_size), vocab_type=xgr.VocabType.RAW, stop_token_ids=[STOP_TOKEN]
    )
    compiler = xgr.GrammarCompiler(info)
    return compiler.compile_json_schema(
        json.dumps(DEMO_SCHEMA), any_whitespace=False, separators=(",", ":")
    )


class GrammarConstraint:
    """One matcher per request, started after `prefill` (token ids the responses begin with)."""

    def __init__(self, grammar: Any, batch_size: int, vocab_size: int, prefill: Sequence[int]) -> None:
        import xgrammar as xgr

        self.vocab_size = vocab_size
        self.words = bitmask_words(vocab_size)
        self.matchers = [xgr.GrammarMatcher(grammar) for _ in range(batch_size)]
        self.ended = [False] * batch_size
        self.violations: list[tuple[int, int]] = []  # (request, token) the grammar refused
        for matcher in self.matchers:
            for token in prefill:
                if not matcher.accept_token(int(token)):
                    raise ValueError(f"the prefill token {token} is not accepted by the grammar")

    def _fill(self, r: int, row: torch.Tensor) -> None:
        matcher = self.matchers[r]
        if self.ended[r] or matcher.is_terminated():
            row.zero_()
            row[STOP_TOKEN // 32] = 1 << (STOP_TOKEN % 32)
        else:
            matcher.fill_next_token_bitmask(row.view(1, -1))

    def bitmask(self, paths: torch.Tensor, depths: torch.Tensor) -> torch.Tensor:
        """int32 [b, N, W]: row (r, t) allows the tokens the grammar accepts after request r's
        committed tokens and node t's path below the root (`paths` [b, N, N] from the root, -1
        padded; `depths` [b, N]). A node whose path leaves the grammar cannot be reached (the
        verifier rejects the token that leaves it), so its row allows every token. The nodes
        are visited in path order, so the matcher only rolls back to the common prefix of two
        consecutive paths."""
        b, n = depths.shape
        out = torch.zeros((b, n, self.words), dtype=torch.int32)
        rows = paths.tolist()
        for r in range(b):
            if self.ended[r]:
                for t in range(n):
                    self._fill(r, out[r, t])
                continue
            matcher = self.matchers[r]
            node_paths = [rows[r][t][1 : int(depths[r, t]) + 1] for t in range(n)]
            held: list[int] = []  # the tokens the matcher holds beyond the committed ones
            for t in sorted(range(n), key=lambda t: node_paths[t]):
                path = node_paths[t]
                common = 0
                while common < min(len(held), len(path)) and held[common] == path[common]:
                    common += 1
                if len(held) > common:
                    matcher.rollback(len(held) - common)
                    del held[common:]
                while len(held) < len(path) and not matcher.is_terminated():
                    if not matcher.accept_token(path[len(held)]):
                        break
                    held.append(path[len(held)])
                ended = matcher.is_terminated() and all(x == STOP_TOKEN for x in path[len(held):])
                if len(held) == len(path) or ended:
                    self._fill(r, out[r, t])
                else:
                    out[r, t] = -1  # every bit set: unreachable
            if held:
                matcher.rollback(len(held))
        return out

    def commit(self, tokens: torch.Tensor, counts: torch.Tensor) -> None:
        """The matchers accept each request's first `counts[r]` emitted tokens."""
        for r, count in enumerate(counts.tolist()):
            for token in tokens[r, :count].tolist():
                self.accept(r, int(token))

    def accept(self, r: int, token: int) -> None:
        """Request r's matcher accepts `token`; a refused one is recorded in `violations`."""
        if self.ended[r]:
            if token != STOP_TOKEN:
                self.violations.append((r, token))
        elif not self.matchers[r].accept_token(token):
            self.violations.append((r, token))
        elif self.matchers[r].is_terminated():
            self.ended[r] = True


def constrained_greedy(target: ToyLM, grammar: Any, prompts: torch.Tensor, num_new: int,
                       prefill: Sequence[int]) -> torch.Tensor:
    """Plain constrained greedy decoding: each step the argmax of the target's logits under the
    grammar's mask. int64 [b, prompt_len + num_new]."""
    b, length = prompts.shape
    constraint = GrammarConstraint(grammar, b, target.config.vocab_size, prefill)
    seqs = torch.cat([prompts, torch.zeros(b, num_new, dtype=torch.long)], dim=1)
    row = torch.zeros((1, 1, constraint.words), dtype=torch.int32)
    for j in range(num_new):
        logits = target.next_logits(seqs, torch.full((b,), length + j))
        for r in range(b):
            constraint._fill(r, row[0, 0])
            token = int(masked_row(logits[r].float(), row[0, 0], probabilities=False).argmax())
            seqs[r, length + j] = token
            constraint.accept(r, token)
    return seqs


def constrained_distribution(target: ToyLM, grammar: Any, prompt: torch.Tensor,
                             prefill: Sequence[int], *, temperature: float) -> dict[tuple[int, int], float]:
    """P(first two emitted tokens) under non-speculative constrained sampling of `prompt`
    (int64 [L]) at `temperature`, by enumeration over the grammar's allowed first tokens."""
    constraint = GrammarConstraint(grammar, 1, target.config.vocab_size, prefill)
    length = prompt.numel()
    row = torch.zeros(constraint.words, dtype=torch.int32)

    def probs(seq: torch.Tensor, at: int) -> torch.Tensor:
        constraint._fill(0, row)
        logits = target.next_logits(seq[None, :], torch.tensor([at]))[0].float() / temperature
        return torch.softmax(masked_row(logits, row, probabilities=False), -1)

    seq = torch.cat([prompt, torch.zeros(2, dtype=torch.long)])
    out: dict[tuple[int, int], float] = {}
    first = probs(seq, length)
    for t1 in first.nonzero().flatten().tolist():
        seq[length] = t1
        assert constraint.matchers[0].accept_token(t1)
        second = probs(seq, length + 1)
        for t2 in second.nonzero().flatten().tolist():
            out[(t1, t2)] = float(first[t1]) * float(second[t2])
        constraint.matchers[0].rollback(1)
    return out


@attrs.frozen
class ConstrainedCheck:
    """A constrained run: greedy equality, grammar violations and the sampled pairs' p-value."""

    greedy_passed: bool
    violations: int  # emitted tokens the grammar refused, over both runs
    p_value: float
    result: GenerationResult

    @property
    def sampling_passed(self) -> bool:
        return self.violations == 0 and self.p_value > P_VALUE_THRESHOLD


def with_prefill(prompts: torch.Tensor, prefill: Sequence[int] = ()) -> torch.Tensor:
    """`prompts` [P, L] with the response prefill (default `DEMO_PREFILL`) as their last tokens."""
    ids = list(prefill) or [token_id(t) for t in DEMO_PREFILL]
    out = prompts.clone()
    out[:, -len(ids):] = torch.tensor(ids, dtype=out.dtype)
    return out


def check_constrained(
    plan: SpecPlan,
    target: ToyLM,
    draft: ToyLM,
    prompts: torch.Tensor,
    num_new: int,
    *,
    samples: int = 4000,
    seed: int = 0,
    temperature: float = 1.0,
    grammar: Any = None,
    constraint_type: type[GrammarConstraint] | None = None,
) -> ConstrainedCheck:
    """Speculative decoding of `prompts` under `DEMO_SCHEMA` (prefilled with `DEMO_PREFILL`):
    every request greedy for `num_new` tokens must equal `constrained_greedy`; then `samples`
    copies of the first prompt for two tokens, one request in four greedy and the rest at
    `temperature`, whose pairs of first tokens must follow `constrained_distribution`
    (chi-square) while the greedy ones equal the constrained argmax path. Every emitted token
    must be accepted by the grammar. `constraint_type` swaps the constraint (a negative
    control)."""
    vocab = target.config.vocab_size
    grammar = grammar if grammar is not None else compile_demo_grammar(vocab)
    make = constraint_type or GrammarConstraint
    prompts = with_prefill(prompts)
    prefill = [token_id(t) for t in DEMO_PREFILL]
    b = prompts.shape[0]
    greedy_constraint = make(grammar, b, vocab, prefill)
    greedy = SamplingParams.of(b, temperature=0.0)
    result = SpeculativeLoop(
        plan, target, draft, params=greedy, constraint=greedy_constraint
    ).generate(prompts, num_new)
    plain = constrained_greedy(target, grammar, prompts, num_new, prefill)
    greedy_passed = bool((result.tokens == plain).all())

    prompt = prompts[0]
    kinds = torch.arange(samples) % 4
    params = SamplingParams.of(
        samples, temperature=torch.where(kinds == 0, 0.0, temperature),
        seed=seed * 1_000_003 + torch.arange(samples),
    )
    sampled_constraint = make(grammar, samples, vocab, prefill)
    sampled = SpeculativeLoop(
        plan, target, draft, params=params, constraint=sampled_constraint
    ).generate(prompt[None, :].expand(samples, -1).clone(), 2)
    length = prompt.numel()
    pairs = sampled.tokens[:, length] * vocab + sampled.tokens[:, length + 1]
    greedy_rows = kinds == 0
    if not bool((sampled.tokens[greedy_rows, length : length + 2] == plain[0, length : length + 2]).all()):
        greedy_passed = False
    expected = torch.zeros(vocab * vocab, dtype=torch.float64)
    exact = constrained_distribution(target, grammar, prompt, prefill, temperature=temperature)
    for (t1, t2), prob in exact.items():
        expected[t1 * vocab + t2] = prob
    counts = torch.bincount(pairs[~greedy_rows], minlength=vocab * vocab)
    p_value = chi_square_p_value(counts, expected)
    violations = len(greedy_constraint.violations) + len(sampled_constraint.violations)
    return ConstrainedCheck(greedy_passed, violations, p_value, result)
