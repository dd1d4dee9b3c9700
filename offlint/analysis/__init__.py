"""Static analysis: parse, model, and run the rule catalogue over Python sources (needs libcst)."""
