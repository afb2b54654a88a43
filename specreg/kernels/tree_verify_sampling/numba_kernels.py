"""The compiled passes of tree sampling's CPU path, target-only rule (numba `njit`, no fastmath).

Imported only by `numba_impl`, and only when numba is installed (`specreg.kernels.race_numba`,
the stream's words and the race compiled, imports it). The passes and why their values have the
torch path's bits are in `numba_impl`'s docstring; the block race between the two passes here
is `race_numba.race_blocks`.
"""

from __future__ import annotations

import numpy as np

from specreg.kernels.race_numba import (
    BLOCK,
    BLOCK_BASE,
    RESIDUAL,
    as_float32,
    first_argmax,
    halve,
    key_lanes,
    njit,
    race_blocks,
    raw_value,
    token_word,
)

__all__ = ["assemble", "children_pass", "race_blocks", "race_tokens", "walk_and_masses"]


@njit
def _links(links, n, into, bad):
    """`into`[links[i]] = i for the links in [0, n) (torch's scatter into a spill column: a link
    of n or below 0 is none); returns `bad` + how many targets had two writers or a link lay
    past n (the torch path then decides, or raises)."""
    for i in range(n):
        into[i] = -1
    for i in range(n):
        t = links[i]
        if t > n:
            bad += 1
        elif 0 <= t < n:
            bad += into[t] >= 0
            into[t] = i
    return bad


@njit
def children_pass(next_token, next_sibling, candidates, p, shift_p, coins, parent, rank, x_ok,
                  eff, earlier, coin_at_parent, bad):
    """Pass 1, per request: `torch_impl.sibling_order` (parents, sibling ranks by the same
    pointer jumping), which children are in the vocabulary (`x_ok`), their p values counted 0 for
    a token already tried at the parent (`eff`), the `earlier` siblings matrix (float32, for
    torch's batched product) and the target-only coin at each node's parent. bad[r] > 0: links
    whose scatter torch leaves undefined or refuses (the torch path takes the call)."""
    b, n = candidates.shape
    vocab = p.shape[2]
    prev = np.empty(n, np.int64)
    first_parent = np.empty(n, np.int64)
    anchor = np.empty(n, np.int64)
    anchor_next = np.empty(n, np.int64)
    rank_next = np.empty(n, np.int64)
    xs = np.empty(n, np.int64)
    steps = 0
    span = max(n - 1, 1)
    while span > 0:
        steps += 1
        span >>= 1
    for r in range(b):
        bad[r] = _links(next_sibling[r], n, prev, 0)
        bad[r] = _links(next_token[r], n, first_parent, bad[r])
        for i in range(n):
            anchor[i] = prev[i] if prev[i] >= 0 else i
            rank[r, i] = 1 if prev[i] >= 0 else 0
        for _ in range(steps):
            for i in range(n):
                rank_next[i] = rank[r, i] + rank[r, anchor[i]]
                anchor_next[i] = anchor[anchor[i]]
            for i in range(n):
                rank[r, i], anchor[i] = rank_next[i], anchor_next[i]
        for c in range(n):
            parent[r, c] = first_parent[anchor[c]]
            x = candidates[r, c]
            x_ok[r, c] = parent[r, c] >= 0 and 0 <= x < vocab
            xs[c] = min(max(x, 0), vocab - 1)
            coin_at_parent[r, c] = coins[r, max(parent[r, c], 0)]
        for c in range(n):
            dup = False
            for j in range(n):
                e = parent[r, c] == parent[r, j] and rank[r, j] < rank[r, c] and x_ok[r, j]
                earlier[r, c, j] = np.float32(1.0) if e else np.float32(0.0)
                dup = dup or (e and xs[j] == xs[c])
            p_x = raw_value(p, r, max(parent[r, c], 0), xs[c], shift_p)
            eff[r, c] = np.float32(0.0) if dup or not x_ok[r, c] else p_x


@njit
def _masses(p_row, shift_p, tried, count, out, block_buf, half):
    """`block_masses_torch` of p without the `tried` tokens (sorted, `count` of them; each
    set as p + (0 - p), the torch path's scatter of deltas), zeros past the row's end."""
    vocab = p_row.shape[0]
    h, at = BLOCK // 2, 0
    for blk in range(out.shape[0]):
        base = blk * BLOCK
        hits = at < count and tried[at] < base + BLOCK
        if base + BLOCK <= vocab and not hits:
            for j in range(h):
                half[j] = as_float32(p_row[base + j], shift_p) + as_float32(
                    p_row[base + h + j], shift_p)
        else:
            for t in range(BLOCK):
                k = base + t
                block_buf[t] = as_float32(p_row[k], shift_p) if k < vocab else np.float32(0.0)
            while at < count and tried[at] < base + BLOCK:
                w = block_buf[tried[at] - base]
                block_buf[tried[at] - base] = w + (np.float32(0.0) - w)
                at += 1
            for j in range(h):
                half[j] = block_buf[j] + block_buf[j + h]
        out[blk] = halve(half)


