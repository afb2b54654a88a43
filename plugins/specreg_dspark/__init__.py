"""specreg's built-in DSpark plugin: the `dspark` and `dflash` block-drafting algorithms.

`specreg_dspark.plugin` holds the hooks; `checkpoint` reads the draft checkpoint's config.json;
`sizes` states what a resolved config implies (gamma, widths, layout). These import neither
torch nor triton. The kernels (`specreg_dspark.kernels.draft_block`, `.markov_greedy`,
`.markov_head`), `drafter.BlockDrafter` and `verifier.BlockVerifier` import torch.
"""

from specreg_dspark import errors as _errors  # noqa: F401 - registers its error codes
