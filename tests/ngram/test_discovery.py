"""The example plugin examples/specreg-ngram, installed for real and discovered by specreg.

A session fixture pip-installs the example (and, into a second location, the rival test
distribution under data/) once; every check then runs in a subprocess whose PYTHONPATH holds
the install location, exactly as an installed plugin is seen by a serving process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NGRAM_SRC = REPO / "examples" / "specreg-ngram"
RIVAL_SRC = Path(__file__).resolve().parent / "data" / "specreg-ngram-rival"


def _pip_install(source: Path, workdir: Path) -> Path:
    """Install `source` with pip into workdir/site (building from a copy keeps the tree clean)."""
    copy = workdir / source.name
    shutil.copytree(
        source, copy, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "tests")
    )
    target = workdir / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(copy),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> dict[str, Path]:
    return {
        "ngram_example": _pip_install(NGRAM_SRC, tmp_path_factory.mktemp("ngram_example")),
        "rival": _pip_install(RIVAL_SRC, tmp_path_factory.mktemp("rival")),
    }


def run(*paths: Path, args: list[str], allowlist: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SPECREG_PLUGINS", "PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    if allowlist is not None:
        env["SPECREG_PLUGINS"] = allowlist
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )


def python(*paths: Path, code: str, allowlist: str | None = None) -> dict:
    done = run(*paths, args=["-c", code], allowlist=allowlist)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def specreg_list(*paths: Path, allowlist: str | None = None) -> dict:
    """`specreg list --json`, which exits 1 exactly when some plugin failed to load."""
    done = run(*paths, args=["-m", "specreg", "list", "--json"], allowlist=allowlist)
    listing = json.loads(done.stdout)
    assert done.returncode == (1 if listing["failures"] else 0), done.stderr
    return listing


def by_name(items: list[dict]) -> dict[str, dict]:
    return {item["name"]: item for item in items}


LOAD_CODE = """
import json, sys
from specreg import Registry
registry = Registry.load()
spec = registry.get_algorithm("ngram_example")
plugins = {p.name: p.to_dict() for p in registry.plugins()}
print(json.dumps({
    "spec": spec.to_dict(),
    "alias": registry.get_algorithm("prompt_lookup_example").name,
    "plugin": plugins["ngram_example"],
    "torch_imported": "torch" in sys.modules,
}))
"""


def test_registry_discovers_the_installed_distribution(installed):
    found = python(installed["ngram_example"], code=LOAD_CODE)
    spec = found["spec"]
    assert (spec["plugin"], spec["distribution"], spec["version"]) == (
        "ngram_example",
        "specreg-ngram",
        "0.1.0",
    )
    assert spec["capabilities"]["drafting"] == "chain"
    assert spec["capabilities"]["owns_draft_kv"] is False
    assert found["alias"] == "ngram_example"
    assert found["plugin"]["distribution"] == "specreg-ngram"
    assert found["plugin"]["version"] == "0.1.0"
    assert "specreg_register_algorithms" in found["plugin"]["hooks"]
    assert found["torch_imported"] is False  # loading plugins never imports torch


def test_list_json_shows_ngram_with_its_version(installed):
    listing = specreg_list(installed["ngram_example"])
    ngram = by_name(listing["algorithms"])["ngram_example"]
    assert (ngram["distribution"], ngram["version"]) == ("specreg-ngram", "0.1.0")
    assert ngram["aliases"] == ["prompt_lookup_example"]
    assert by_name(listing["plugins"])["ngram_example"]["version"] == "0.1.0"
    assert not [f for f in listing["failures"] if f["plugin"] == "ngram_example"]


def test_listed_only_where_installed(installed):
    """Without the temporary install, ngram is listed exactly when this environment has the
    distribution (a developer may have run `pip install -e examples/specreg-ngram`)."""
    import importlib.metadata

    try:
        importlib.metadata.distribution("specreg-ngram")
        in_environment = True
    except importlib.metadata.PackageNotFoundError:
        in_environment = False
    listing = specreg_list()
    assert ("ngram_example" in by_name(listing["algorithms"])) is in_environment


def test_allowlist_without_ngram_leaves_it_out(installed):
    listing = specreg_list(installed["ngram_example"], allowlist="eagle")
    assert "ngram_example" not in by_name(listing["algorithms"])
    attempted = set(by_name(listing["plugins"])) | {f["plugin"] for f in listing["failures"]}
    assert attempted == {"eagle", "specreg.default"}


def test_allowlist_with_only_ngram_loads_only_ngram(installed):
    listing = specreg_list(installed["ngram_example"], allowlist="ngram_example")
    assert list(by_name(listing["algorithms"])) == ["ngram_example"]
    assert set(by_name(listing["plugins"])) == {"ngram_example", "specreg.default"}
    assert listing["failures"] == []


def test_empty_allowlist_loads_no_plugin(installed):
    listing = specreg_list(installed["ngram_example"], allowlist="")
    assert listing["algorithms"] == [] and listing["failures"] == []
    assert set(by_name(listing["plugins"])) == {"specreg.default"}


def test_same_name_without_override_is_a_conflict_naming_both_distributions(installed):
    listing = specreg_list(installed["ngram_example"], installed["rival"], allowlist="ngram_example,ngram_rival")
    assert "ngram_example" not in by_name(listing["algorithms"])
    (conflict,) = [f for f in listing["failures"] if f["code"] == "SR112"]
    assert "'ngram_example'" in conflict["message"]
    assert "specreg-ngram 0.1.0" in conflict["message"]
    assert "specreg-ngram-rival 0.2.0" in conflict["message"]
    done = run(
        installed["ngram_example"],
        installed["rival"],
        args=["-m", "specreg", "check", "--speculative-algorithm", "ngram_example"],
        allowlist="ngram_example,ngram_rival",
    )
    assert done.returncode != 0
    assert "SR112" in done.stdout + done.stderr


RESOLVE_CODE = """
import json
from specreg import Registry
plan = Registry.load().resolve({"algorithm": "ngram_example"%s})
print(json.dumps({"spec": plan.algorithm.to_dict(), "config": plan.config.to_dict(),
                  "gamma": plan.gamma}))
