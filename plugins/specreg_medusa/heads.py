"""The Medusa heads and how a draft reads them: their top-k, or each request's draws from their
filtered q, with the checks of what they take.

`MedusaHeads` is Medusa's heads module (per head, `num_layers` residual SiLU blocks, then a
bias-free linear map to the vocabulary) that a framework loads the checkpoint's weights into.
`head_topk` takes a head's deterministic top-k (by logit); `head_sampling` checks a batch's
parameters and positions and resolves its stream keys once; `sample_heads` draws a sampled
request's head d tokens WITHOUT replacement from q_d = filter(head d's logits / T) under its
temperature, top-k, top-p and min-p (`specreg.step.draft_sampling.sample_children`: the
verifiers' own filtered rows, Gumbel-top-k on the SAMPLE-role random stream at (request key,
positions + d)), greedy requests keeping the deterministic top-k.

Why one head's draws may serve every node of a depth: the verifier walks one node per depth.
Which node P of depth d it reaches is a function of the draws of heads 0..d - 1, the
acceptance uniforms and residual draws at positions before positions + d, and the target rows
on the way; head d's draws are the SAMPLE-role stream at positions + d, independent of all of
that. So given the walk reached P, P's children (the first c draws of head d) are still c
draws without replacement from q_d, in sibling order: exactly what the recursive rule needs at
P, which then emits exactly the target's (filtered) distribution after P's path. The other
nodes of depth d + 1 hold the same tokens, but the walk never reads them once it is at P, and
the acceptance uniforms of P's children (ACCEPT role at positions + d) and the final draw
(RESIDUAL role) were read at no earlier depth. By induction over the depths every emitted
token follows the target. Draws of heads below the last accepted depth never touched the
committed tokens either, so the next step may draw at those positions again.
"""

from __future__ import annotations

import attrs
import torch

from specreg.contract.sampling_params import SamplingParams
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_params,
    check_same_device,
    check_shape,
    check_tensor,
    should_check_values,
)


@attrs.frozen(kw_only=True)
class HeadSampling:
    """How a draft's heads are sampled: `params` of its b requests; `keys` int64 [b] their
    keys on the random stream and `positions` int64 [b] the absolute output position of the
    depth-1 nodes (head d draws at positions + d), or both None: every head then draws under
    fresh keys from `generator`."""

    params: SamplingParams
    keys: torch.Tensor | None
    positions: torch.Tensor | None
    generator: torch.Generator | None


def inputs_error(message: str, field: str, accepted: str, fix: str) -> KernelInputError:
    """SR485: what a Medusa drafter was given does not fit its heads or its plan."""
    return KernelInputError(problem("SR485", message, accepted=accepted, fix=fix, field=field))


