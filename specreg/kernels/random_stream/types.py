"""The random stream's layout values, shared by its reference, torch and Triton implementations."""

MASK32 = 0xFFFFFFFF
#: Start values of the two key lanes (golden ratio and murmur3's first finalizer constant).
LANE_STARTS = (0x9E3779B9, 0x85EBCA77)
#: Bits of the word a float32 uniform keeps (float32 holds (k + 0.5) * 2**-23 exactly).
UNIFORM_BITS = 23