"""


def test_override_replaces_the_algorithm_and_its_hooks(installed):
    listing = specreg_list(installed["ngram_example"], installed["rival"], allowlist="ngram_example,ngram_override")
    ngram = by_name(listing["algorithms"])["ngram_example"]
    assert (ngram["plugin"], ngram["distribution"], ngram["version"]) == (
        "ngram_override",
        "specreg-ngram-rival",
        "0.2.0",
    )
    assert ngram["capabilities"]["verify_rules"] == ["greedy"]
    assert listing["failures"] == []
    # The shadowed plugin's hooks no longer answer for `ngram_example`: with no size given, the
    # rival's spec default (6) applies; with num_steps 2 both infer num_draft_tokens 3 (the
    # example by its own hook, the rival by specreg's default chain resolution).
    plan = python(
        installed["ngram_example"], installed["rival"], code=RESOLVE_CODE % "", allowlist="ngram_example,ngram_override"
    )
    assert plan["spec"]["distribution"] == "specreg-ngram-rival"
    assert plan["config"]["num_draft_tokens"] == 6 and plan["gamma"] == 5
    original = python(installed["ngram_example"], code=RESOLVE_CODE % ', "num_steps": 2', allowlist="ngram_example")
    assert original["config"]["num_draft_tokens"] == 3 and original["gamma"] == 2


def test_the_example_unit_tests_pass_against_the_installed_copy(installed):
    done = run(
        installed["ngram_example"],
        args=["-m", "pytest", "-q", "-p", "no:cacheprovider", str(NGRAM_SRC / "tests")],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    code = "import specreg_ngram, json; print(json.dumps(specreg_ngram.__file__))"
    assert python(installed["ngram_example"], code=code).startswith(str(installed["ngram_example"]))


CONFORMANCE_CODE = """
import json
from specreg import Registry
from specreg.testing.conformance import check_algorithm
report = check_algorithm(Registry.load(), "ngram_example")
print(json.dumps({"checked": len(report.checked), "failures": report.failures}))
"""


def test_the_installed_plugin_passes_the_conformance_kit(installed):
    report = python(installed["ngram_example"], code=CONFORMANCE_CODE, allowlist="ngram_example")
    assert report["failures"] == [] and report["checked"] > 10


def test_the_installed_plugin_runs_in_specreg_demo(installed):
    done = run(
        installed["ngram_example"],
        args=["-m", "specreg", "demo", "--algorithm", "ngram_example", "--json", "--steps", "24"],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert {(r["algorithm"], r["cache"]) for r in rows} == {("ngram_example", "-"), ("ngram_example", "hisparse")}
    assert all(r["lossless"] for r in rows)
    plan = python(
        installed["ngram_example"],
        code="import json; from specreg import Registry; "
        "print(json.dumps(Registry.load().resolve({'algorithm': 'ngram_example'}).to_dict()))",
    )
    assert plan["drafter"] == "NgramDrafter"  # the plan carries the model-free drafter


def test_the_plugin_registers_its_own_error_code(installed):
    done = run(installed["ngram_example"], args=["-m", "specreg", "explain", "SR501"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("SR501: ngram: num_draft_tokens must be num_steps + 1")
    done = run(installed["ngram_example"], args=["-m", "specreg", "check", "--speculative-algorithm",
                                         "ngram_example", "--speculative-num-steps", "3",
                                         "--speculative-num-draft-tokens", "6"])
    assert done.returncode == 1 and "[SR501]" in done.stdout
    assert run(args=["-m", "specreg", "explain", "SR501"]).returncode == 1  # not installed
