"""`offlint fix`: rewrite capture hazards into correct code.

- `shape.py` finds the prefetch/wait offloader shape by behaviour;
- `offloader_rewrite.py` turns it capture-aware (`overlap`: primed prefetch, `inline`);
- `mechanical.py` holds the small one-statement fixes (OFL204, OFL106);
- `apply.py` runs the fixers to convergence and refuses results that do not parse;
- `writes.py` writes atomically and never over a file that changed since it was read;
- `diffs.py` renders the unified diff; `command.py` is the click command.

Nothing here imports torch.
"""
