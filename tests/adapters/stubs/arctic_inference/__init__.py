"""Import-only stand-in for arctic-inference, used by the framework parity tests and nowhere else.

vLLM 0.33.0's `SpeculativeConfig` refuses `method="suffix"` unless a module named
`arctic_inference` can be found (`has_arctic_inference`), and its config validation uses nothing
else of it. The pinned framework environment does not install the real package (a compiled
wheel), so this stand-in lets the parity grid compare vLLM's own suffix validation. It has no
`suffix_decoding` submodule: anything that would really run suffix decoding fails to import.
"""

__version__ = "0.0.0"
