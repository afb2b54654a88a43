"""specreg's built-in lookup plugin: `ngram` (prompt lookup, alias `prompt_lookup`) and `suffix`
(alias `suffix_decoding`).

`specreg_lookup.plugin` holds the hooks (torch-free), `specreg_lookup.sizes` the options and
their checks, `specreg_lookup.errors` the codes SR490-SR495. The kernels live in
`specreg_lookup.kernels` (`ngram_match`, `match_tree`, `tree_verify`); the plan's objects are
`specreg_lookup.drafter.NgramDrafter` / `SuffixDrafter` and
`specreg_lookup.verifier.LookupVerifier`.
"""
