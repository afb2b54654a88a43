"""specreg's built-in standalone draft-model plugin: `draft_model` (aliases `standalone`, `draft_target`).

`specreg_draft_model.plugin` holds the hooks (torch-free), `specreg_draft_model.checkpoint` reads
the draft checkpoint's config.json, and the plan's drafter is
`specreg_draft_model.drafter.DraftModelDrafter`; verification is specreg's chain verifier.
"""

from specreg_draft_model import errors as _errors  # noqa: F401 - registers its error codes