@njit
def _no_mass(masses):
    """`~(masses.amax() > 0)`: no positive mass, or a NaN (amax propagates it)."""
    top = False
    for v in masses:
        if v != v:
            return True
        top = top or v > 0
    return not top


@njit
def walk_and_masses(p, shift_p, candidates, parent, rank, x_ok, hit, keys, positions, depth,
                    path, count, last, tried, n_tried, empty, masses, lanes, words):
    """Pass 2, per request: the first accepted child of every parent (smallest rank, then
    index), the walk down `depth` levels, the children of the last node tried there (none at
    the depth limit; sorted tokens into `tried`), the final row's block masses (p without them;
    p where that has no mass: `empty`), the draw's key lanes (RESIDUAL role, positions + count)
    and the stream's words of the block keys."""
    b, n = candidates.shape
    chosen = np.empty(n, np.int64)
    block_buf = np.empty(BLOCK, np.float32)
    half = np.empty(BLOCK // 2, np.float32)
    for r in range(b):
        for i in range(n):
            chosen[i] = -1
        for c in range(n):
            pc = parent[r, c]
            if pc >= 0 and x_ok[r, c] and hit[r, c]:
                best = chosen[pc]
                if best < 0 or rank[r, c] * n + c < rank[r, best] * n + best:
                    chosen[pc] = c
        path[r, 0] = 0
        for level in range(1, depth + 1):
            path[r, level] = -1
        at, moves = 0, 0
        for level in range(1, depth + 1):
            step = chosen[at]
            if step < 0:
                break
            path[r, level] = step
            at, moves = step, moves + 1
        last[r], count[r] = at, moves
        k = 0
        if moves < depth:
            for c in range(n):
                if x_ok[r, c] and parent[r, c] == at and not _is_dup(r, c, parent, rank, x_ok,
                                                                     candidates):
                    tok = candidates[r, c]
                    j = k  # insertion sort: at most N - 1 tokens
                    while j > 0 and tried[r, j - 1] > tok:
                        tried[r, j] = tried[r, j - 1]
                        j -= 1
                    tried[r, j] = tok
                    k += 1
        n_tried[r] = k
        _masses(p[r, at], shift_p, tried[r], k, masses[r], block_buf, half)
        empty[r] = _no_mass(masses[r])
        if empty[r]:
            _masses(p[r, at], shift_p, tried[r], 0, masses[r], block_buf, half)
        key_lanes(keys[r], RESIDUAL, positions[r] + moves, lanes[r])
        for blk in range(masses.shape[1]):
            words[r, blk] = token_word(lanes[r, 0], lanes[r, 1], BLOCK_BASE + blk)


@njit
def _is_dup(r, c, parent, rank, x_ok, candidates):
    """Whether an earlier sibling of c (in the vocabulary) holds c's token."""
    for j in range(parent.shape[1]):
        if (parent[r, j] == parent[r, c] and rank[r, j] < rank[r, c] and x_ok[r, j]
                and candidates[r, j] == candidates[r, c]):
            return True
    return False


@njit
def race_tokens(p, shift_p, last, tried, n_tried, empty, block, noise, bonus):
    """Pass 3: the winning token within each request's block, its weights read again (the
    tried tokens 0 unless the draw fell back to p; 0 past the vocabulary)."""
    vocab = p.shape[2]
    weights = np.empty(BLOCK, np.float32)
    for r in range(last.shape[0]):
        base = block[r] * BLOCK
        for t in range(BLOCK):
            column = base + t
            weights[t] = raw_value(p, r, last[r], column, shift_p) if column < vocab else 0.0
        if not empty[r]:
            for i in range(n_tried[r]):
                if base <= tried[r, i] < base + BLOCK:
                    weights[tried[r, i] - base] = np.float32(0.0)
        bonus[r] = min(base + first_argmax(weights, noise[r]), vocab - 1)


@njit
def assemble(candidates, retrieve_index, path, count, bonus, predicts, accept_index, out):
    """`tree_verify_greedy.assemble_result`'s outputs: the accepted drafts then the bonus
    (`out`), the accepted path's retrieve_index (-1 padded) and `predicts` [b*N]. Returns False
    (the torch assembly decides, or raises) where a retrieve_index on the path lies outside
    [0, b*N) or repeats, which its indexed write leaves to torch."""
    b, slots = path.shape
    for i in range(predicts.shape[0]):
        predicts[i] = -1
    for r in range(b):
        for k in range(slots):
            if k < count[r]:
                out[r, k] = candidates[r, max(path[r, k + 1], 0)] if k + 1 < slots else (
                    candidates[r, 0])
            elif k == count[r]:
                out[r, k] = bonus[r]
            else:
                out[r, k] = -1
            node = path[r, k]
            accept_index[r, k] = retrieve_index[r, node] if node >= 0 else node
            if node >= 0:
                at = accept_index[r, k]
                if at < 0 or at >= predicts.shape[0] or predicts[at] != -1:
                    return False
                predicts[at] = out[r, k]
    return True
