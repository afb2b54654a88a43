"""Adapters that load specreg into serving frameworks through the frameworks' own plugin systems.

`specreg.adapters.sglang` (entry-point group `sglang.srt.plugins`) and `specreg.adapters.vllm`
(group `vllm.general_plugins`) are off unless SPECREG_SGLANG / SPECREG_VLLM is `enforce` or
`shadow`; off, they return before touching the framework.
"""
