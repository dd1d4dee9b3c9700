"""One module per rule, named `ofl<code>_<name>.py`, each defining one `Rule` subclass.

Modules are discovered, not listed, so adding a rule touches only its own two files.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from offlint.analysis.rule import Rule


@cache
def all_rules() -> dict[str, type[Rule]]:
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("ofl"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and getattr(value, "__module__", None) == module.__name__
            ):
                found[value.code] = value
    return dict(sorted(found.items()))
