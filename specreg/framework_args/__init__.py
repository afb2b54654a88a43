"""SGLang's and vLLM's speculative spellings and rules, as data below the config type.

`flags` is the one table of spellings specreg reads, `model_config` reads a checkpoint's
config.json, and `rules` holds each framework's defaults and the rules its runtime enforces.
`specreg.registry.translate` maps the spellings onto a `SpecConfig` (it depends on the config type, never
the reverse) and `specreg.cli.framework_findings` applies the rules to a resolved plan.
Imports neither torch nor triton.
"""