class MedusaHeads(torch.nn.Module):
    """Medusa's heads: per head, `num_layers` blocks x + SiLU(W x + b), then W_out x."""

    def __init__(self, *, num_heads: int, hidden_size: int, vocab_size: int, num_layers: int = 1):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleList(torch.nn.Linear(hidden_size, hidden_size) for _ in range(num_layers))
            for _ in range(num_heads)
        )
        self.out = torch.nn.ModuleList(
            torch.nn.Linear(hidden_size, vocab_size, bias=False) for _ in range(num_heads)
        )

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [b, H] (the target's last hidden state) -> logits [b, num_heads, V]."""
        outs = []
        for blocks, out in zip(self.blocks, self.out, strict=True):
            x = hidden
            for block in blocks:
                x = x + torch.nn.functional.silu(block(x))
            outs.append(out(x))
        return torch.stack(outs, dim=1)


def head_topk(logits: torch.Tensor, rows: int, name: str, topk: int) -> torch.Tensor:
    """int64 [rows, topk]: each row's `topk` best tokens by logit (`logits` [rows, V] float,
    V >= topk; SR900, SR901, SR485)."""
    check_tensor(name, logits)
    check_shape(name, logits, (rows, None))
    check_dtype(name, logits, FLOAT_DTYPES)
    if logits.shape[1] < topk:
        raise inputs_error(
            f"{name} has a vocabulary of {logits.shape[1]}, fewer than topk={topk}",
            name, f"logits [{rows}, V] with V >= {topk}", "pass the heads' full logits",
        )
    return torch.topk(logits.float(), topk, dim=-1).indices


def head_sampling(
    params: SamplingParams, keys: torch.Tensor | None, positions: torch.Tensor | None,
    generator: torch.Generator | None, *, batch: int, vocab: int, device: torch.device,
    check_values: bool | None,
) -> HeadSampling:
    """`params` (SR910-SR915), `positions` (int [b], >= 0) checked, and the requests'
    stream keys resolved once for every head (a seeded request's is its seed)."""
    values = should_check_values(device, check_values)
    check_params(params, batch, vocab, device, values=values)
    if positions is None:
        return HeadSampling(params=params, keys=None, positions=None, generator=generator)
    from specreg.kernels.chain.checks import check_position_values
    from specreg.kernels.sampling import request_keys

    check_tensor("positions", positions)
    check_shape("positions", positions, (batch,))
    check_dtype("positions", positions, INDEX_DTYPES)
    check_same_device(params=params.seed, positions=positions)
    if values:
        check_position_values(positions)
    return HeadSampling(
        params=params, keys=request_keys(params, keys, generator=generator),
        positions=positions.to(torch.int64), generator=generator,
    )


def check_head_rows(logits: torch.Tensor, name: str, check_values: bool | None) -> None:
    """SR904 (with value checks) for head rows [b, s, V] with NaN or +inf, or only -inf."""
    from specreg.step.draft_sampling import invalid_logit_rows

    if not should_check_values(logits.device, check_values):
        return
    b, s, v = logits.shape
    bad = invalid_logit_rows(logits.reshape(b * s, v)).nonzero().flatten().tolist()
    if bad:
        pairs = [(r // s, r % s) for r in bad]
        raise KernelInputError(
            problem(
                "SR904",
                f"{name} rows (request, head) {pairs[:8]}{' ...' if len(pairs) > 8 else ''} "
                "hold NaN or +inf, or only -inf: no token can be drawn from them",
                accepted="finite logits (-inf marks a masked token; every row keeps one "
                "finite)",
                fix="check the Medusa heads' output (or the mask) that produced those rows",
                field=name,
            )
        )


def sample_heads(
    logits: torch.Tensor, first_head: int, sampling: HeadSampling, name: str, *, topk: int,
    filter_order: str, backend: str, check_values: bool | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Heads first_head.. of `logits` [b, s, V]: (tokens int64 [b, s, topk], q float32
    [b, s, V]). Sampled requests draw each head's tokens from its filtered q without
    replacement, in draw order, on the stream at positions + head; greedy requests keep the
    deterministic top-k and a zero q. Without value checks, a request with invalid
    parameters or a head row with no finite maximum keeps the top-k and a zero q there (no
    q: the verifier runs the target-only rule, and flags the invalid parameters)."""
    from specreg.step.draft_sampling import invalid_logit_rows, sample_children

    b, s, v = logits.shape
    flat = logits.reshape(b * s, v)
    tokens = head_topk(flat, b * s, name, topk)
    check_head_rows(logits, name, check_values)
    params = sampling.params
    drawable = (~params.greedy & ~params.invalid_rows(v))[:, None] & ~invalid_logit_rows(
        flat).view(b, s)
    q = torch.zeros((b * s, v), dtype=torch.float32, device=logits.device)
    rows = drawable.flatten().nonzero().flatten()
    if rows.numel():
        request, head = rows // s, first_head + rows % s
        keys, positions = sampling.keys, sampling.positions
        drawn = sample_children(
            flat.index_select(0, rows), params.select(request), topk,
            keys=None if keys is None else keys[request],
            positions=None if positions is None else positions[request] + head,
            generator=sampling.generator, filter_order=filter_order,
            backend=backend, check_values=False,
        )
        tokens = tokens.index_copy(0, rows, drawn.tokens)
        q.index_copy_(0, rows, drawn.q)
    return tokens.view(b, s, topk), q.view(b, s, v)
