"""Builds arctic-inference's suffix-decoding tree (its C++ `SuffixTree` and the Python
`SuffixDecodingCache`) from its source distribution, for CPU, outside the repository.

arctic-inference publishes CUDA wheels only, and its own build needs CMake, nanobind and a CUDA
torch. Suffix decoding is plain C++20 with no dependency, so this script builds just that part:
it downloads the pinned sdist with pip (or takes `--source`, an unpacked sdist or a checkout),
checks its sha256, compiles `suffix_tree.cc` with g++ beside a pybind11 binding written here
(the same class, method and attribute names as upstream's nanobind `bindings.cc`), and lays out
an importable `arctic_inference.suffix_decoding` package (upstream's `cache.py` and
`__init__.py`, unchanged) under `~/.cache/specreg/arctic-suffix/`. Nothing else of
arctic-inference is built or imported.

    python benchmarks/build_arctic_suffix.py            # build (once), print the folder to add
    python benchmarks/build_arctic_suffix.py --check    # exit 1 with the reason if it cannot

Use it with `sys.path.insert(0, folder)` (or PYTHONPATH), then
`from arctic_inference.suffix_decoding import SuffixDecodingCache`. `ensure_built()` does the
same from Python and raises `ArcticBuildError` saying which step failed (no compiler, no
pybind11, no network for the sdist, a checksum that differs).

The suffix-decoding sources of 0.3.0 equal those of the GitHub repository snowflakedb/
ArcticInference at 8d5d124 ("More suffix decoding optimizations", the last commit touching
them) and of every release since v0.1.0, 0.1.1 included (the version vLLM 0.33 asks for).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path

VERSION = "0.3.0"
SDIST = f"arctic_inference-{VERSION}.tar.gz"
SDIST_SHA256 = "7f22e3e1b1071c6061c0d6951be17c0fb50b08d06d6e543144c8f52faba60a36"
UPSTREAM_COMMIT = "8d5d124847ecb21ff40ec68f9229b576b360edd5"
CXX_FILES = ("suffix_tree.cc", "suffix_tree.h", "int32_map.h")
PY_FILES = ("__init__.py", "cache.py")
CXXFLAGS = ("-O2", "-DNDEBUG", "-std=c++20", "-shared", "-fPIC", "-fvisibility=hidden")
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specreg" / \
    "arctic-suffix"

#: The pybind11 twin of upstream's nanobind bindings.cc: same names, same argument order.
BINDINGS = r"""
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <span>
#include "suffix_tree.h"

namespace py = pybind11;
using Int32Array = py::array_t<int32_t, py::array::c_style>;

static std::span<const int32_t> view(const Int32Array& a) {
    if (a.ndim() != 1) throw std::invalid_argument("expected a 1-D int32 array");
    return std::span<const int32_t>(a.data(), static_cast<size_t>(a.size()));
}

PYBIND11_MODULE(_C, m) {
    py::class_<Draft>(m, "Draft")
        .def(py::init<>())
        .def_readwrite("token_ids", &Draft::token_ids)
        .def_readwrite("parents", &Draft::parents)
        .def_readwrite("probs", &Draft::probs)
        .def_readwrite("score", &Draft::score)
        .def_readwrite("match_len", &Draft::match_len);

    py::class_<SuffixTree>(m, "SuffixTree")
        .def(py::init<int>())
        .def("num_seqs", &SuffixTree::num_seqs)
        .def("remove", &SuffixTree::remove)
        .def("extend", [](SuffixTree& t, int seq_id, const std::vector<int32_t>& tokens) {
            t.extend(seq_id, std::span<const int32_t>(tokens));
        })
        .def("extend_ndarray", [](SuffixTree& t, int seq_id, const Int32Array& tokens) {
            t.extend(seq_id, view(tokens));
        })
        .def("speculate", [](SuffixTree& t, const std::vector<int32_t>& context,
                             int max_spec_tokens, float max_spec_factor, float max_spec_offset,
                             float min_token_prob, bool use_tree_spec) {
            return t.speculate(std::span<const int32_t>(context), max_spec_tokens,
                               max_spec_factor, max_spec_offset, min_token_prob,
                               use_tree_spec);
        })
        .def("speculate_ndarray", [](SuffixTree& t, const Int32Array& context,
                                     int max_spec_tokens, float max_spec_factor,
                                     float max_spec_offset, float min_token_prob,
                                     bool use_tree_spec) {
            return t.speculate(view(context), max_spec_tokens, max_spec_factor,
                               max_spec_offset, min_token_prob, use_tree_spec);
        })
        .def("check_integrity", &SuffixTree::check_integrity)
        .def("estimate_memory", &SuffixTree::estimate_memory);
}
"""


class ArcticBuildError(RuntimeError):
    """The suffix-decoding extension could not be built; the message names the step."""


def _say(line: str) -> None:
    print(f"[arctic-suffix] {line}", file=sys.stderr, flush=True)


def build_key() -> str:
    """Names one build: the pinned sdist, the binding text, the flags and this Python."""
    text = "|".join((SDIST_SHA256, BINDINGS, " ".join(CXXFLAGS), sys.version,
                     sysconfig.get_config_var("EXT_SUFFIX") or ""))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_dir() -> Path:
    return CACHE_ROOT / f"arctic_inference-{VERSION}-{build_key()}"


def _fetch_sdist(workdir: Path) -> Path:
    """The pinned sdist, through pip (no build, no dependencies), its checksum checked."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--no-build-isolation", "-d", str(workdir), f"arctic-inference=={VERSION}"]
    _say("downloading " + SDIST + " with pip")
    done = subprocess.run(cmd, capture_output=True, text=True)
    archive = workdir / SDIST
    if done.returncode != 0 or not archive.exists():
        raise ArcticBuildError(
            f"pip could not download {SDIST} (exit {done.returncode}): "
            f"{done.stderr.strip()[-600:]}; give an unpacked sdist or a checkout with --source")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise ArcticBuildError(f"{SDIST} has sha256 {digest}, expected {SDIST_SHA256}")
    with tarfile.open(archive) as tar:
        tar.extractall(workdir, filter="data")
    return workdir / f"arctic_inference-{VERSION}"


