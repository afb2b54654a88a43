"""Import-only stand-in for torchvision, used by the framework parity tests and nowhere else.

PyPI's torchvision is a CUDA build that fails to load beside the CPU torch; SGLang and
transformers import it while their modules load, but config resolution never calls it. Any
submodule imports, any attribute is a stand-in, and calling one raises, so a test that reaches
real vision code fails loudly instead of passing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0"


class _StandInMeta(type):
    def __getattr__(cls, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{cls.__qualname__}.{name}")


def _stand_in(name: str) -> type:
    def _refuse(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError(f"torchvision {name} is an import-only stand-in in specreg's tests")

    return _StandInMeta(name, (), {"__new__": _refuse, "__qualname__": name})


def _module_getattr(module_name: str):  # noqa: ANN202
    def __getattr__(name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(f"{module_name}.{name}")

    return __getattr__


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):  # noqa: ANN001, ANN201
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):  # noqa: ANN001, ANN201
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _module_getattr(spec.name)
        return module

    def exec_module(self, module):  # noqa: ANN001, ANN201
        return None


sys.meta_path.insert(0, _Finder())
__getattr__ = _module_getattr(__name__)
