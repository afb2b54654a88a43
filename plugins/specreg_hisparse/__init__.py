"""specreg's built-in HiSparse KV-cache backend (host KV cache + per-request device hot buffer).

Importing this package (or `specreg_hisparse.plugin`) imports neither torch nor triton; the
swapper and its kernels load when a plan is built.
"""

from specreg_hisparse import errors as _errors  # noqa: F401 - registers its error codes
