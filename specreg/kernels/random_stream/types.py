"""The random stream's layout values, shared by its reference, torch and Triton implementations."""

MASK32 = 0xFFFFFFFF
#: Start values of the two key lanes (golden ratio and murmur3's first finalizer constant).
LANE_STARTS = (0x9E3779B9, 0x85EBCA77)
#: Bits of the word a float32 uniform keeps (float32 holds (k + 0.5) * 2**-23 exactly).
UNIFORM_BITS = 23

#: Tokens of the exponential race are drawn in blocks of this many ids (`sampling` block race).
RACE_BLOCK = 128
#: The stream's token key of race block j is BLOCK_KEY_BASE + j (above every token id).
BLOCK_KEY_BASE = 1 << 31
#: The stream's token key of an acceptance coin (above every block key).
ACCEPT_KEY = MASK32
