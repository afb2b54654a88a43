"""specreg's built-in Medusa plugin: `medusa`, k heads on the target's last hidden state.

`specreg_medusa.plugin` holds the hooks (torch-free), `specreg_medusa.checkpoint` reads the
heads' config.json, `specreg_medusa.sizes` the static tree and its tree layout (draft global
ids), and the plan's drafter is `specreg_medusa.drafter.MedusaDrafter`; verification is the
core's tree verifier (`specreg.step.tree_verifier.TreeVerifier`) on the core tree kernels.
"""

from specreg_medusa import errors as _errors  # noqa: F401 - registers its error codes
