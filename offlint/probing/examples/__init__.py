"""Bundled `--entry` examples: `offlint probe --entry NAME` (NAME is a file's name here, with
dashes for underscores). Each file's `build()` follows the protocol of offlint/probing/entry.py
and its docstring says what the probe should find."""
