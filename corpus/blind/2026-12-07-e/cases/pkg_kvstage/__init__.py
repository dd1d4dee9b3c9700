# case: prefix-cache staging split across modules and re-exported under an alias; runner.py (absolute import of the package) captures the attention step and later swaps in a new pinned prefix
from .stage import HostStagedPrefix as StagedPrefix
from .runner import PrefixGraphRunner

__all__ = ["StagedPrefix", "PrefixGraphRunner"]
