"""The random stream's layout values, shared by its reference, torch and Triton implementations."""

MASK32 = 0xFFFFFFFF
#: Start values of the two key lanes (golden ratio and murmur3's first finalizer constant).
LANE_STARTS = (0x9E3779B9, 0x85EBCA77)
#: Bits of the word a float32 uniform keeps (float32 holds (k + 0.5) * 2**-23 exactly).
UNIFORM_BITS = 23

#: Tokens of the exponential race are drawn in blocks of this many ids (`specreg.kernels.block_race`).
RACE_BLOCK = 128
#: The stream's token key of race block j is BLOCK_KEY_BASE + j (above every token id).
BLOCK_KEY_BASE = 1 << 31

#: Draw roles: the stream's `request` word when a verifier or drafter keys a draw by
#: (request key, role, absolute position). Each role is an independent stream per position.
#: SAMPLE: plain sampling of a position (the target's token in the drafter-invariant mode, the
#: drafters' own draws on q, the bonus after every draft was accepted).
SAMPLE_ROLE = 0
#: RESIDUAL: the correction drawn after a rejection; independent of the SAMPLE draws, since a
#: drafter's draw on q from those would condition them.
RESIDUAL_ROLE = 1
#: ACCEPT: the acceptance uniforms, one per (position, draft token).
ACCEPT_ROLE = 2
