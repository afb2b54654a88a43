"""Tools for testing speculative decoding end to end: toy models, a reference loop, the
conformance kit for plugin authors. Imports torch (unlike `import specreg`)."""
