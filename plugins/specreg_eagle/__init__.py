"""specreg's built-in EAGLE plugin: `eagle` (alias `nextn`) and `eagle3`.

`specreg_eagle.plugin` holds the hooks (torch-free) and `specreg_eagle.sizes` the size rules
they apply. Its own kernel family is `specreg_eagle.kernels.select_topk`; trees are built and
verified by the core's tree families (`specreg.kernels.tree_*`). The plan's objects are
`specreg_eagle.drafter.EagleDrafter` and `specreg_eagle.verifier.EagleVerifier` (the core's
`TreeVerifier` plus `build_tree` from the draft loop's lists).
"""

from specreg_eagle import errors as _errors  # noqa: F401 - registers its error codes
