"""Tests of the lookup plugin (plugins/specreg_lookup): ngram and suffix drafters, against vLLM and arctic-inference."""
