"""specreg's built-in EAGLE plugin: `eagle` (alias `nextn`) and `eagle3`.

`specreg_eagle.plugin` holds the hooks (torch-free) and `specreg_eagle.sizes` the size rules
they apply. The kernels live in `specreg_eagle.kernels` (`select_topk`, `tree_build`,
`verify_greedy`, `verify_sampling`); the plan's objects are `specreg_eagle.drafter.EagleDrafter`
and `specreg_eagle.verifier.EagleVerifier`.
"""

from specreg_eagle import errors as _errors  # noqa: F401 - registers its error codes
