"""The two-level exponential race in Triton tiles: block sums, the running first-best, the tile width.

The Triton twin of `specreg.kernels.block_race`: a verify kernel streams a row in BLOCK_V
tiles (`race_tile`: at least one race block of `RACE_BLOCK` tokens), sums each tile's
128-token blocks in the one fixed order every backend uses (`block_sums`), races the blocks
(mass / E, the random stream's exponentials) keeping the earliest winner (`first_best`), then
reads the winning block again. The chain kernels (`specreg.kernels.chain`'s `emit_token`) and
EAGLE's tree sampling kernel race with these.
"""

from __future__ import annotations

from specreg.kernels.random_stream.types import RACE_BLOCK
from specreg.kernels.triton_shim import tl, triton, vocab_tile

if triton is not None:

    @triton.jit
    def block_sums(x, NBT: tl.constexpr):
        """[NBT * 128] float32 -> [NBT] block masses, halves added elementwise (the summation
        order `block_masses_torch` and the reference use, so every backend gets the same bits;
        a size-2 sum is one IEEE add)."""
        x = tl.reshape(x, [NBT, 128])
        x = tl.sum(tl.reshape(x, [NBT, 2, 64]), axis=1)
        x = tl.sum(tl.reshape(x, [NBT, 2, 32]), axis=1)
        x = tl.sum(tl.reshape(x, [NBT, 2, 16]), axis=1)
        x = tl.sum(tl.reshape(x, [NBT, 2, 8]), axis=1)
        x = tl.sum(tl.reshape(x, [NBT, 2, 4]), axis=1)
        x = tl.sum(tl.reshape(x, [NBT, 2, 2]), axis=1)
        return tl.sum(tl.reshape(x, [NBT, 2, 1]), axis=1).reshape([NBT])

    @triton.jit
    def first_best(scores, ids, best, best_id):
        """The running race: the tile's largest score (first id on ties) replaces `best` only
        when strictly larger, so the earliest winner is kept."""
        top = tl.max(scores, axis=0)
        top_id = tl.min(tl.where(scores == top, ids, 1 << 62), axis=0)
        better = top > best
        return tl.where(better, top, best), tl.where(better, top_id, best_id)


def race_tile(vocab: int, block_v: int | None) -> int:
    """BLOCK_V of the kernels that draw by the race: `vocab_tile`, at least one race block."""
    return max(vocab_tile(vocab, block_v), RACE_BLOCK)
