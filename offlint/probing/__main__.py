"""`python -m offlint.probing` runs `offlint probe` (useful where the CLI is not installed)."""

from offlint.probing.command import probe_command

probe_command(prog_name="offlint probe")
