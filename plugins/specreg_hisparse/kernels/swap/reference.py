"""The plain HiSparse swap rule, one request and one token at a time: the oracle of the tests.

For each batch row ``b`` of one call (request slot ``r = req[b]``, anchor layer ``layer``):

1. padding: rows ``b >= num_real`` get `PADDED_LOCATION` everywhere, an empty plan, no hits, and
   change no state;
2. valid occurrence: ``0 <= token < seq_lens[b, step]``; the others get -1;
3. tail: ``tail_tokens[r, token % page_size] == token`` -> the tail slot's row, no IO;
4. hit: the (lowest) hot slot holding the token -> that slot's row;
5. misses: the distinct remaining tokens in ascending order; those with no host copy
   (``host_cache_locs[r, token] < 0``) get -1, are not planned and are counted as errors;
6. victims: the hot slots not hit by this call, ordered by ``(stamp, slot)`` (empty slots have
   stamp -1 and go first); served miss ``i`` takes victim ``i`` and is admitted to the hot
   buffer, or, past the victims, scratch slot ``scratch_start + i - #victims`` for this call
   only; plan entry ``i`` is (host row, the slot's device row);
7. commit: the request's clock advances by one, and hit and admitted slots take the new clock
   value as their stamp.

Written as readable loops over Python lists: no vectorisation, no device branches, no numpy.
Used by tests only (the torch and Triton implementations must make exactly these decisions).
"""

from __future__ import annotations

import torch

from specreg_hisparse.kernels.swap.types import PADDED_LOCATION, SwapCall


def swap_reference(call: SwapCall) -> int:
    """Apply the rule to `call` in place (outputs and state); return the number of distinct
    tokens with no host copy, which is also added to ``state.error_count``."""
    lay, state, layer = call.layout, call.state, call.layer
    bs, steps, top_k = call.tokens.shape
    hot, page = lay.hot_size, lay.page_size
    num_real = call.real_rows()
    tokens = call.tokens.tolist()
    seq_lens = call.seq_lens.tolist()
    req = call.req.tolist()
    out = [[[PADDED_LOCATION] * top_k for _ in range(steps)] for _ in range(bs)]
    plan_src = [[-1] * (steps * top_k) for _ in range(bs)]
    plan_dst = [[-1] * (steps * top_k) for _ in range(bs)]
    miss_count = [0] * bs
    hits = [0] * bs
    errors = 0
    for b in range(min(num_real, bs)):
        r = req[b]
        held = state.slot_tokens[layer, r].tolist()
        stamps = state.slot_stamp[layer, r].tolist()
        rows = state.slot_rows[r].tolist()
        tail = state.tail_tokens[r].tolist()
        host_locs = state.host_cache_locs[r].tolist()
        now = int(state.clock[layer, r]) + 1

        def hot_slot_of(token: int, held: list[int] = held) -> int | None:
            for slot in range(hot):
                if held[slot] == token:
                    return slot
            return None

        hit_slots: set[int] = set()
        missing: set[int] = set()
        for s in range(steps):
            for k in range(top_k):
                token = tokens[b][s][k]
                if not 0 <= token < seq_lens[b][s] or tail[token % page] == token:
                    continue
                slot = hot_slot_of(token)
                if slot is None:
                    missing.add(token)
                else:
                    hit_slots.add(slot)
        served = [token for token in sorted(missing) if host_locs[token] >= 0]
        errors += len(missing) - len(served)
        victims = sorted((stamps[slot], slot) for slot in range(hot) if slot not in hit_slots)
        miss_slot: dict[int, int] = {}
        admitted: list[tuple[int, int]] = []
        for i, token in enumerate(served):
            if i < len(victims):
                slot = victims[i][1]
                admitted.append((slot, token))
            else:
                slot = lay.scratch_start + i - len(victims)
            miss_slot[token] = slot
            plan_src[b][i] = host_locs[token]
            plan_dst[b][i] = rows[slot]
        for s in range(steps):
            for k in range(top_k):
                token = tokens[b][s][k]
                if not 0 <= token < seq_lens[b][s]:
                    location = -1
                elif tail[token % page] == token:
                    location = rows[hot + token % page]
                elif hot_slot_of(token) is not None:
                    location = rows[hot_slot_of(token)]
                elif token in miss_slot:
                    location = rows[miss_slot[token]]
                else:
                    location = -1  # no host copy
                out[b][s][k] = location
        for slot in hit_slots:
            stamps[slot] = now
        for slot, token in admitted:
            held[slot] = token
            stamps[slot] = now
        state.slot_tokens[layer, r] = torch.tensor(held, dtype=state.slot_tokens.dtype)
        state.slot_stamp[layer, r] = torch.tensor(stamps, dtype=state.slot_stamp.dtype)
        state.clock[layer, r] = now
        miss_count[b] = len(served)
        hits[b] = len(hit_slots)
    n = steps * top_k
    call.out.copy_(torch.tensor(out, dtype=torch.int32).view(call.out.shape))
    call.miss_src[:, :n] = torch.tensor(plan_src, dtype=torch.int64).view(bs, n)
    call.miss_dst[:, :n] = torch.tensor(plan_dst, dtype=torch.int32).view(bs, n)
    call.miss_count.copy_(torch.tensor(miss_count, dtype=torch.int32))
    call.hits.copy_(torch.tensor(hits, dtype=torch.int32))
    state.error_count += errors
    return errors
