"""The rejection_sampler installer against a vLLM whose seams moved or do not take a patch: a
coded error (SR182) naming the seam, never a silent fallback. Stand-in modules only (no vLLM
needed); the real vLLM is tests/adapters/test_vllm_rejection.py."""

from __future__ import annotations

import sys
import types

import pytest

from specreg.adapters import vllm_rejection
from specreg.errors import PluginError


class _Sticky(types.ModuleType):
    """A module that silently keeps `RejectionSampler` as it was (a patch that does not take)."""

    def __setattr__(self, name, value):
        if name != "RejectionSampler":
            super().__setattr__(name, value)


def _fake_vllm(monkeypatch, *, runner_class=types.ModuleType, drop=()) -> types.ModuleType:
    """Stand-ins for the vLLM 0.33 modules the installer reads; `drop` removes attributes."""

    class RejectionSampler:
        def __init__(self, *args, **kwargs):
            pass

    class SamplingParams:
        def _validate_spec_decode(self, speculative_config):
            return None

    def module(name, cls=types.ModuleType, **attrs):
        made = cls(name)
        for key, value in attrs.items():
            made.__dict__[key] = value
        monkeypatch.setitem(sys.modules, name, made)
        return made

    module("vllm", __version__="0.33.0")
    module("vllm.sampling_params", SamplingParams=SamplingParams)
    module("vllm.v1")
    module("vllm.v1.outputs", SamplerOutput=dict)
    module("vllm.v1.sample")
    module("vllm.v1.sample.rejection_sampler", RejectionSampler=RejectionSampler,
           MAX_SPEC_LEN=128)
    module("vllm.v1.sample.logits_processor", BUILTIN_LOGITS_PROCESSORS=[],
           LogitBiasLogitsProcessor=object, MinPLogitsProcessor=object, LogitsProcessors=list)
    module("vllm.v1.worker")
    runner = module("vllm.v1.worker.gpu_model_runner", runner_class,
                    RejectionSampler=RejectionSampler, build_logitsprocs=lambda *a: None)
    monkeypatch.setitem(sys.modules, "vllm.v1.worker.gpu", None)  # a build without V2
    for name in drop:
        delattr(runner, name)
    return runner


def test_a_moved_seam_is_sr182_naming_it(monkeypatch):
    _fake_vllm(monkeypatch, drop=("build_logitsprocs",))
    with pytest.raises(PluginError) as info:
        vllm_rejection.install(None)
    message = str(info.value)
    assert "SR182" in message and "vllm.v1.worker.gpu_model_runner.build_logitsprocs" in message
    assert "0.33.0" in message


def test_a_patch_that_does_not_take_is_sr182(monkeypatch):
    _fake_vllm(monkeypatch, runner_class=_Sticky)
    with pytest.raises(PluginError) as info:
        vllm_rejection.install(None)
    message = str(info.value)
    assert "SR182" in message and "did not apply" in message
    assert "vllm.v1.worker.gpu_model_runner.RejectionSampler" in message


def test_install_patches_each_seam_once(monkeypatch):
    runner = _fake_vllm(monkeypatch)
    original = runner.RejectionSampler
    vllm_rejection.install(None)
    patched = runner.RejectionSampler
    assert patched is not original and issubclass(patched, original)
    assert runner.build_logitsprocs.__wrapped__ is not None
    params = sys.modules["vllm.sampling_params"].SamplingParams
    assert params._validate_spec_decode.__specreg_substitution__
    vllm_rejection.install(None)  # a second plugin load in the process: nothing changes
    assert runner.RejectionSampler is patched
