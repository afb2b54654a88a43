"""Tiny model folders (a config.json each) for the framework-argument and parity tests: the
`model_dirs` fixture, registered by tests/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
              "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 512,
              "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
              "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
              "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 512,
              "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"},
    "dsa": {"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
            "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
            "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
            "vocab_size": 1000, "max_position_embeddings": 512, "rms_norm_eps": 1e-6,
            "kv_lora_rank": 32, "q_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
            "v_head_dim": 16, "n_routed_experts": 4, "n_shared_experts": 1,
            "num_experts_per_tok": 2, "first_k_dense_replace": 1, "index_topk": 2048,
            "index_head_dim": 32, "index_n_heads": 4, "torch_dtype": "bfloat16"},
    "dspark-draft": {"architectures": ["DSparkDraftModel"], "model_type": "llama",
                     "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
                     "vocab_size": 1000,
                     "dspark_config": {"block_size": 5, "markov_rank": 8,
                                       "markov_head_type": "vanilla", "mask_token_id": 999}},
    "dspark-draft-prefixed": {"architectures": ["DSparkDraftModel"], "model_type": "llama",
                              "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
                              "vocab_size": 1000, "dspark_block_size": 5, "dspark_markov_rank": 8,
                              "dspark_markov_head_type": "vanilla", "dspark_noise_token_id": 999},
    "dflash-draft": {"architectures": ["DFlashDraftModel"], "model_type": "llama",
                     "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
                     "vocab_size": 1000, "dflash_config": {"block_size": 8, "mask_token_id": 999}},
}


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    out = {}
    for name, config in MODEL_CONFIGS.items():
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(config))
        out[name] = root / name
    return out
