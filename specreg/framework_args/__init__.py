"""SGLang's and vLLM's framework rules and checkpoint reading, as data beside the config type.

The one table of spellings specreg reads is `specreg.contract.framework_flags` (the config type
tells a framework flag from a config key with it); here `model_config` reads a checkpoint's
config.json, and `rules` holds each framework's defaults and the rules its runtime enforces.
`specreg.registry.translate` maps the spellings onto a `SpecConfig` (it depends on the config type, never
the reverse) and `specreg.cli.framework_findings` applies the rules to a resolved plan.
Imports neither torch nor triton.
"""
