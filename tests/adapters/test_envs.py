"""The pinned framework environment: its cache key and how a failed build reports itself."""

from __future__ import annotations

import sys

import pytest

from tests.adapters import envs


def test_key_depends_on_pins_and_requirement_files(monkeypatch):
    key = envs.env_key()
    assert key == envs.env_key() and len(key) == 16
    monkeypatch.setattr(envs, "FRAMEWORK_PINS", ("sglang==0.5.24", "vllm==0.33.0"))
    assert envs.env_key() != key


def test_cache_lives_under_the_users_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("SPECREG_FRAMEWORK_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert envs.cache_root() == tmp_path / "specreg" / "frameworks"


def test_a_failed_step_names_itself_and_the_log(tmp_path):
    log = tmp_path / "build.log"
    with pytest.raises(envs.FrameworkEnvError) as info:
        envs._run("install sglang and vllm without dependencies",
                  [sys.executable, "-c", "import sys; print('no such release'); sys.exit(3)"], log)
    text = str(info.value)
    assert "install sglang and vllm without dependencies" in text and "exit 3" in text
    assert str(log) in text and "no such release" in text


def test_the_heavy_environment_holds_no_checkout():
    # nothing of any checkout is in the key, so every checkout shares the one build
    assert str(envs.REPO_ROOT) not in repr(envs.FRAMEWORK_PINS + envs.RUNTIME_PINS + envs.SPECREG_PINS)
    assert not any("specreg" in pin.split("==")[0] for pin in envs.SPECREG_PINS)


def _fake_checkout(root, value):
    """A checkout whose adapter entry point names `value` (its own module, on its own path)."""
    for project, _ in envs.checkout_projects(root):
        project.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "specreg"\nversion = "0.1.0"\n'
        f'[project.entry-points."sglang.srt.plugins"]\nspecreg = "{value}:load"\n'
    )
    (root / f"{value}.py").write_text(f"WHERE = {str(root)!r}\n")
    (root / "examples" / "specreg-ngram" / "pyproject.toml").write_text(
        '[project]\nname = "specreg-ngram"\nversion = "0.1.0"\n'
        '[project.entry-points.specreg]\nngram = "specreg_ngram.plugin"\n'
    )


def test_two_checkouts_get_two_overlays_that_never_see_each_other(tmp_path):
    import json
    import subprocess

    first, second = tmp_path / "one", tmp_path / "two"
    _fake_checkout(first, "checkout_one")
    _fake_checkout(second, "checkout_two")
    cache = tmp_path / "cache"
    overlays = [envs.write_overlay(cache, first), envs.write_overlay(cache, second)]
    assert overlays[0] != overlays[1] and overlays[0].parent == overlays[1].parent
    probe = (
        "import json, importlib, importlib.metadata as md\n"
        "ep = [e for e in md.entry_points(group='sglang.srt.plugins') if e.name == 'specreg']\n"
        "mod = importlib.import_module(ep[0].value.split(':')[0])\n"
        "print(json.dumps([e.value for e in ep], ) + '|' + mod.WHERE)\n"
    )
    seen = []
    for checkout, overlay in zip((first, second), overlays, strict=True):
        built = envs.FrameworkEnv(root=tmp_path, build_seconds=0.0, overlay=overlay, checkout=checkout)
        env = built.subprocess_env()
        run = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True,
                             env=env, check=True, cwd=tmp_path)
        values, where = run.stdout.strip().split("|")
        seen.append((json.loads(values), where))
    assert seen == [(["checkout_one:load"], str(first)), (["checkout_two:load"], str(second))]
    # rewriting one overlay (a changed pyproject) leaves the other as it was
    before = (overlays[1] / "specreg-0.1.0.dist-info" / "entry_points.txt").read_text()
    (first / "pyproject.toml").write_text((first / "pyproject.toml").read_text().replace(
        "checkout_one", "checkout_uno"))
    envs.write_overlay(cache, first)
    assert "checkout_uno" in (overlays[0] / "specreg-0.1.0.dist-info" / "entry_points.txt").read_text()
    assert (overlays[1] / "specreg-0.1.0.dist-info" / "entry_points.txt").read_text() == before


def test_the_overlay_carries_this_checkouts_entry_points(tmp_path):
    overlay = envs.write_overlay(tmp_path)
    text = (overlay / "specreg-0.1.0.dist-info" / "entry_points.txt").read_text()
    assert "[sglang.srt.plugins]\nspecreg = specreg.adapters.sglang:load" in text
    assert "[vllm.general_plugins]\nspecreg = specreg.adapters.vllm:load" in text
    assert "eagle = specreg_eagle.plugin" in text
    ngram = (overlay / "specreg_ngram-0.1.0.dist-info" / "entry_points.txt").read_text()
    assert "ngram_example = specreg_ngram.plugin" in ngram
    assert (overlay / "checkout.txt").read_text().strip() == str(envs.REPO_ROOT)
    # specreg reads top_level.txt to tell its shipped plugins (codes SR200-SR499) from others
    shipped = (overlay / "specreg-0.1.0.dist-info" / "top_level.txt").read_text().split()
    assert shipped == ["specreg", "specreg_draft_model", "specreg_dspark", "specreg_eagle",
                       "specreg_hisparse", "specreg_lookup", "specreg_medusa"]
    assert (overlay / "specreg_ngram-0.1.0.dist-info" / "top_level.txt").read_text() == "specreg_ngram\n"


