"""Every link offlint prints or writes, made in one place so that each one resolves.

A rule's documentation is `{docs-url}/rules/{CODE}.md`. `docs-url` is a setting (`[tool.offlint]
docs-url = "https://…"`, for a team that hosts the docs); its shipped default is the docs folder
installed with offlint itself (the wheel carries `docs/` as `offlint/_docs`; a checkout has
`docs/`), as a `file:` URI, so the default link exists on the machine that wrote it. Where no
docs folder is found (a trimmed install) no URL is made: `offlint rule CODE` prints the same page.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def bundled_docs() -> Path | None:
    """The documentation installed with offlint: `offlint/_docs` in a wheel, `docs/` in a checkout."""
    for candidate in (_PACKAGE / "_docs", _PACKAGE.parent / "docs"):
        if (candidate / "rules").is_dir():
            return candidate
    return None


def docs_base(docs_url: str | None = None) -> str | None:
    """The base every documentation link starts with: `docs_url` when set, else the bundled docs."""
    if docs_url:
        return docs_url.rstrip("/")
    folder = bundled_docs()
    return folder.as_uri() if folder is not None else None


def rule_url(code: str, docs_url: str | None = None) -> str | None:
    """The page of rule `code`, or None when there is no documentation to point at."""
    base = docs_base(docs_url)
    return f"{base}/rules/{code}.md" if base is not None else None


def rule_help_line(code: str) -> str:
    """How to read a rule's documentation in any install: a command, never a dead link."""
    return f"offlint rule {code}"
