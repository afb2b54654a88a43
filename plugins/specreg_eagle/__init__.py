"""specreg's built-in EAGLE plugin: `eagle` (alias `nextn`) and `eagle3`.

`specreg_eagle.plugin` holds the hooks (torch-free). The kernels live in `specreg_eagle.tree`
(draft-result organisation and tree building) and `specreg_eagle.verify` (greedy and sampling tree
verification); `specreg_eagle.verifier.EagleVerifier` drives them with tensors only.
"""

from specreg_eagle import errors as _errors  # noqa: F401 - registers its error codes
