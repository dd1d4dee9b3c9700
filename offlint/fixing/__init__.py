"""`offlint fix`: rewrite capture hazards into correct code.

- `shape.py` finds the prefetch/wait offloader shape by behaviour;
- `offloader_rewrite.py` turns it capture-aware (`overlap`: primed prefetch, `inline`);
- `findings.py` gives the fixers below the findings they act on (the rule's own, at the floor);
- `event_handoff.py`: an event recorded in one call and waited in another (tag, re-issue);
- `external_event.py`: the same when the producer cannot be re-issued (`external=True`);
- `fork_join.py`: a fork with no consumer, joined while capturing where its work ends;
- `hook_moves.py`: a hook that moves its module back after a captured forward (put back);
- `capture_test.py`: how a module spells the capture test (and `import torch` when needed);
- `compile_safe.py`: `--compile-safe`, rewrites with no capture test for code torch.compile traces;
- `mechanical.py` holds the small one-statement fixes (OFL204, OFL106);
- `apply.py` runs the fixers to convergence and refuses results that do not parse;
- `writes.py` writes atomically and never over a file that changed since it was read;
- `diffs.py` renders the unified diff;
- `availability.py` tells `check` which diagnostics a fixer really removes ([*]).

Nothing here imports torch.
"""
