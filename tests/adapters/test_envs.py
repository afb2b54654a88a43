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