def _sources(root: Path) -> tuple[Path, Path]:
    cxx = root / "csrc" / "suffix_decoding"
    py = root / "arctic_inference" / "suffix_decoding"
    missing = [str(p) for p in [*(cxx / f for f in CXX_FILES), *(py / f for f in PY_FILES)]
               if not p.exists()]
    if missing:
        raise ArcticBuildError(f"{root} is not an arctic-inference source tree: no {missing[0]}")
    return cxx, py


def _compile(cxx: Path, out: Path) -> None:
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        raise ArcticBuildError("no C++ compiler: install g++ (C++20) or set CXX")
    try:
        import pybind11
    except ImportError as exc:
        raise ArcticBuildError("pybind11 is not installed: python -m pip install pybind11") \
            from exc
    bindings = out.parent / "bindings_pybind11.cc"
    bindings.write_text(BINDINGS)
    target = out / f"_C{sysconfig.get_config_var('EXT_SUFFIX')}"
    cmd = [compiler, *CXXFLAGS, f"-I{cxx}", f"-I{pybind11.get_include()}",
           f"-I{sysconfig.get_paths()['include']}", str(bindings), str(cxx / "suffix_tree.cc"),
           "-o", str(target)]
    _say("compiling: " + " ".join(cmd[:1] + list(CXXFLAGS)) + " ...")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ArcticBuildError(f"g++ failed (exit {done.returncode}): {done.stderr[-1500:]}")


def ensure_built(source: Path | None = None) -> Path:
    """The folder to put on sys.path for `arctic_inference.suffix_decoding`, built if needed."""
    final = build_dir()
    if (final / "BUILD.json").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent) as tmp:
        work = Path(tmp)
        root = source if source is not None else _fetch_sdist(work)
        cxx, py = _sources(root)
        package = work / "out" / "arctic_inference" / "suffix_decoding"
        package.mkdir(parents=True)
        (package.parent / "__init__.py").write_text(
            '"""arctic-inference\'s suffix decoding alone, built by specreg\'s '
            'benchmarks/build_arctic_suffix.py."""\n')
        for name in PY_FILES:
            shutil.copy2(py / name, package / name)
        _compile(cxx, package)
        (work / "out" / "BUILD.json").write_text(json.dumps({
            "arctic_inference": VERSION, "sdist_sha256": SDIST_SHA256,
            "upstream_commit": UPSTREAM_COMMIT, "source": str(source or SDIST),
            "cxxflags": list(CXXFLAGS), "python": sys.version.split()[0],
        }, indent=1) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(work / "out", final)
    _say(f"built into {final}")
    return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, help="an unpacked sdist or a checkout")
    parser.add_argument("--check", action="store_true",
                        help="build, import it and run one speculation; exit 1 on failure")
    args = parser.parse_args(argv)
    try:
        folder = ensure_built(args.source)
    except ArcticBuildError as exc:
        print(f"arctic-inference's suffix tree cannot be built here: {exc}", file=sys.stderr)
        return 1
    if args.check:
        sys.path.insert(0, str(folder))
        from arctic_inference.suffix_decoding import SuffixDecodingCache

        cache = SuffixDecodingCache(max_tree_depth=8, max_cached_requests=-1)
        cache.start_request("a", [1, 2, 3, 1, 2])
        draft = cache.speculate("a", [9, 1, 2], max_spec_tokens=4)
        if list(draft.token_ids) != [3, 1]:
            print(f"the built tree drafts {list(draft.token_ids)}, expected [3, 1]",
                  file=sys.stderr)
            return 1
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