def test_the_framework_subprocess_imports_this_checkout(framework_env, tmp_path):
    """In the pinned environment, specreg and its entry points come from this checkout."""
    import json
    import subprocess

    probe = (
        "import json, importlib.metadata as md, specreg, specreg_eagle, specreg_ngram\n"
        "from specreg.registry.registry import Registry\n"
        "registry = Registry.load()\n"
        "eps = {g: sorted(e.value for e in md.entry_points(group=g)) for g in "
        "('sglang.srt.plugins', 'vllm.general_plugins', 'specreg')}\n"
        "print(json.dumps({'files': [specreg.__file__, specreg_eagle.__file__, "
        "specreg_ngram.__file__], 'eps': eps, 'failures': [str(f) for f in registry.failures],"
        "'algorithms': sorted(a.name for a in registry.algorithms())}))\n"
    )
    run = subprocess.run([str(framework_env.python), "-c", probe], capture_output=True, text=True,
                         env=framework_env.subprocess_env(), check=True, timeout=300,
                         cwd=tmp_path)  # not the checkout: its egg-info would answer instead
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert all(f.startswith(str(envs.REPO_ROOT)) for f in found["files"]), found
    assert found["eps"]["sglang.srt.plugins"] == ["specreg.adapters.sglang:load"]
    assert [e for e in found["eps"]["vllm.general_plugins"] if "specreg" in e] == [
        "specreg.adapters.vllm:load"]
    assert "specreg_ngram.plugin" in found["eps"]["specreg"]
    # the built-in plugins load there as shipped plugins, the example as a third-party one
    assert found["failures"] == [] and {"eagle", "dspark", "ngram"} <= set(found["algorithms"])
    # the environment itself has no specreg installed
    assert not list((framework_env.root / "lib").glob("python*/site-packages/specreg*"))


def test_the_build_reports_its_steps(tmp_path, monkeypatch):
    monkeypatch.setattr(envs, "PROGRESS_EVERY_S", 0.2)
    lines = []
    log = tmp_path / "build.log"
    envs._run("slow step", [sys.executable, "-c",
                            "import time\nprint('Collecting a', flush=True)\ntime.sleep(1.5)"],
              log, lines.append)
    # a loaded machine may start the child late: some report, after the print, counts it
    assert any("1 packages collected" in line for line in lines), lines
    assert all(line.endswith(" s") for line in lines), lines


def test_a_run_with_the_framework_tests_starts_the_missing_build_in_the_background(
        monkeypatch, tmp_path):
    """`start_if_needed` (tests/support/env_prebuild.py) starts `python -m tests.adapters.envs`
    only for a run that collects tests/adapters and only while the environment is not built."""
    from tests.support import env_prebuild

    root = envs.REPO_ROOT
    assert env_prebuild.includes_framework_tests([], root)
    assert env_prebuild.includes_framework_tests(["tests"], root)
    assert env_prebuild.includes_framework_tests(["tests/adapters/test_envs.py::test_x"], root)
    assert not env_prebuild.includes_framework_tests(["tests/kernels", "tests/cli/x.py"], root)
    started = []

    class Process:
        pid = 0

        def __init__(self, cmd, **kwargs):
            started.append((cmd, kwargs["cwd"]))

    monkeypatch.setattr(env_prebuild.subprocess, "Popen", Process)
    monkeypatch.setenv("SPECREG_FRAMEWORK_CACHE", str(tmp_path))
    assert env_prebuild.start_if_needed(["tests/kernels"], root) is None
    build = env_prebuild.start_if_needed([], root)
    assert started == [([sys.executable, "-m", "tests.adapters.envs"], root)]
    assert build.log == tmp_path / f"{envs.env_key()}.prebuild.log"
    (tmp_path / envs.env_key()).mkdir()
    (tmp_path / envs.env_key() / "build.json").write_text("{}")
    assert env_prebuild.start_if_needed([], root) is None and len(started) == 1


def test_the_framework_tests_run_after_the_kernel_tests_and_keep_their_order():
    from types import SimpleNamespace

    from tests.conftest import framework_tests_after_kernels

    ids = ["tests/adapters/a.py::1", "tests/cli/c.py::1", "tests/adapters/b.py::1",
           "tests/kernels/k.py::1", "tests/kernels/k.py::2", "tests/lookup/l.py::1"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    assert [item.nodeid for item in framework_tests_after_kernels(items)] == [
        "tests/cli/c.py::1", "tests/kernels/k.py::1", "tests/kernels/k.py::2",
        "tests/adapters/a.py::1", "tests/adapters/b.py::1", "tests/lookup/l.py::1"]
    without_kernels = [item for item in items if "kernels" not in item.nodeid]
    assert [item.nodeid for item in framework_tests_after_kernels(without_kernels)] == [
        "tests/adapters/a.py::1", "tests/adapters/b.py::1", "tests/cli/c.py::1",
        "tests/lookup/l.py::1"]
