"""A pytest plugin that compiles every Triton kernel launch for sm80 and sm90 while the interpreter
still runs it: `python -m pytest -p tests.support.triton_compile ...` (no GPU needed).

Loaded with `-p`, it imports every `triton_impl` module with `TRITON_INTERPRET` unset, so their
kernels are real `JITFunction`s, then routes each launch two ways: `triton.compile` for each GPU
target on the launch's own specialisation (argument dtypes, divisibility, constexprs), and the
interpreter for the values the test asserts on. What the compiler accepts differs from what the
interpreter runs (loop-carried types, int64 promotion, constexpr branches, tuple returns), so a
kernel only the interpreter has seen is unchecked. At the end it writes what it compiled to
`$SPECREG_COMPILE_REPORT` (JSON) for `tests/kernels/test_triton_compile.py` to check coverage.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import time

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, make_backend  # noqa: E402
from triton.runtime.interpreter import InterpretedFunction, _patch_lang  # noqa: E402
from triton.runtime.jit import JITFunction, create_function_from_signature  # noqa: E402

REPORT_ENV = "SPECREG_COMPILE_REPORT"
TARGETS = (GPUTarget("cuda", 80, 32), GPUTarget("cuda", 90, 32))
#: Distinct specialisations compiled per kernel and target; later ones are interpreted only.
PER_KERNEL = 4
#: Packages whose `triton_impl` modules hold the kernels.
PACKAGES = ("specreg", "specreg_eagle", "specreg_dspark", "specreg_hisparse")
_LAUNCH_ONLY = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def triton_impl_modules() -> list[str]:
    """Every `*.triton_impl` module of the packages, imported (kernels defined as JITFunctions)."""
    names = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if info.name.endswith(".triton_impl"):
                importlib.import_module(info.name)
                names.append(info.name)
    return names


def kernel_names(module_names: list[str]) -> list[str]:
    """'module:name' of every module-level JITFunction named `*_kernel` (the launchable ones)."""
    found = []
    for name in module_names:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if isinstance(value, JITFunction) and attr.endswith("_kernel"):
                found.append(f"{name}:{attr}")
    return sorted(found)


class _Compiler:
    """Compiles each launch for every target (up to PER_KERNEL specialisations), then interprets."""

    def __init__(self) -> None:
        self.compiled: dict[str, dict[int, list[str]]] = {}
        self.seconds = 0.0
        self.launched: set[str] = set()
        # Keyed by id: hashing a JITFunction hashes its globals, which fails mid-launch.
        self._interpreted: dict[int, tuple[JITFunction, InterpretedFunction]] = {}

    def interpreted(self, kernel: JITFunction) -> InterpretedFunction:
        if id(kernel) not in self._interpreted:
            self._interpreted[id(kernel)] = (kernel, InterpretedFunction(kernel.fn))
        return self._interpreted[id(kernel)][1]

    def launch(self, kernel: JITFunction, args, grid, warmup, kwargs):
        name = f"{kernel.fn.__module__}:{kernel.fn.__name__}"
        self.launched.add(name)
        per_target = self.compiled.setdefault(name, {})
        for target in TARGETS:
            done = per_target.setdefault(target.arch, [])
            if len(done) >= PER_KERNEL:
                continue
            backend = make_backend(target)
            binder = create_function_from_signature(kernel.signature, kernel.params, backend)
            bound, specialization, options = binder(*args, **kwargs)
            options, signature, constexprs, attrs = kernel._pack_args(
                backend, kwargs, bound, specialization, options
            )
            key = json.dumps([signature, sorted(map(str, constexprs.items())), str(attrs)])
            if key in done:
                continue
            started = time.monotonic()
            triton.compile(
                ASTSource(kernel, signature, constexprs, attrs),
                target=target,
                options=options.__dict__,
            )
            self.seconds += time.monotonic() - started
            done.append(key)
        plain = {k: v for k, v in kwargs.items() if k not in _LAUNCH_ONLY}
        return self.interpreted(kernel).run(*args, grid=grid, warmup=warmup, **plain)


COMPILER = _Compiler()
MODULES = triton_impl_modules()
KERNELS = kernel_names(MODULES)


def _run(self, *args, grid, warmup, **kwargs):
    return COMPILER.launch(self, args, grid, warmup, kwargs)


def _device_call(self, *args, **kwargs):
    # As InterpretedFunction.__call__, but the language patch is undone on return: left in
    # place, it breaks the next compile.
    scope = _patch_lang(self.fn)
    try:
        return COMPILER.interpreted(self).rewrite()(*args, **kwargs)
    finally:
        scope.restore()


# Rewrite every jit function for the interpreter now: rewriting inside a launch (triton.language
# patched) hashes its globals and fails on the patched builtins.
for _module in (*MODULES, "triton.language.standard", "triton.language.math"):
    for _value in list(vars(importlib.import_module(_module)).values()):
        if isinstance(_value, JITFunction):
            COMPILER.interpreted(_value).rewrite()

JITFunction.run = _run
JITFunction.__call__ = _device_call
# The kernels are defined; from here on specreg's backend check and the tests see the interpreter.
os.environ["TRITON_INTERPRET"] = "1"


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    report = {
        "kernels": KERNELS,
        "compiled": {
            name: {str(arch): len(keys) for arch, keys in per.items()}
            for name, per in COMPILER.compiled.items()
        },
        "launched": sorted(COMPILER.launched),
        "compile_seconds": COMPILER.seconds,
    }
    with open(path, "w") as out:
        json.dump(report, out, indent=1)
