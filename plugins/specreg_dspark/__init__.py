"""specreg's built-in DSpark plugin: the `dspark` and `dflash` block-drafting algorithms.

Importing this package (or `specreg_dspark.plugin`) does not import torch or triton; the kernels
(`specreg_dspark.kernels`, `specreg_dspark.markov`, `specreg_dspark.verifier`) import torch.
"""

from specreg_dspark import errors as _errors  # noqa: F401 - registers its error codes
from specreg_dspark.config import (
    DEFAULT_DFLASH_BLOCK_SIZE,
    DEFAULT_DSPARK_GAMMA,
    MARKOV_HEAD_TYPES,
    BlockRuntime,
    DFlashDraftConfig,
    DSparkDraftConfig,
    analyse_dflash,
    analyse_dspark,
    gamma_from_num_draft_tokens,
    parse_dflash_draft_config,
    parse_dspark_draft_config,
    resolve_runtime_config,
)

__all__ = [
    "DEFAULT_DFLASH_BLOCK_SIZE",
    "DEFAULT_DSPARK_GAMMA",
    "MARKOV_HEAD_TYPES",
    "BlockRuntime",
    "DFlashDraftConfig",
    "DSparkDraftConfig",
    "analyse_dflash",
    "analyse_dspark",
    "gamma_from_num_draft_tokens",
    "parse_dflash_draft_config",
    "parse_dspark_draft_config",
    "resolve_runtime_config",
]
