"""specreg's built-in Medusa plugin: `medusa`, k heads on the target's last hidden state.

`specreg_medusa.plugin` holds the hooks (torch-free), `specreg_medusa.checkpoint` reads the
heads' config.json, `specreg_medusa.sizes` the static tree and its EAGLE tree layout, and the
plan's drafter is `specreg_medusa.drafter.MedusaDrafter`; verification is the EAGLE plugin's
tree verifier (`specreg_eagle.verifier.EagleVerifier`) on the same tree kernels.
"""

from specreg_medusa import errors as _errors  # noqa: F401 - registers its error codes
