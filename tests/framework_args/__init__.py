"""Tests of specreg/framework_args/: SGLang and vLLM flag spellings and their rules."""
