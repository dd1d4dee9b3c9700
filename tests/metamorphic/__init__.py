"""Metamorphic tests of `offlint check` (issue 24, item 2).

Every bad and good example in `rules/*.toml` and every linter fixture in `fixtures/` is a seed;
`transforms.py` rewrites a seed into semantics-preserving variants (libcst codemods), and
`oracle.py` checks the relation: a bad seed's `# expect:` findings survive at their mapped lines,
a good seed stays clean. `harness.py` enumerates variants deterministically and aggregates.
"""
