"""SGLang's and vLLM's speculative spellings: flag table, config.json reading, rules, translation.

`flags` is the one table of spellings specreg reads, `model_config` reads a checkpoint's
config.json, `rules` holds each framework's defaults and the rules its runtime enforces, and
`translate` maps the spellings onto a `SpecConfig` (it depends on the config type, never the
reverse); `findings` applies the framework's rules to a resolved plan.
Imports neither torch nor triton.
"""
