"""The run of `check` and `fix`: which files, which settings, cache, workers, fix confirmation,
writes and exit codes. The only layer that drives both analysis and fixing: analysis never
imports fixing (the pipeline hands the fixers' `FixConfirmer` to the engine).

- `check.py`: the analysis of many files (discovery, cache, prefilter, process pool);
- `check_command.py`: `offlint check` end to end (stdin, rendering, exit code);
- `fix.py`: `offlint fix` / `check --fix` end to end (fixes, atomic writes, report, exit code);
- `add_noqa.py`: `check --add-noqa` (a directive per finding, written in place).
"""
